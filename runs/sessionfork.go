package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// SessionForkRequest forks a session at one of its turns (`starter session fork`).
type SessionForkRequest struct {
	Agent, Instance string
	// Turn is the turn forked at, numbered as `starter session show` lists it (from 1,
	// across continue-as-new). The fork starts as that turn found the session: the
	// thread before the turn's prompt and the workspace before its first tool call.
	Turn int
	// NewInstance is the fork's instance id ("" for a new UUIDv7); it must be unused.
	NewInstance string
	// Prompt is asked as the fork's first turn instead of the forked turn's own prompt.
	Prompt string
	// ContinueAfterTurns is passed to the fork's session (see api.SessionInput).
	ContinueAfterTurns int
}

// SessionForkResult is a fork opened and its first turn served.
type SessionForkResult struct {
	// Agent and Instance address the fork; ID is its workflow id.
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
	ID       string `json:"id"`
	// From is the source ("agent/instance") and Turn the turn forked at; Prompt the text
	// the fork's first turn asked.
	From   string `json:"forked_from"`
	Turn   int    `json:"turn"`
	Prompt string `json:"prompt"`
	// Reply is the fork's first turn (turn 1 of the fork).
	Reply api.PromptReply `json:"reply"`
}

// UnknownTurnError: the session has no such turn (a usage mistake: the turns are listed).
type UnknownTurnError struct {
	Session string // "agent/instance"
	Turn    int
	Turns   int // the turns the session has
}

func (e *UnknownTurnError) Error() string {
	agent, inst, _ := strings.Cut(e.Session, "/")
	if e.Turns == 0 {
		return fmt.Sprintf("session %s has no turns yet: there is nothing to fork", e.Session)
	}
	return fmt.Sprintf("session %s has no turn %d: --at takes 1-%d (the turns are in `starter session show %s %s`)",
		e.Session, e.Turn, e.Turns, agent, inst)
}

// ForkSession opens a new session of the source's agent as req.Turn of the source found
// it, then asks it the turn's prompt again (req.Prompt instead, when set): the fork's
// thread is the source's before that prompt and its workspace the snapshot the turn
// found. The source is untouched. Everything is checked before the fork starts: an
// error leaves nothing started.
func (c *Client) ForkSession(ctx context.Context, st artifacts.Getter, req SessionForkRequest) (SessionForkResult, error) {
	if strings.TrimSpace(req.Agent) == "" {
		return SessionForkResult{}, &BadRequestError{Msg: "agent name is empty"}
	}
	if err := api.ValidateInstance(req.Instance); err != nil {
		return SessionForkResult{}, &BadRequestError{Msg: err.Error()}
	}
	from := req.Agent + "/" + req.Instance
	if req.Turn < 1 {
		return SessionForkResult{}, &BadRequestError{Msg: fmt.Sprintf("--at %d: a turn number starts at 1 (the turns are in `starter session show %s %s`)", req.Turn, req.Agent, req.Instance)}
	}
	newInst := req.NewInstance
	if newInst == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return SessionForkResult{}, fmt.Errorf("generate an instance id: %w", err)
		}
		newInst = u.String()
	} else if err := api.ValidateInstance(newInst); err != nil {
		return SessionForkResult{}, &BadRequestError{Msg: "--id: " + err.Error()}
	}
	srcID, newID := api.SessionID(req.Agent, req.Instance), api.SessionID(req.Agent, newInst)
	// The agent first: a mistyped agent gets the offered names, not only "no session".
	if v, err := c.Workflows(ctx); err == nil {
		if err := agentOffered(v, c.taskQueue, req.Agent); err != nil {
			return SessionForkResult{}, err
		}
	} else if ctx.Err() != nil {
		return SessionForkResult{}, ctx.Err()
	}
	src, err := c.describe(ctx, srcID)
	if err != nil {
		return SessionForkResult{}, fmt.Errorf("fork session %s: %w", from, err)
	}
	if desc, err := c.describe(ctx, newID); err == nil {
		return SessionForkResult{}, &ExistsError{ID: newID, Workflow: api.WorkflowSession,
			Status: closedStatus(desc.GetWorkflowExecutionInfo().GetStatus())}
	} else if nf := (*NotFoundError)(nil); !errors.As(err, &nf) {
		return SessionForkResult{}, err
	}
	view, err := c.Session(ctx, req.Agent, req.Instance)
	if err != nil {
		return SessionForkResult{}, err
	}
	if req.Turn > view.TurnCount {
		return SessionForkResult{}, &UnknownTurnError{Session: from, Turn: req.Turn, Turns: view.TurnCount}
	}
	rec, err := c.Get(ctx, srcID)
	if err != nil {
		return SessionForkResult{}, err
	}
	events, err := AllEvents(ctx, st, rec)
	if err != nil {
		return SessionForkResult{}, fmt.Errorf("read the activity stream of session %s: %w", from, err)
	}
	prompt, snap, ok := turnStart(events, req.Turn)
	if !ok {
		return SessionForkResult{}, fmt.Errorf("session %s: turn %d is not in its activity stream (a session reopened after `session close` keeps only the stream of its runs since); fork a later turn", from, req.Turn)
	}
	fork, asked, err := c.threadBeforeTurn(ctx, srcID, src.GetWorkflowExecutionInfo().GetExecution().GetRunId(), from, req.Turn)
	if err != nil {
		return SessionForkResult{}, err
	}
	fork.Snapshot = snap
	switch {
	case req.Prompt != "":
		prompt = req.Prompt
	case asked != "":
		prompt = asked // whole, where the stream may keep it shortened
	case prompt == omitted:
		return SessionForkResult{}, &BadRequestError{Msg: fmt.Sprintf("session %s: turn %d's prompt is too long to be asked again from its record; give it with --prompt", from, req.Turn)}
	}
	in := api.SessionInput{Agent: req.Agent, Instance: newInst, ContinueAfterTurns: req.ContinueAfterTurns, Fork: fork}
	reply, err := c.promptOnce(ctx, newID, in, api.PromptRequest{Text: prompt}, true)
	if err != nil {
		if handover(err) {
			// The fork's run ended under its first prompt: it failed setting up.
			if serr := c.startFailure(ctx, newID); serr != nil {
				return SessionForkResult{}, serr
			}
		}
		return SessionForkResult{}, err
	}
	return SessionForkResult{Agent: req.Agent, Instance: newInst, ID: newID, From: from, Turn: req.Turn,
		Prompt: prompt, Reply: reply}, nil
}

