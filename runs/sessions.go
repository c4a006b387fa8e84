package runs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// SessionStartError: the session's run failed before it could serve the prompt, e.g. the
// worker has no such agent (Type api.ErrTypeAgentUnavailable) or one of its skills is
// missing (api.ErrTypeNotFound).
type SessionStartError struct {
	ID   string
	Type string // the failing activity's error type (api.ErrType*), "" when it had none
	Msg  string // the activity's own message
}

func (e *SessionStartError) Error() string {
	return fmt.Sprintf("session %s could not start: %s", e.ID, e.Msg)
}

// PromptOptions tune Prompt.
type PromptOptions struct {
	// ContinueAfterTurns is passed to a session this prompt creates (see
	// api.SessionInput); it has no effect on a session already open.
	ContinueAfterTurns int
	// OnRetry, when set, is given the retry note of a prompt that met the session handing
	// over to its continue-as-new run and was sent again until the new run answered: how
	// many times and for how long. It is not called for a prompt answered at once.
	OnRetry func(note string)
	// MaxTurns bounds this prompt's model calls (0: the agent's max_turns; else 1 to
	// api.MaxPromptTurns).
	MaxTurns int
	// Dir is the working directory of this prompt's tools, relative to the workspace.
	Dir string
}

// Prompt sends text to the session of (agent, instance) and returns its reply. The
// session is created if absent and reopened, with its thread, if it was closed: one
// update-with-start, so two processes prompting at once reach the same session. An agent
// whose sandbox pool no live host serves is refused (NoPoolHostError) and nothing is sent.
func (c *Client) Prompt(ctx context.Context, agent, instance, text string, o PromptOptions) (api.PromptReply, error) {
	if strings.TrimSpace(agent) == "" {
		return api.PromptReply{}, &BadRequestError{Msg: "agent name is empty"}
	}
	if err := api.ValidateInstance(instance); err != nil {
		return api.PromptReply{}, &BadRequestError{Msg: err.Error()}
	}
	req := api.PromptRequest{Text: text, MaxTurns: o.MaxTurns, Dir: o.Dir}
	if err := req.Validate(); err != nil {
		return api.PromptReply{}, &BadRequestError{Msg: err.Error()}
	}
	if err := c.checkSessionPool(ctx, agent); err != nil {
		return api.PromptReply{}, err
	}
	id := api.SessionID(agent, instance)
	in := api.SessionInput{Agent: agent, Instance: instance, ContinueAfterTurns: o.ContinueAfterTurns}
	carry, err := c.closedCarry(ctx, id)
	if err != nil {
		return api.PromptReply{}, err
	}
	in.Carry = carry
	reply, note, err := c.promptThroughHandover(ctx, id, in, req)
	if note != "" && o.OnRetry != nil {
		o.OnRetry(note)
	}
	if err == nil && reply.ReplyRef != "" {
		// A long reply came by reference (api.TextInlineMax): the caller gets it whole.
		var st artifacts.BlobGetter
		if c.Blobs != nil {
			st = c.Blobs
		}
		text, err := storedText(ctx, st, reply.ReplyRef)
		if err != nil {
			return reply, fmt.Errorf("session %s: turn %d: %w", id, reply.Turn, err)
		}
		reply.Reply, reply.ReplyRef, reply.ReplyBytes = text, "", 0
	}
	return reply, err
}

// HandoverWait bounds how long Prompt keeps sending a prompt again while the session hands
// over to its continue-as-new run, when the caller's context has no deadline of its own.
// A handover with a compaction under load takes seconds, not the half second a few quick
// retries cover.
const HandoverWait = 60 * time.Second

// handoverBackoff is the first pause between two sends during a handover, doubled after
// each up to maxHandoverBackoff.
const (
	handoverBackoff    = 50 * time.Millisecond
	maxHandoverBackoff = time.Second
)

