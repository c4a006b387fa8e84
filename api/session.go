package api

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"
)

// Session wire names.
const (
	// WorkflowSession is the workflow type of a session: one per (agent, instance).
	WorkflowSession = "Session"
	// UpdatePrompt sends a prompt to a session and returns its reply (PromptRequest →
	// PromptReply). With update-with-start it also creates the session.
	UpdatePrompt = "nexo.prompt"
	// UpdateClose ends a session after the prompt in progress, releasing its sandbox and
	// MCP clients. Its result is the session's carry, which reopening it starts from.
	UpdateClose = "nexo.close"
	// UpdateInterrupt ends the turn in flight (InterruptReply): its model or tool call is
	// cancelled and the turn ends with an interrupted turn_end; the session stays open.
	UpdateInterrupt = "nexo.interrupt"
	// UpdateSteer hands a message to the turn in flight (SteerRequest → SteerReply): a
	// user message added to the thread at the turn's next model call.
	UpdateSteer = "nexo.steer"
	// QuerySession returns the materialised history (SessionView).
	QuerySession = "nexo.session"
	// SignalStream carries streamed model output (StreamChunk) from the model activity
	// into the session's activity stream while the model is still writing.
	SignalStream = "nexo.stream"
)

// Activity-stream kinds of a session turn (seed 002).
const (
	StreamUserInput = "user_input"
	StreamText      = "text"
	StreamThinking  = "thinking"
	StreamToolCall  = "tool_call"
	StreamPlan      = "plan"
	StreamCommands  = "commands"
	StreamTurnEnd   = "turn_end"
	// StreamSteer: a message nexo.steer handed to the turn, as its next model call took it.
	StreamSteer = "steer"
)

// SessionID is the workflow id of the session of (agent, instance).
func SessionID(agent, instance string) string {
	return SessionIDPrefix + agent + ":" + instance
}

// ParseSessionID splits a session workflow id.
func ParseSessionID(id string) (agent, instance string, ok bool) {
	rest, found := strings.CutPrefix(id, SessionIDPrefix)
	if !found {
		return "", "", false
	}
	agent, instance, ok = strings.Cut(rest, ":")
	return agent, instance, ok && agent != "" && instance != ""
}

// ValidateInstance checks an instance id: printable, no ':' or '/', at most 200 bytes.
func ValidateInstance(instance string) error {
	if instance == "" || len(instance) > 200 || strings.ContainsAny(instance, ":/\\\x00\n\r\t ") {
		return fmt.Errorf("instance id %q: want 1-200 characters without spaces, ':' or '/'", instance)
	}
	return nil
}

// SessionInput starts (or continues) a session workflow.
type SessionInput struct {
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
	// Carry is the state of the run this one continues: after continue-as-new, or when a
	// closed session is reopened.
	Carry *SessionCarry `json:"carry,omitempty"`
	// ContinueAfterTurns forces continue-as-new after this many turns in one run (0: only
	// when Temporal suggests it or history passes the session's own bound). For tests and
	// operators who want small histories.
	ContinueAfterTurns int `json:"continue_after_turns,omitempty"`
	// Fork, when set, opens the session as a fork of another session's turn (`starter
	// session fork`): read only when set, so sessions started without it are unchanged.
	Fork *SessionFork `json:"fork,omitempty"`
}

// SessionFork is where a forked session starts: the source's thread as the turn found it
// (before the turn's prompt) and the workspace snapshot the turn found. Only references
// travel: the thread's head, the snapshot's manifest.
type SessionFork struct {
	// Session is the source's "agent/instance"; Turn the source turn forked at (its
	// number as `starter session show` lists it).
	Session string `json:"session"`
	Turn    int    `json:"turn"`
	// Thread and Messages are the source's thread before the turn's prompt: a stored
	// head and what follows it (Messages alone for a thread kept by value).
	Thread   *ThreadRef    `json:"thread,omitempty"`
	Messages []ChatMessage `json:"messages,omitempty"`
	// Snapshot is the manifest of the workspace the turn found ("" for an empty one, or
	// a sandbox that is not snapshotted). A continuation whose fork never used its sandbox
	// carries the fork with Snapshot only, so the restore still happens.
	Snapshot string `json:"snapshot,omitempty"`
}