// omitted is what the record keeps of an event string over 8 KB (workflows.Omitted).
const omitted = "[omitted]"

// turnStart finds turn n in a session's activity stream: its prompt (the user_input
// event) and the workspace snapshot the turn found (the last one recorded before it; ""
// when none was).
func turnStart(events []api.Event, n int) (prompt, snapshot string, ok bool) {
	for _, ev := range events {
		if ev.Type == api.StreamUserInput {
			var d struct {
				Text string `json:"text"`
				Turn int    `json:"turn"`
			}
			if json.Unmarshal(ev.Data, &d) == nil && d.Turn == n {
				return d.Text, snapshot, true
			}
			continue
		}
		for _, m := range marks([]api.Event{ev}) {
			if m.snapshot != "" {
				snapshot = m.snapshot
			}
		}
	}
	return "", "", false
}

// threadBeforeTurn reads the thread before turn n's prompt from the input of the turn's
// first model call ("n.1"), in whichever run of the session holds it: that input is the
// thread so far plus the prompt, which is dropped. The runs are searched from latest back
// along the continue-as-new chain, then any other run visibility lists (a reopened
// session starts a chain of its own).
//
// prompt is the turn's prompt as the model got it ("" when it was stored by reference):
// the stream's user_input keeps at most 8 KB of it.
func (c *Client) threadBeforeTurn(ctx context.Context, id, latest, from string, n int) (fork *api.SessionFork, prompt string, err error) {
	tag := fmt.Sprintf("%d.1", n)
	seen := map[string]bool{}
	search := func(runID string) (*api.SessionFork, bool, error) {
		seen[runID] = true
		req, _, found, err := c.scanModelCall(ctx, id, runID, tag)
		if err != nil || !found {
			return nil, false, err
		}
		last := len(req.Messages) - 1
		if last < 0 || req.Messages[last].Role != api.RoleUser {
			// A compaction right before the call folded the prompt into the summary.
			return nil, true, fmt.Errorf("session %s: the thread before turn %d cannot be told apart from its prompt (the thread was compacted as the turn began); fork another turn", from, n)
		}
		if req.Messages[last].ContentRef == "" {
			prompt = req.Messages[last].Content
		}
		return &api.SessionFork{Session: from, Turn: n, Thread: req.Thread,
			Messages: append([]api.ChatMessage(nil), req.Messages[:last]...)}, true, nil
	}
	for run := latest; run != "" && !seen[run]; {
		if f, found, err := search(run); found || err != nil {
			return f, prompt, err
		}
		prev, err := c.continuedFrom(ctx, id, run)
		if err != nil {
			return nil, "", err
		}
		run = prev
	}
	others, err := c.sessionRuns(ctx, id)
	if err != nil {
		return nil, "", err
	}
	for _, run := range others {
		if seen[run] {
			continue
		}
		if f, found, err := search(run); found || err != nil {
			return f, prompt, err
		}
	}
	return nil, "", fmt.Errorf("session %s: turn %d made no model call (it failed before asking the model), so there is no thread to fork from; fork another turn", from, n)
}

// continuedFrom is the run that run runID of workflow id continued as new from ("" for
// the first run of a chain).
func (c *Client) continuedFrom(ctx context.Context, id, runID string) (string, error) {
	it := c.tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return "", nil
	}
	ev, err := it.Next()
	if err != nil {
		return "", fmt.Errorf("read history of run %s (%s): %w", id, runID, err)
	}
	return ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(), nil
}

// sessionRuns lists the runs of session id that visibility knows, newest first.
func (c *Client) sessionRuns(ctx context.Context, id string) ([]string, error) {
	if strings.ContainsAny(id, `'"\`) {
		return nil, nil // not quotable in a visibility query: the continue-as-new chain only
	}
	var (
		out   []string
		token []byte
	)
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list the runs of session %s: %w", id, err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, e.GetExecution().GetRunId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}