// promptThroughHandover sends the prompt, and sends it again each time it meets the session
// handing over to its continue-as-new run (refused, or outlived by the run, before any
// work: sending it again reaches the new run), until the new run answers or the caller's
// deadline (HandoverWait without one) passes. A reply that took more than one send comes
// with a retry note saying so; the handover is never the user's error unless the deadline
// passes.
func (c *Client) promptThroughHandover(ctx context.Context, id string, in api.SessionInput, req api.PromptRequest) (api.PromptReply, string, error) {
	start := time.Now()
	deadline := start.Add(HandoverWait)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	pause := handoverBackoff
	if c.handoverPause > 0 {
		pause = c.handoverPause
	}
	for attempt := 1; ; attempt++ {
		reply, err := c.promptOnce(ctx, id, in, req, false)
		if err == nil {
			var note string
			if attempt > 1 {
				note = fmt.Sprintf("the session was continuing as new: the prompt was sent %d times over %s until its new run answered",
					attempt, time.Since(start).Round(time.Millisecond))
			}
			return reply, note, nil
		}
		if !handover(err) {
			return reply, "", err
		}
		// The run ended under the prompt: a handover to its continue-as-new run (try again),
		// or a run that failed while setting up (say why; another try would fail the same way).
		if serr := c.startFailure(ctx, id); serr != nil {
			return api.PromptReply{}, "", serr
		}
		still := func() error {
			return fmt.Errorf("session %s is still handing over to its continue-as-new run after %d sends over %s; send the prompt again: %w",
				id, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		wait := min(pause, time.Until(deadline))
		if wait <= 0 {
			return api.PromptReply{}, "", still()
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return api.PromptReply{}, "", still() // the caller's deadline, met mid-handover
			}
			return api.PromptReply{}, "", ctx.Err()
		case <-time.After(wait):
		}
		pause = min(2*pause, maxHandoverBackoff)
	}
}

// sessionPath is the path of a session's Nexo page.
func sessionPath(agent, instance string) string {
	return "/sessions/" + url.PathEscape(agent) + "/" + url.PathEscape(instance)
}

// acceptedUpdateCompletedWorkflow is the type of the server's failure of an update whose
// workflow closed before the update completed (go.temporal.io/server update package).
const acceptedUpdateCompletedWorkflow = "AcceptedUpdateCompletedWorkflow"

// handover reports whether err is a prompt that met the session handing over to its
// continue-as-new run, by the error's type, never its wording: the session's own refusal
// (api.ErrTypeSessionHandover), the server's failure of an accepted update whose run then
// closed, or NotFound from an update-with-start, which creates the session when it is
// absent, so NotFound means the run closed under the update.
func handover(err error) bool {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type() == api.ErrTypeSessionHandover || app.Type() == acceptedUpdateCompletedWorkflow
	}
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// updateError is a session update's failure as the session reported it: the message is
// the session's own (without the SDK's wrapping), Unwrap gives the Temporal error, so a
// caller still matches its type.
type updateError struct {
	id  string
	err error
}

func (e *updateError) Error() string {
	return fmt.Sprintf("session %s: %s", e.id, updateMessage(e.err))
}

func (e *updateError) Unwrap() error { return e.err }

// promptOnce sends one prompt with update-with-start. fresh: the session must be new (a
// fork): an id already taken, open or closed, fails the start instead of taking the
// prompt.
func (c *Client) promptOnce(ctx context.Context, id string, in api.SessionInput, req api.PromptRequest, fresh bool) (api.PromptReply, error) {
	conflict, reuse := enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	if fresh {
		conflict, reuse = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	}
	op := c.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                c.taskQueue,
		WorkflowIDConflictPolicy: conflict,
		WorkflowIDReusePolicy:    reuse,
		TypedSearchAttributes:    sessionAttributes(in.Agent),
		StaticSummary:            c.pageSummary("session "+in.Agent+"/"+in.Instance, sessionPath(in.Agent, in.Instance)),
		StaticDetails:            c.pageDetails(sessionPath(in.Agent, in.Instance)),
	}, api.WorkflowSession, mustRaw(in))
	handle, err := c.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   api.UpdatePrompt,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return api.PromptReply{}, fmt.Errorf("prompt session %s: %w", id, err)
	}
	var reply api.PromptReply
	if err := handle.Get(ctx, &reply); err != nil {
		return api.PromptReply{}, &updateError{id: id, err: err}
	}
	return reply, nil
}

