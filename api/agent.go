package api

import "encoding/json"

// Agent workflow and activity names.
const (
	// WorkflowAgentRun is the generic workflow that runs one agent on one prompt.
	WorkflowAgentRun = "AgentRun"

	ActivityResolveAgent     = "ResolveAgent"
	ActivityCompleteChat     = "CompleteChat"
	ActivityRunTool          = "RunTool"
	ActivityCollectOutputs   = "CollectOutputs"
	ActivityRestoreArtifacts = "RestoreArtifacts"
	ActivityCompactThread    = "CompactThread"
)

// EventOutputInvalid is the event of a final reply that is not JSON or does not validate
// against the agent's output_schema: {"turn", "error", "reply", "retries_left"}. With
// retries left the reply and the error go back to the model for a corrected reply;
// without, the run fails.
const EventOutputInvalid = "output_invalid"

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ChatMessage is one message of an agent's thread.
type ChatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ContentRef, when set, names the blob (sha256) holding the whole content, and Content
	// is only a preview: large tool outputs, and model replies over TextInlineMax, are
	// stored once and referenced, so neither history nor the stored thread carries them.
	// The worker sends the model the whole content.
	ContentRef string `json:"content_ref,omitempty"`
	// ContentBytes is the size of the whole content when ContentRef is set.
	ContentBytes int `json:"content_bytes,omitempty"`
	// IsError marks a tool result that is an error (a pluggable loop's transcript says
	// so; the model reads it in the content).
	IsError bool `json:"is_error,omitempty"`
}

// ThreadRef names a stored thread: a chain of segments in the blob store, each naming its
// parent, so a model call carries a hash instead of the conversation.
type ThreadRef struct {
	// Head is the sha256 of the newest segment ("" for an empty thread).
	Head string `json:"head,omitempty"`
	// Messages counts the thread's messages.
	Messages int `json:"messages"`
	// Tokens estimates the thread's size as a model request (the provider's count for the
	// last request plus an estimate of what came after), for compaction.
	Tokens int `json:"tokens,omitempty"`
}

// ThreadSegment is one stored link of a thread: the messages appended after Parent.
// A compacted thread starts a new chain (Parent "") whose first message is the summary.
type ThreadSegment struct {
	Parent   string        `json:"parent,omitempty"`
	Messages []ChatMessage `json:"messages"`
}

// ContextPolicy is an agent's `context:` setting: when the estimated tokens of the next
// model request would pass MaxTokens, the oldest turns of the thread are summarised by the
// model and the thread continues from the summary plus the KeepRecent most recent
// messages (a tool call and its results are never split).
type ContextPolicy struct {
	MaxTokens  int `json:"max_tokens,omitempty" mapstructure:"max_tokens" yaml:"max_tokens"`
	KeepRecent int `json:"keep_recent,omitempty" mapstructure:"keep_recent" yaml:"keep_recent"`
}

// MinContextTokens is the smallest ContextPolicy.MaxTokens accepted.
const MinContextTokens = 1000

// MaxContextTokens is the largest ContextPolicy.MaxTokens accepted: above every model's
// context window, so a larger value is a typo (or 2^63-1), not a policy.
const MaxContextTokens = 10_000_000

// MaxKeepRecent is the largest ContextPolicy.KeepRecent accepted (messages kept verbatim
// through a compaction).
const MaxKeepRecent = 10_000

// DefaultKeepRecent is ContextPolicy.KeepRecent when unset.
const DefaultKeepRecent = 6

// Recent is KeepRecent or its default.
func (c ContextPolicy) Recent() int {
	if c.KeepRecent > 0 {
		return c.KeepRecent
	}
	return DefaultKeepRecent
}

// ChatContext is what stays constant across a run's model calls: stored once, named by
// its sha256 in CompleteChatRequest.Context.
type ChatContext struct {
	System string    `json:"system,omitempty"`
	Skills []string  `json:"skills,omitempty"`
	Tools  []ToolDef `json:"tools,omitempty"`
}