// SessionCarry is everything a session keeps across runs.
type SessionCarry struct {
	// Thread is the conversation by value (session runs from before threads were
	// stored); with ThreadRef set, only the messages that follow the stored thread.
	Thread []ChatMessage `json:"thread"`
	// ThreadRef names the stored thread; Recent are its newest messages, for viewers.
	ThreadRef *ThreadRef    `json:"thread_ref,omitempty"`
	Recent    []ChatMessage `json:"recent,omitempty"`
	// Turns are the newest turns (all of them before threads were stored); TurnTotal
	// counts every turn so far (0: len(Turns)).
	Turns     []SessionTurn `json:"turns"`
	TurnTotal int           `json:"turn_total,omitempty"`
	// Approvals are the run's remembered --always / never decisions (permissions.Approvals
	// as JSON), and Stamps the file versions the agent read (read-before-write), so a
	// continued or reopened session keeps both.
	Approvals json.RawMessage      `json:"approvals,omitempty"`
	Stamps    map[string]FileStamp `json:"stamps,omitempty"`
	// Decided are the newest decided calls (at most MaxCarriedDecisions, oldest first),
	// so a decision on one of them after a continue-as-new is refused as "already decided
	// (how)", not as an unknown call.
	Decided []DecidedCall `json:"decided,omitempty"`
	// StreamOffset is the seq of the last activity-stream event so far; the next run
	// numbers on from it.
	StreamOffset int64 `json:"stream_offset"`
	// Segments are the archived activity-stream segments (artifacts of the session).
	Segments []Artifact `json:"segments,omitempty"`
	// Runs counts the workflow runs the session has had.
	Runs int `json:"runs"`
	// Usage sums every model call of the session so far (the record's usage), and
	// BudgetRaised what humans added to its session_max_tokens / session_max_cost.
	Usage        *RunUsage    `json:"usage,omitempty"`
	BudgetRaised *BudgetRaise `json:"budget_raised,omitempty"`
	// Host is the host the session's sandbox lives on, carried across continue-as-new
	// (nil in the carry nexo.close returns).
	Host *SandboxHost `json:"host,omitempty"`
}

// DecidedCall is a call a human (or a deadline) decided, and how: "approved by ada",
// "raised by +50000 tokens".
type DecidedCall struct {
	CallID string `json:"call_id"`
	How    string `json:"how"`
}

// MaxCarriedDecisions bounds SessionCarry.Decided: the memory of decided calls a session
// keeps across continue-as-new, newest kept.
const MaxCarriedDecisions = 256

// TurnCount is the number of turns the session has had.
func (c SessionCarry) TurnCount() int {
	return max(c.TurnTotal, len(c.Turns))
}

// SessionTurn is one prompt and its outcome, in the materialised history.
type SessionTurn struct {
	N        int       `json:"n"`
	Prompt   string    `json:"prompt"`
	Reply    string    `json:"reply,omitempty"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started_at"`
	Ended    time.Time `json:"ended_at"`
	FirstSeq int64     `json:"first_seq"`
	LastSeq  int64     `json:"last_seq"`
	Usage    Usage     `json:"usage"`
	// Interrupted: nexo.interrupt ended the turn before its answer.
	Interrupted bool `json:"interrupted,omitempty"`
	// ReplyRef names the blob holding the whole reply when it was over TextInlineMax
	// (Reply is then its preview, ReplyBytes its size): the session's state and its carry
	// hold the reference, never the text. runs.Client.Session puts the whole text back, so
	// `session show`, the API and the session page read it whole. Turns recorded before it
	// keep their preview.
	ReplyRef   string `json:"reply_ref,omitempty"`
	ReplyBytes int    `json:"reply_bytes,omitempty"`
}