// startFailure returns a SessionStartError when the session's latest run failed, nil
// otherwise (running, continued as new, or unreadable: the caller goes on with what it has).
func (c *Client) startFailure(ctx context.Context, id string) error {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		return nil
	}
	runErr := c.tc.GetWorkflow(ctx, id, "").Get(ctx, nil)
	if runErr == nil {
		return nil
	}
	// The innermost application error is the activity's own: "no agent "x" is configured
	// on this worker (...)" of type NexoNotFound, under the workflow's wrapping.
	serr := &SessionStartError{ID: id, Msg: runErr.Error()}
	for e := runErr; e != nil; e = errors.Unwrap(e) {
		if app, ok := e.(*temporal.ApplicationError); ok && app.Message() != "" {
			serr.Type, serr.Msg = app.Type(), app.Message()
		}
	}
	return serr
}

// couldNotStart reports whether the failed session run (id, runID) failed before serving
// a turn: resolving its agent failed, or its input was refused. Unreadable: false, so
// the run stays listed.
func (c *Client) couldNotStart(ctx context.Context, id, runID string) bool {
	err := c.tc.GetWorkflow(ctx, id, runID).Get(ctx, nil)
	var act *temporal.ActivityError
	if errors.As(err, &act) {
		return act.ActivityType().GetName() == api.ActivityResolveAgent
	}
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == api.ErrTypeBadInput
}

// closedCarry returns the carry of a closed session, so reopening it keeps its thread;
// nil when the session is open or new.
func (c *Client) closedCarry(ctx context.Context, id string) (*api.SessionCarry, error) {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe session %s: %w", id, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return nil, nil
	}
	var carry api.SessionCarry
	if err := c.tc.GetWorkflow(ctx, id, "").Get(ctx, &carry); err != nil {
		return nil, fmt.Errorf("read closed session %s: %w", id, err)
	}
	return &carry, nil
}

func updateMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// CloseSession ends a session after the prompts it already accepted; its sandbox and MCP
// clients are released. A closed session reopens, with its thread, on the next prompt.
func (c *Client) CloseSession(ctx context.Context, agent, instance string) error {
	id := api.SessionID(agent, instance)
	desc, err := c.describe(ctx, id) // a NotFoundError names id already
	if err != nil {
		return err
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return &StateError{ID: id, Status: closedStatus(st), Want: "open"}
	}
	h, err := c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: api.UpdateClose,
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return fmt.Errorf("close session %s: %w", id, err)
	}
	if err := h.Get(ctx, nil); err != nil {
		return fmt.Errorf("close %w", &updateError{id: id, err: err})
	}
	// The update returns once the accepted prompts are served; the run then releases its
	// sandbox and MCP clients and stores its record. Close means closed: wait for the run
	// to end, so what the user does next (list, prompt) sees it closed.
	wctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	it := c.tc.GetWorkflowHistory(wctx, id, runID, true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("session %s accepted the close but has not finished closing after %s (is a worker polling task queue %s?); it closes when one does", id, closeWait, c.taskQueue)
			}
			return fmt.Errorf("wait for session %s to close: %w", id, err)
		}
	}
	return nil
}

// SessionRefusedError: the session refused an interrupt or a steer (no turn running, an
// empty message, a turn that ended before it took the message); nothing changed. Msg is
// the session's reason.
type SessionRefusedError struct {
	ID  string
	Op  string // "interrupt", "steer"
	Msg string
}

func (e *SessionRefusedError) Error() string {
	return fmt.Sprintf("session %s refused the %s: %s", e.ID, e.Op, e.Msg)
}

// Interrupt ends the turn the session of (agent, instance) is serving: its model or tool
// call is cancelled, the turn ends with an interrupted turn_end, and the session takes
// the next prompt. It returns the turn's number once the turn has ended; with no turn
// running the session refuses it (SessionRefusedError) and nothing changes.
func (c *Client) Interrupt(ctx context.Context, agent, instance string) (api.InterruptReply, error) {
	var reply api.InterruptReply
	err := c.sessionUpdate(ctx, agent, instance, "interrupt", api.UpdateInterrupt, nil, &reply)
	return reply, err
}