// ToolCall is a call the model asked for. Arguments is the model's JSON text, verbatim.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolDef is a tool as offered to the model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// CompleteChatRequest asks the model for the next message.
type CompleteChatRequest struct {
	// Model overrides the worker's configured model when set.
	Model string `json:"model,omitempty"`
	// Endpoint names the model endpoint (config llm.endpoints) the call goes to; empty:
	// the default endpoint (llm: itself).
	Endpoint string `json:"endpoint,omitempty"`
	// System is the agent's instructions. The worker builds the system message for every
	// request from it, the sandbox's own instructions and Skills, in that order, so the
	// stored thread never holds (or duplicates) it.
	System string `json:"system,omitempty"`
	// Skills are the recorded texts of the agent's skills (LoadedSkill.Prompt), appended
	// to the system message after the sandbox's instructions.
	Skills  []string    `json:"skills,omitempty"`
	RunID   string      `json:"run_id"`
	Sandbox SandboxSpec `json:"sandbox"`
	// Messages is the thread without the system message; with Thread set, only the
	// messages that follow it (the last step's tool results, a new prompt).
	Messages []ChatMessage `json:"messages"`
	// Thread, when set, names the stored thread the call continues; the worker rebuilds
	// it from the blob store and stores Messages plus the reply as its next segment
	// (CompleteChatResult.Thread). Nil is the by-value shape of runs recorded before
	// threads were stored.
	Thread *ThreadRef `json:"thread,omitempty"`
	// Context, when set, names the stored ChatContext (instructions, skills, tool
	// definitions) and System, Skills and Tools are empty. A call that carries them by
	// value with StoreContext set gets their name back in CompleteChatResult.Context.
	Context      string `json:"context,omitempty"`
	StoreContext bool   `json:"store_context,omitempty"`
	// StreamTo, when set, asks for a streamed completion whose text is signalled
	// (SignalStream) to that workflow as it arrives, tagged with StreamCall. Runs recorded
	// before live streaming use it; newer ones set StreamLive.
	StreamTo   string `json:"stream_to,omitempty"`
	StreamCall string `json:"stream_call,omitempty"`
	// CallID tags this model call ("3", "2.4"); with Thread set, the worker names the
	// reply's tool calls <CallID>.<n> before storing it, as the workflow does.
	CallID string `json:"call_id,omitempty"`
	// StreamLive asks for a streamed completion whose text so far is published as the
	// activity's heartbeat details (LiveText), for live viewers, and never reaches history.
	StreamLive bool      `json:"stream_live,omitempty"`
	Tools      []ToolDef `json:"tools,omitempty"`
	// KeepReply keeps the reply's text inline whatever its size: the agent has an
	// output_schema, so the workflow checks the reply and returns it as the run's result,
	// which it cannot do with a preview. Without it a reply over TextInlineMax is stored and
	// referenced. A reply over 256 KB still leaves history through External Storage.
	KeepReply bool `json:"keep_reply,omitempty"`
	// Loop, when set, is the agent's pluggable loop: the call is a HarnessStep on the
	// run's sandbox host, not a model call. Agent names the agent for the loop.
	Loop  *LoopSpec `json:"loop,omitempty"`
	Agent string    `json:"agent,omitempty"`
}

// LiveText is the heartbeat detail of a streaming model call: the reply's text (and
// thinking) so far, read by followers through DescribeWorkflowExecution (pending
// activities). It never reaches history; the whole text is recorded once, as a text event
// (the thinking as a thinking event), when the call ends.
type LiveText struct {
	Call string `json:"call"`
	// From is the byte offset in the reply of Text's first byte: 0 until the text passes
	// LiveTextMax, after which only the tail is kept.
	From int    `json:"from"`
	Text string `json:"text"`
	// Thinking is the reply's reasoning so far (reasoning_content or reasoning deltas), by
	// the same rules as the text: at most its last LiveTextMax bytes, from byte
	// Thinking.From of the reasoning. Nil while the model has sent no reasoning, and in the
	// heartbeats of workers from before live thinking; followers from before it ignore it.
	Thinking *LiveThinking `json:"thinking,omitempty"`
}

// LiveThinking is the reasoning part of a LiveText: Text from byte From of the reasoning.
type LiveThinking struct {
	From int    `json:"from"`
	Text string `json:"text"`
}

// LiveTextMax bounds LiveText.Text, and LiveText.Thinking.Text on its own.
const LiveTextMax = 64 << 10

// Usage is the token accounting of one model call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// Cost is the call's price in USD from the worker's llm.prices (budget.go), and
	// Priced says the model had a price: a call of an unpriced model has no cost (unknown,
	// not zero). Sums carry both (a sum's Priced: every call was priced).
	Cost   float64 `json:"cost,omitempty"`
	Priced bool    `json:"priced,omitempty"`
}