// PromptRequest is the argument of UpdatePrompt.
type PromptRequest struct {
	Text string `json:"text"`
	// MaxTurns bounds this turn's model calls (0: the agent's max_turns).
	MaxTurns int `json:"max_turns,omitempty"`
	// Dir is the working directory of this turn's tools, relative to the workspace
	// ("": the workspace itself).
	Dir string `json:"dir,omitempty"`
}

// MaxPromptTurns is the largest max_turns a prompt may ask for.
const MaxPromptTurns = 1000

// Validate checks a prompt's options; the error names the bad field. A valid Dir is
// returned clean by CleanDir.
func (r PromptRequest) Validate() error {
	if strings.TrimSpace(r.Text) == "" {
		return fmt.Errorf("prompt text is empty")
	}
	if r.MaxTurns != 0 && (r.MaxTurns < 1 || r.MaxTurns > MaxPromptTurns) {
		return fmt.Errorf("max_turns %d: want a number of model calls from 1 to %d (leave it out for the agent's max_turns)", r.MaxTurns, MaxPromptTurns)
	}
	if _, err := CleanDir(r.Dir); err != nil {
		return err
	}
	return nil
}

// CleanDir checks a prompt's working directory and returns it clean ("" for the workspace
// itself): a directory relative to the workspace ("src/api"). An absolute path, or one
// that leads out of the workspace, is refused.
func CleanDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	if strings.ContainsAny(dir, "\x00\n\r") {
		return "", fmt.Errorf("dir %q: contains a control character", dir)
	}
	clean := path.Clean(dir)
	if path.IsAbs(clean) {
		return "", fmt.Errorf("dir %q is absolute: want a directory relative to the workspace (src/api, not /workspace/src/api)", dir)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("dir %q leads outside the workspace: want a directory inside it", dir)
	}
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// PromptReply is the result of UpdatePrompt.
type PromptReply struct {
	Turn  int    `json:"turn"`
	Reply string `json:"reply"`
	// ReplyRef names the blob holding the whole reply when it was over TextInlineMax
	// (Reply is then its preview, ReplyBytes its size); runs.Client.Prompt resolves it.
	ReplyRef   string `json:"reply_ref,omitempty"`
	ReplyBytes int    `json:"reply_bytes,omitempty"`
	// Interrupted: the turn was ended by nexo.interrupt before its answer (Reply is "").
	Interrupted bool `json:"interrupted,omitempty"`
}

// InterruptReply is the result of UpdateInterrupt: the turn it ended.
type InterruptReply struct {
	Turn int `json:"turn"`
}

// SteerRequest is the argument of UpdateSteer.
type SteerRequest struct {
	Text string `json:"text"`
}

// SteerReply is the result of UpdateSteer: the turn that takes the message.
type SteerReply struct {
	Turn int `json:"turn"`
}

// SessionView is the materialised history of a session.
type SessionView struct {
	ID       string `json:"id"`
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
	Status   Status `json:"status"`
	// Turns are the newest turns (at most 100), TurnCount all of them.
	Turns     []SessionTurn `json:"turns"`
	TurnCount int           `json:"turn_count"`
	// Messages are the thread's newest messages (the whole thread for sessions from
	// before threads were stored); MessageCount counts all of them.
	Messages     []ChatMessage `json:"messages"`
	MessageCount int           `json:"message_count"`
	// StreamOffset is the seq of the newest activity-stream event.
	StreamOffset int64 `json:"stream_offset"`
	Runs         int   `json:"runs"`
	// Usage sums every model call of the session, across its turns and runs.
	Usage *RunUsage `json:"usage,omitempty"`
}

// StreamChunk is the payload of SignalStream.
type StreamChunk struct {
	// Call identifies the model call (turn and step) the chunk belongs to.
	Call string `json:"call"`
	Kind string `json:"kind"` // text or thinking
	Text string `json:"text"`
}