// Steer hands text to the turn the session of (agent, instance) is serving, as a user
// message at its next model call, and returns once a model call took it. With no turn
// running, or a turn that answered before another call, the session refuses it
// (SessionRefusedError).
func (c *Client) Steer(ctx context.Context, agent, instance, text string) (api.SteerReply, error) {
	if strings.TrimSpace(text) == "" {
		return api.SteerReply{}, &BadRequestError{Msg: "steer text is empty"}
	}
	var reply api.SteerReply
	err := c.sessionUpdate(ctx, agent, instance, "steer", api.UpdateSteer, []any{api.SteerRequest{Text: text}}, &reply)
	return reply, err
}

// sessionUpdate sends update name to the open session of (agent, instance) and waits for
// its result; the session's refusal is a SessionRefusedError.
func (c *Client) sessionUpdate(ctx context.Context, agent, instance, op, name string, args []any, out any) error {
	if err := api.ValidateInstance(instance); err != nil {
		return &BadRequestError{Msg: err.Error()}
	}
	id := api.SessionID(agent, instance)
	desc, err := c.describe(ctx, id) // a NotFoundError names id already
	if err != nil {
		return err
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return &StateError{ID: id, Status: closedStatus(st), Want: "open", Hint: "no turn is running in a closed session"}
	}
	refused := func(err error) error {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() != acceptedUpdateCompletedWorkflow {
			return &SessionRefusedError{ID: id, Op: op, Msg: app.Message()}
		}
		return fmt.Errorf("%s session %s: %w", op, id, err)
	}
	h, err := c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: args,
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return refused(err)
	}
	if err := h.Get(ctx, out); err != nil {
		return refused(err)
	}
	return nil
}

// closeWait bounds how long CloseSession waits for a session's run to end after the close
// update returned: releasing a sandbox and waiting for notifications under way take seconds.
const closeWait = 2 * time.Minute

// Session returns the materialised history of a session (turns and messages).
func (c *Client) Session(ctx context.Context, agent, instance string) (api.SessionView, error) {
	id := api.SessionID(agent, instance)
	if _, err := c.describe(ctx, id); err != nil {
		return api.SessionView{}, err
	}
	qctx, cancel := context.WithTimeout(ctx, c.QueryTimeout)
	defer cancel()
	v, err := c.tc.QueryWorkflow(qctx, id, "", api.QuerySession)
	if err != nil {
		return api.SessionView{}, &NoWorkerError{ID: id, TaskQueue: c.taskQueue, Err: err}
	}
	var view api.SessionView
	if err := v.Get(&view); err != nil {
		return api.SessionView{}, fmt.Errorf("decode session %s: %w", id, err)
	}
	var st artifacts.BlobGetter
	if c.Blobs != nil {
		st = c.Blobs
	}
	return withTurnReplies(ctx, st, view)
}

// withTurnReplies returns view with every turn's reply stored by reference (a reply over
// api.TextInlineMax) put back whole, as withTexts does for a record's events; view's own
// turns are not changed. A blob that cannot be read fails naming the turn and the blob,
// never a preview passed off as the reply.
func withTurnReplies(ctx context.Context, st artifacts.BlobGetter, view api.SessionView) (api.SessionView, error) {
	copied := false
	for i, t := range view.Turns {
		if t.ReplyRef == "" {
			continue
		}
		text, err := storedText(ctx, st, t.ReplyRef)
		if err != nil {
			return view, fmt.Errorf("session %s: turn %d: %w", view.ID, t.N, err)
		}
		if !copied {
			view.Turns, copied = append([]api.SessionTurn(nil), view.Turns...), true
		}
		view.Turns[i].Reply, view.Turns[i].ReplyRef, view.Turns[i].ReplyBytes = text, "", 0
	}
	return view, nil
}

// SessionSummary is one row of ListSessions.
type SessionSummary struct {
	ID       string     `json:"id"`
	Agent    string     `json:"agent"`
	Instance string     `json:"instance"`
	Status   api.Status `json:"status"`
	Summary
}