// CompleteChatResult is the model's reply.
type CompleteChatResult struct {
	Message      ChatMessage `json:"message"`
	Model        string      `json:"model"`
	Usage        Usage       `json:"usage"`
	FinishReason string      `json:"finish_reason,omitempty"`
	// Thread is the stored thread after this call (the request's thread, its Messages and
	// the reply), when the request named one.
	Thread *ThreadRef `json:"thread,omitempty"`
	// Context is the name of the stored ChatContext, when the request asked to store it.
	Context string `json:"context,omitempty"`
	// Reasoning is the model's reasoning output for this reply (reasoning_content or
	// reasoning, as vLLM, DeepSeek and Ollama send it); it is shown as thinking, never
	// sent back to the model. Over ReasoningInlineMax it is stored as a blob
	// (ReasoningRef, ReasoningBytes the whole size) and Reasoning is a preview.
	Reasoning      string `json:"reasoning,omitempty"`
	ReasoningRef   string `json:"reasoning_ref,omitempty"`
	ReasoningBytes int    `json:"reasoning_bytes,omitempty"`
	// Plan is the plan a loop's step reported (HarnessStep), recorded as the update_plan
	// tool records one.
	Plan []PlanStep `json:"plan,omitempty"`
}

// TextInlineMax is the largest reply text a model call's result carries inline (under
// the 8 KB an event keeps of a string). A longer reply is stored as a blob: the result's
// Message has a preview as Content, the blob as ContentRef and the whole size as
// ContentBytes, and so have the events that carry the reply (IsReplyText), which every
// reader (starter, gateway, stream archive) resolves back to the whole text.
const TextInlineMax = 8000

// Event types that carry a model's reply text as "content": a session's text update and
// a run's agent_text (a reply with tool calls) and agent_done (the final answer). A reply
// stored by reference adds "content_ref" (the blob) and "bytes" (its size) to them.
const (
	EventAgentText = "agent_text"
	EventAgentDone = "agent_done"
)

// IsReplyText reports whether events of type typ carry a model's reply text, the ones
// whose stored text readers resolve.
func IsReplyText(typ string) bool {
	return typ == StreamText || typ == EventAgentText || typ == EventAgentDone
}

// ReasoningInlineMax is the largest reasoning text a model call's result carries inline
// (under the 8 KB an event keeps of a string); longer reasoning is stored by reference.
const ReasoningInlineMax = 8000

// FileStamp identifies a version of a file, for the read-before-write guard.
type FileStamp struct {
	Size    int64 `json:"size"`
	ModUnix int64 `json:"mod_unix_nano"`
}

// RunToolRequest asks the RunTool activity to run one built-in tool in the run's sandbox.
type RunToolRequest struct {
	RunID   string          `json:"run_id"`
	Sandbox SandboxSpec     `json:"sandbox"`
	CallID  string          `json:"call_id"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	// FetchAllow is the agent's fetch allow-list (hosts; subdomains included).
	FetchAllow []string `json:"fetch_allow,omitempty"`
	// Seen is the stamp of the file as the agent last read it (write_file only); nil
	// when it never read it.
	Seen *FileStamp `json:"seen,omitempty"`
	// StoreOver: a result over this many bytes is stored as a blob (ContentRef) and only
	// a preview returned; 0 keeps every result inline (runs recorded before).
	StoreOver int `json:"store_over,omitempty"`
	// Note, when set, starts the result (before it is stored), so the model reads it
	// even when the result travels by reference: "A human edited this call's arguments...".
	Note string `json:"note,omitempty"`
	// Snapshot asks the worker to snapshot the workspace after the call (write_file,
	// shell): the result then carries the snapshot's reference (api/snapshot.go).
	Snapshot bool `json:"snapshot,omitempty"`
	// Base is the run's last snapshot: a sandbox this host has to make anew for the call
	// (a virtual one after a worker restart, a per-run directory that is gone) is rebuilt
	// from it first, so the call finds the files the model saw.
	Base string `json:"base,omitempty"`
	// Dir is the working directory of the call, relative to the workspace (a session
	// prompt's dir): shell runs there and glob answers relative to it. File paths arrive
	// joined with it already (the workflow decides permissions on the real path).
	Dir string `json:"dir,omitempty"`
	// Hooks names the tool hooks the agent selects (agents.Spec.ToolHooks), run by the
	// worker that runs the call, in this order, before and after it.
	Hooks []string `json:"hooks,omitempty"`
}

// DefaultStoreOver is the size over which a tool result is stored and referenced.
const DefaultStoreOver = 16 << 10

// PreviewBytes is how much of a stored tool result the thread and events keep.
const PreviewBytes = 2 << 10

// RunToolResult is what the model sees (Content), whether it is an error result, and for
// file tools the stamp of the file afterwards.
type RunToolResult struct {
	Content string `json:"content"`
	// ContentRef names the blob holding the whole result when it was over StoreOver;
	// Content is then a preview, and ContentBytes the whole size.
	ContentRef   string     `json:"content_ref,omitempty"`
	ContentBytes int        `json:"content_bytes,omitempty"`
	IsError      bool       `json:"is_error,omitempty"`
	Path         string     `json:"path,omitempty"`
	Stamp        *FileStamp `json:"stamp,omitempty"`
	// Snapshot is the workspace as the call left it, when the request asked for one.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// SnapshotError says why no snapshot could be taken (the workspace is over the
	// snapshot limits); the call's own result stands.
	SnapshotError string `json:"snapshot_error,omitempty"`
	// Rebuilt is set when the host made the sandbox anew from Base for this call: what
	// that restore could not bring back.
	Rebuilt *RestoreManifestResult `json:"rebuilt,omitempty"`
	// Noted says the activity put the request's Note at the start of Content (and of the
	// stored result), so the workflow does not add it again (CallMCPTool; results
	// recorded before it never say so, and the workflow adds the note to those).
	Noted bool `json:"noted,omitempty"`
	// Egress is what the call's commands asked of the egress proxy (at most
	// MaxEgressRecords; EgressDropped counts the rest): one `egress` event each.
	Egress        []EgressRecord `json:"egress,omitempty"`
	EgressDropped int            `json:"egress_dropped,omitempty"`
	// Hooked is what the request's tool hooks did to the call (a denial, rewritten
	// arguments, a rewritten result): one `tool_hook` event each.
	Hooked []ToolHookNote `json:"hooked,omitempty"`
}

// ToolHookNote is one thing a tool hook did to a call. Action is ToolHookDenied,
// ToolHookArgs or ToolHookResult; Reason is a denial's reason or a hook's failure.
type ToolHookNote struct {
	Hook   string `json:"hook"`
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// What a tool hook did (ToolHookNote.Action).
const (
	ToolHookDenied = "denied"
	ToolHookArgs   = "args"
	ToolHookResult = "result"
	ToolHookFailed = "failed"
)

// EventToolHook is the event of one thing a tool hook did to a call (ToolHookNote, with
// the call's id and tool).
const EventToolHook = "tool_hook"

// CompactThreadRequest asks the CompactThread activity to shorten a thread: Messages are
// appended to Thread first, then every message but the most recent KeepRecent (never
// splitting a tool call from its results, and within half of MaxTokens) is summarised
// by the model, and the thread continues from the summary.
type CompactThreadRequest struct {
	RunID      string        `json:"run_id"`
	Model      string        `json:"model,omitempty"`
	Thread     ThreadRef     `json:"thread"`
	Messages   []ChatMessage `json:"messages,omitempty"`
	KeepRecent int           `json:"keep_recent"`
	MaxTokens  int           `json:"max_tokens"`
	// ContextTokens estimates the constant part of every request (system, tools).
	ContextTokens int `json:"context_tokens,omitempty"`
	// Endpoint names the model endpoint the summary request goes to, as for
	// CompleteChatRequest.Endpoint: an agent's summaries use its own endpoint.
	Endpoint string `json:"endpoint,omitempty"`
}

// CompactThreadResult is the compacted thread and what it took.
type CompactThreadResult struct {
	Thread       ThreadRef `json:"thread"`
	TokensBefore int       `json:"tokens_before"`
	TokensAfter  int       `json:"tokens_after"`
	// Summarised counts the messages the summary replaced; 0 means nothing could be
	// summarised (the recent messages alone fill the budget) and Thread is unchanged
	// apart from Messages.
	Summarised int   `json:"summarised"`
	Usage      Usage `json:"usage"`
	// Model is the model that wrote the summary, as the provider names it (usage by model).
	Model string `json:"model,omitempty"`
}

// CollectOutputsRequest asks which sandbox files match an agent's `produces` patterns.
type CollectOutputsRequest struct {
	RunID    string      `json:"run_id"`
	Sandbox  SandboxSpec `json:"sandbox"`
	Patterns []string    `json:"patterns"`
}

// RestoreArtifactsRequest writes recorded artifacts back into the run's sandbox.
type RestoreArtifactsRequest struct {
	RunID   string      `json:"run_id"`
	Sandbox SandboxSpec `json:"sandbox"`
	// Names of artifacts to restore; FromRun is the run that recorded them.
	Names   []string `json:"names"`
	FromRun string   `json:"from_run"`
	// Into is the workspace-relative directory (default ".").
	Into string `json:"into,omitempty"`
}

// AgentRunInput is the payload of the AgentRun workflow.
type AgentRunInput struct {
	Agent    string `json:"agent"`
	Prompt   string `json:"prompt"`
	MaxTurns int    `json:"max_turns,omitempty"`
	// Fork, when set, starts the run from another run's thread and workspace at one of
	// its tool calls (`starter fork`): Prompt is then the source's, for the record.
	Fork *ForkInput `json:"fork,omitempty"`
	// Parent, when set, makes the run a delegate: the child run an agent_<name> tool call
	// of Parent.Run started (delegates). Its record keeps the link (state StateParent).
	Parent *ParentLink `json:"parent,omitempty"`
}

// ParentLink names the run and tool call that started a delegate run, and how deep the
// delegate is (1: a child of a top run).
type ParentLink struct {
	Run   string `json:"run"`
	Call  string `json:"call"`
	Agent string `json:"agent"`
	Depth int    `json:"depth"`
}

// StateParent is the state key of a delegate run's ParentLink.
const StateParent = "parent"

// Delegation events of the parent run: a delegate started (call_id, agent, child) and
// ended (call_id, agent, child, status, usage, and error when it failed).
const (
	EventDelegateStarted = "delegate_started"
	EventDelegateDone    = "delegate_done"
)

// ForkInput is where a forked run starts: the source run's thread as its model call
// before the call was made (Thread and Messages, references and new messages as that
// call's input carried them), the workspace the call found (Snapshot, "" for an empty
// one), and what to do first: ask the model again, with Prompt appended as a user message
// when given, or run Reply (the source's reply up to the call, its arguments edited)
// without asking.
type ForkInput struct {
	Run      string        `json:"run"`
	Call     string        `json:"call"`
	Thread   *ThreadRef    `json:"thread,omitempty"`
	Messages []ChatMessage `json:"messages,omitempty"`
	Snapshot string        `json:"snapshot,omitempty"`
	Prompt   string        `json:"prompt,omitempty"`
	Reply    *ChatMessage  `json:"reply,omitempty"`
}

// AgentResult is what an agent run returns.
type AgentResult struct {
	Agent   string `json:"agent"`
	Content string `json:"content"`
	Turns   int    `json:"turns"`
	Usage   Usage  `json:"usage"`
	// Output is the final reply as validated JSON (compact) when the agent has an
	// output_schema; the AgentRun workflow's result is then this value alone.
	Output json.RawMessage `json:"output,omitempty"`
	// Stopped says why the agent ended without a final answer of the model: "budget"
	// when a human denied raising its budget (Content then says so).
	Stopped string `json:"stopped,omitempty"`
	// ContentRef names the blob holding the whole answer when it was over TextInlineMax
	// (Content is then its preview, ContentBytes its size); readers of the run resolve it.
	ContentRef   string `json:"content_ref,omitempty"`
	ContentBytes int    `json:"content_bytes,omitempty"`
}

// EstimateTokens estimates the tokens msgs take in a model request: about four bytes a
// token, plus a little per message. A stored content counts at its whole size. Pure, so
// workflows use it to decide when to compact.
func EstimateTokens(msgs []ChatMessage) int {
	n := 0
	for _, m := range msgs {
		size := len(m.Content)
		if m.ContentRef != "" {
			size = m.ContentBytes
		}
		for _, tc := range m.ToolCalls {
			size += len(tc.Name) + len(tc.Arguments) + 16
		}
		n += size/4 + 4
	}
	return n
}