// ListSessions lists sessions, newest first. A session run that could not start (its
// agent is not configured or a skill of it missing, or its input is bad) is left out: it
// never served a turn, and the prompt that tried said why. So a first prompt that failed
// leaves no session behind, a reopen that failed leaves the session listed as it was,
// closed, and the next prompt starts it afresh. A session that failed later (a turn that
// fails ends the turn, not the session, so rarely) is listed as failed.
func (c *Client) ListSessions(ctx context.Context, limit int) ([]SessionSummary, error) {
	if limit <= 0 {
		limit = 50
	}
	resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: c.namespace, PageSize: int32(limit), Query: fmt.Sprintf("WorkflowType = '%s'", api.WorkflowSession),
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []SessionSummary
	seen := map[string]bool{}
	for _, e := range resp.GetExecutions() {
		id := e.GetExecution().GetWorkflowId()
		if seen[id] { // earlier runs of a session (continue-as-new, reopen)
			continue
		}
		if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED && c.couldNotStart(ctx, id, e.GetExecution().GetRunId()) {
			continue // an earlier run of the same session, if any, is listed
		}
		seen[id] = true
		agent, inst, _ := api.ParseSessionID(id)
		st := closedStatus(e.GetStatus())
		if st == api.StatusRunning {
			// Visibility trails a close by a moment; a session just closed must not be
			// listed running, so a running row is checked against the run itself.
			if d, err := c.tc.DescribeWorkflowExecution(ctx, id, e.GetExecution().GetRunId()); err == nil {
				st = closedStatus(d.GetWorkflowExecutionInfo().GetStatus())
			}
		}
		sum := Summary{ID: id, Workflow: api.WorkflowSession, Status: st, Agent: agent, CreatedAt: e.GetStartTime().AsTime().UTC()}
		if st != api.StatusRunning {
			t := e.GetCloseTime().AsTime().UTC()
			sum.ClosedAt = &t
		}
		out = append(out, SessionSummary{ID: id, Agent: agent, Instance: inst, Status: st, Summary: sum})
	}
	return out, nil
}

// FollowSession calls fn with the session's record now and on every change, following it
// across continue-as-new, until fn returns true, the session closes, or ctx ends.
func (c *Client) FollowSession(ctx context.Context, agent, instance string, fn func(api.Record) bool) error {
	return c.FollowSessionLive(ctx, agent, instance, fn, nil)
}

// FollowSessionLive is FollowSession that also calls live (when not nil) with the text of
// the session's model call in flight as the model writes it: read from the call's
// heartbeat every 200 ms while one is pending (none of it is history), and only what was
// not handed on before. live.Text is the reply's text from byte live.From on: From is the
// end of what was handed on for live.Call (append), or less (a retried attempt wrote
// differently: the text from From on replaces it), or more (text the follower never saw;
// the call's text event has it). The call's text event {"content", "call"} comes in a
// record after its last live text, never before: a caller shows of it only what live text
// did not. The model's reasoning is handed on the same way, apart from the text: a call of
// live with Thinking set carries only new thinking (Thinking.Text from byte Thinking.From
// of the reasoning, by the same append / replace / gap rules; Text and From are then
// empty), and the call's thinking event {"content", "call"} comes after its last live
// thinking. fn and live are never called at the same time, and neither after it returned.
func (c *Client) FollowSessionLive(ctx context.Context, agent, instance string, fn func(api.Record) bool, live func(api.LiveText)) error {
	id := api.SessionID(agent, instance)
	var lf *liveFollow
	if live != nil {
		lf = newLiveFollow(c, id, live)
		lctx, cancel := context.WithCancel(ctx)
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			lf.run(lctx)
		}()
		defer func() {
			cancel()
			<-polled
		}()
	}
	for {
		stopped := false
		rec, err := c.follow(ctx, id, func(r api.Record) bool {
			stopped = fn(r)
			return stopped
		}, lf)
		if err != nil {
			return err
		}
		if stopped || rec.Status == api.StatusDone || rec.Status == api.StatusFailed || rec.Status == api.StatusCanceled {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The run continued as new: follow the next one.
		desc, err := c.describe(ctx, id)
		if err != nil {
			return err
		}
		if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return nil
		}
	}
}
