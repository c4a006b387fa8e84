package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// ResumeRequest continues a run paused by Suspend.
type ResumeRequest struct {
	Input map[string]any
	Key   string
	// At schedules the resume (a durable timer in the run); zero means now.
	At time.Time
}

// Resume sends nexo.resume after checking the run is suspended by Suspend (not waiting
// for a tool-call approval) and the key fits.
func (c *Client) Resume(ctx context.Context, id string, req ResumeRequest) error {
	rec, queried, err := c.current(ctx, id)
	if err != nil {
		return err
	}
	si, err := suspension(rec)
	if err != nil {
		if queried {
			// The query answers from the run's memory, also for a closed run (a run
			// terminated while suspended still says suspended): read its real status.
			if rec, gerr := c.Get(ctx, id); gerr == nil {
				if _, err2 := suspension(rec); err2 != nil {
					return err2
				}
			}
		}
		return err
	}
	if si.ResumeKey != "" && req.Key != si.ResumeKey {
		return &BadRequestError{Msg: fmt.Sprintf("run %s waits for resume key %q; pass it with --key", id, si.ResumeKey)}
	}
	sig := api.ResumeSignal{Input: req.Input, ResumeKey: si.ResumeKey}
	if sig.Input == nil {
		sig.Input = map[string]any{}
	}
	if !req.At.IsZero() {
		at := req.At.UTC()
		sig.At = &at
	}
	return c.signal(ctx, id, api.SignalResume, sig)
}

func suspension(rec api.Record) (api.SuspendInfo, error) {
	if rec.Status != api.StatusSuspended {
		return api.SuspendInfo{}, &StateError{ID: rec.ID, Status: rec.Status, Want: "suspended"}
	}
	if a, ok := rec.Approval(); ok {
		return api.SuspendInfo{}, &StateError{ID: rec.ID, Status: rec.Status, Want: "suspended by the workflow",
			Hint: fmt.Sprintf("it waits for approval of tool call %s (%s); use approve or deny", a.CallID, a.Tool)}
	}
	si, ok := rec.Suspend()
	if !ok {
		return api.SuspendInfo{}, &StateError{ID: rec.ID, Status: rec.Status, Want: "suspended by the workflow"}
	}
	return si, nil
}

// Decision is a human's answer to a run waiting for approval.
type Decision struct {
	Approved bool
	Reason   string
	// CallID, when set, must name the pending tool call.
	CallID string
	// Always remembers an approval of this tool for the rest of the run.
	Always bool
	// By names who decided.
	By string
	// Action, when set, is api.DecideApprove, DecideDeny or DecideAnswer and wins over
	// Approved; edit and answer apply to tool calls only.
	Action string
	// Args, with an approval, are edited arguments (a JSON object) the call runs with.
	Args json.RawMessage
	// Result, with DecideAnswer, is the human-written result the model gets.
	Result string
	// ArgsSHA256 is the sha256 of the arguments decided; empty means the pending call's
	// as the record read shows them.
	ArgsSHA256 string
	// Budget, with an approval of a budget pause, is what its reached bound is raised by.
	Budget *api.BudgetRaise
}

func (d Decision) action() string {
	switch {
	case d.Action != "":
		return d.Action
	case d.Approved:
		return api.DecideApprove
	}
	return api.DecideDeny
}

// RefusedError: the run's validator refused a decision (nexo.decide); nothing reached
// the run's history. Msg is the run's reason.
type RefusedError struct {
	ID     string
	CallID string
	Msg    string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("run %s refused the decision on tool call %s: %s", e.ID, e.CallID, e.Msg)
}

// Decide answers whatever the run waits for: a pending tool call gets the nexo.decide
// Update (refused synchronously when it does not fit: a RefusedError); a run paused by
// Suspend is resumed with {"approved": bool, "reason"?, "approver"?}. It reads the run's
// record first and returns a description of what was decided and that record.
func (c *Client) Decide(ctx context.Context, id string, d Decision) (string, api.Record, error) {
	rec, queried, err := c.current(ctx, id)
	if err != nil {
		return "", api.Record{}, err
	}
	what, err := c.DecideRecord(ctx, rec, d)
	var se *StateError
	if queried && errors.As(err, &se) {
		// The query answers from the run's memory, also for a closed run (a run
		// terminated while suspended still says suspended): refuse with its real status.
		if real, gerr := c.Get(ctx, id); gerr == nil && real.Status != rec.Status {
			what, err = c.DecideRecord(ctx, real, d)
			return what, real, err
		}
	}
	return what, rec, err
}

// DecideRecord is Decide against a record the caller has just read (for example while
// following the run), saving a round trip. A decision on a tool call is checked by the
// run itself: if the run moved on meanwhile, the refusal says so.
func (c *Client) DecideRecord(ctx context.Context, rec api.Record, d Decision) (string, error) {
	id := rec.ID
	action := d.action()
	if p := (api.DecideRequest{Reason: d.Reason, Result: d.Result, Args: d.Args, Budget: d.Budget}).Problem(); p != "" {
		return "", &BadRequestError{Msg: fmt.Sprintf("decide run %s: %s", id, p)}
	}
	a, pending := rec.Approval()
	if err := budgetMisfit(rec, d); err != nil {
		return "", err
	}
	open := rec.Status == api.StatusSuspended || rec.Status == api.StatusRunning
	if (pending && rec.Status == api.StatusSuspended) || (d.CallID != "" && open) {
		return c.decideCall(ctx, rec, a, pending, d)
	}
	if rec.Status != api.StatusSuspended {
		return "", &StateError{ID: id, Status: rec.Status, Want: "suspended"}
	}
	if action == api.DecideAnswer || len(d.Args) > 0 {
		return "", &BadRequestError{Msg: fmt.Sprintf("run %s is paused by the workflow, not by a tool call: edited arguments and answers apply to tool calls only; approve, deny or resume it", id)}
	}
	verb := "approved"
	if action != api.DecideApprove {
		verb = "denied"
	}
	si, err := suspension(rec)
	if err != nil {
		return "", err
	}
	if d.Always {
		return "", &BadRequestError{Msg: fmt.Sprintf("run %s is paused by the workflow (%s), not by a tool call: --always approves a tool for the rest of the run, so it applies to tool calls only; approve without it", id, si.Reason)}
	}
	input := map[string]any{"approved": action == api.DecideApprove}
	if d.Reason != "" {
		input["reason"] = d.Reason
	}
	if d.By != "" {
		input["approver"] = d.By
	}
	if err := c.signal(ctx, id, api.SignalResume, api.ResumeSignal{Input: input, ResumeKey: si.ResumeKey}); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s run %s (%s)", verb, id, si.Reason), nil
}

// decideCall sends nexo.decide and waits for the run to record it (or refuse it). The
// arguments' sha256 comes from the record read, so a decision is about what its
// decider saw.
func (c *Client) decideCall(ctx context.Context, rec api.Record, a api.ApprovalInfo, pending bool, d Decision) (string, error) {
	id := rec.ID
	req := api.DecideRequest{CallID: d.CallID, Action: d.action(), ArgsSHA256: d.ArgsSHA256, Args: d.Args,
		Result: d.Result, Reason: d.Reason, Always: d.Always, By: d.By, Budget: d.Budget}
	if req.CallID == "" {
		req.CallID = a.CallID
	}
	if req.ArgsSHA256 == "" && pending && req.CallID == a.CallID {
		req.ArgsSHA256 = a.ArgsSHA256
		if req.ArgsSHA256 == "" { // recorded by a worker older than the field
			req.ArgsSHA256 = api.ArgsSHA256(a.Args)
		}
	}
	h, err := c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: api.UpdateDecide,
		Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var res api.DecideResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if err != nil {
		var (
			nf  *serviceerror.NotFound
			app *temporal.ApplicationError
		)
		switch {
		case errors.As(err, &nf):
			// The run closed between the read and the decision.
			if rec, gerr := c.Get(ctx, id); gerr == nil {
				return "", &StateError{ID: id, Status: rec.Status, Want: "suspended"}
			}
			return "", &NotFoundError{ID: id}
		case errors.As(err, &app) && strings.HasPrefix(app.Message(), "unknown update "+api.UpdateDecide+"."):
			// A worker older than nexo.decide (a rolling deploy): approve and deny still
			// reach the run as the signal it understands; edit and answer cannot.
			if len(req.Args) > 0 || req.Action == api.DecideAnswer {
				return "", &RefusedError{ID: id, CallID: req.CallID, Msg: "the worker running this run predates nexo.decide: edited arguments and answers need a worker of this version (approve and deny still work)"}
			}
			sig := api.ApprovalSignal{CallID: req.CallID, Approved: req.Action == api.DecideApprove, Reason: req.Reason, Always: req.Always, By: req.By}
			if err := c.signal(ctx, id, api.SignalApproval, sig); err != nil {
				return "", err
			}
			verb := "denied"
			if sig.Approved {
				verb = "approved"
			}
			return fmt.Sprintf("%s tool call %s (%s) of run %s", verb, req.CallID, a.Tool, id), nil
		case errors.As(err, &app):
			return "", &RefusedError{ID: id, CallID: req.CallID, Msg: app.Message()}
		}
		return "", fmt.Errorf("decide tool call %s of run %s: %w", req.CallID, id, err)
	}
	var pause *api.BudgetPause
	if a.Capability == api.CapabilityBudget && a.CallID == res.CallID {
		var p api.BudgetPause
		if json.Unmarshal(a.Args, &p) == nil {
			pause = &p
		}
	}
	if what := budgetDecided(id, res, pause); what != "" {
		return what, nil
	}
	switch {
	case len(res.EditedArgs) > 0:
		return fmt.Sprintf("approved tool call %s (%s) of run %s with edited arguments %s", res.CallID, res.Tool, id, res.EditedArgs), nil
	case res.Action == api.DecideAnswer:
		return fmt.Sprintf("answered tool call %s (%s) of run %s; the tool does not run", res.CallID, res.Tool, id), nil
	case res.Action == api.DecideDeny:
		return fmt.Sprintf("denied tool call %s (%s) of run %s", res.CallID, res.Tool, id), nil
	}
	return fmt.Sprintf("approved tool call %s (%s) of run %s", res.CallID, res.Tool, id), nil
}

// current is the record of a run about to receive a decision. An open run answers the
// query directly; anything else (closed, not started, unknown) goes through Get, which
// describes the run first. Deciding is on every approval's path, so it skips a round trip.
//
// queried says the record came from the query alone, whose status is the run's memory:
// a closed run still answers it when a worker replays it, so a refusal built on it must
// be checked against the run's real status (Get) first.
func (c *Client) current(ctx context.Context, id string) (rec api.Record, queried bool, err error) {
	if id == "" {
		return api.Record{}, false, &BadRequestError{Msg: "run id is empty"}
	}
	if rec, err := c.query(ctx, id); err == nil && (rec.Status == api.StatusSuspended || rec.Status == api.StatusRunning) {
		return rec, true, nil
	}
	rec, err = c.Get(ctx, id)
	return rec, false, err
}

func (c *Client) signal(ctx context.Context, id, name string, arg any) error {
	err := c.tc.SignalWorkflow(ctx, id, "", name, arg)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// The run closed between the check and the signal (terminated while suspended).
		if rec, gerr := c.Get(ctx, id); gerr == nil {
			return &StateError{ID: id, Status: rec.Status, Want: "suspended"}
		}
		return &NotFoundError{ID: id}
	}
	if err != nil {
		return fmt.Errorf("signal %s to run %s: %w", name, id, err)
	}
	return nil
}

// Cancel requests cancellation of an open run and says what it did. A run that never
// started because no worker has its workflow type (every first workflow task failed) would
// never see a cancel request: it is terminated instead, which loses nothing, since none of
// its code ever ran.
func (c *Client) Cancel(ctx context.Context, id string) (string, error) {
	desc, err := c.describe(ctx, id)
	if err != nil {
		return "", err
	}
	info := desc.GetWorkflowExecutionInfo()
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", &StateError{ID: id, Status: closedStatus(st), Want: "open"}
	}
	if uw := c.neverStarted(ctx, id, info.GetType().GetName()); uw != nil {
		reason := fmt.Sprintf("canceled before it started: no worker offers workflow type %q", uw.Workflow)
		if err := c.tc.TerminateWorkflow(ctx, id, "", reason); err != nil {
			return "", fmt.Errorf("terminate run %s: %w", id, err)
		}
		return fmt.Sprintf("run %s never started (no worker offers workflow type %q): terminated it", id, uw.Workflow), nil
	}
	if lead := c.cannotLoad(ctx, id); lead != "" {
		// A cancel is delivered to the workflow's next task, and no task of this run can
		// run: the request would be accepted and the run stay open for good.
		return "", &StateError{ID: id, Status: api.StatusRunning, Want: "able to run its workflow",
			Hint: lead + "; a cancel would never reach its workflow: restore the blob from a backup of the store, or end the run with `starter cancel " + id + " --terminate` (nothing of the run's own cleanup runs then: release its sandbox with `starter sandbox` if it had one)"}
	}
	if err := c.tc.CancelWorkflow(ctx, id, ""); err != nil {
		return "", fmt.Errorf("cancel run %s: %w", id, err)
	}
	return "cancel requested for run " + id, nil
}

// Terminate ends open run id at once, with reason recorded: no code of the run runs (no
// cleanup, no notification), so it is for a run whose workflow cannot run (cannotLoad).
func (c *Client) Terminate(ctx context.Context, id, reason string) (string, error) {
	desc, err := c.describe(ctx, id)
	if err != nil {
		return "", err
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", &StateError{ID: id, Status: closedStatus(st), Want: "open"}
	}
	if err := c.tc.TerminateWorkflow(ctx, id, "", reason); err != nil {
		return "", fmt.Errorf("terminate run %s: %w", id, err)
	}
	return "terminated run " + id + ": " + reason, nil
}

// cannotLoad is the store_corrupt text (StoreCorrupt) of why the run's workflow cannot
// run, "" when it can or something else stops it. The run's last workflow task says so
// once one failed on it; a query, which replays the run's history, fails on a changed
// offloaded input (or any payload the history holds) as a workflow task does. The query
// gets cannotLoadWait: a worker that cannot load the run answers at once, and when none
// answers (no worker up) the cancel goes on as before, only that much later.
func (c *Client) cannotLoad(ctx context.Context, id string) string {
	last := ""
	it := c.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return ""
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			last = ""
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			last = StoreCorruptText(ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		}
	}
	if last != "" {
		return last
	}
	qctx, cancel := context.WithTimeout(ctx, cannotLoadWait)
	defer cancel()
	_, err := c.query(qctx, id)
	return StoreCorrupt(err)
}

// cannotLoadWait bounds the query cannotLoad asks.
const cannotLoadWait = 2 * time.Second

// UnknownWorkflowError: a run's workflow type is registered on no worker of its task
// queue, so its first workflow task fails on every attempt and the run never starts.
type UnknownWorkflowError struct {
	ID       string
	Workflow string
	// Supported is what the worker that failed the task offers, as it said.
	Supported string
}

func (e *UnknownWorkflowError) Error() string {
	msg := fmt.Sprintf("run %s cannot start: no worker offers workflow type %q", e.ID, e.Workflow)
	if e.Supported != "" {
		msg += fmt.Sprintf(" (the worker has: %s)", e.Supported)
	}
	return msg + fmt.Sprintf("; check the name, or end the run with: starter cancel %s", e.ID)
}

// sdkUnknownType is how the Go SDK's worker fails a workflow task of a type it does not
// have: "unable to find workflow type: X. Supported types: [A, B]".
const sdkUnknownType = "unable to find workflow type: "

func unknownWorkflow(id, workflow, failure string) *UnknownWorkflowError {
	rest, ok := strings.CutPrefix(failure, sdkUnknownType)
	if !ok {
		return nil
	}
	e := &UnknownWorkflowError{ID: id, Workflow: workflow}
	if name, supported, ok := strings.Cut(rest, ". Supported types: "); ok {
		e.Workflow = name
		e.Supported = strings.TrimSuffix(strings.TrimPrefix(supported, "["), "]")
	}
	return e
}

// neverStarted reports a run none of whose workflow tasks completed and whose last one
// failed for want of its workflow type.
func (c *Client) neverStarted(ctx context.Context, id, workflow string) *UnknownWorkflowError {
	var last *UnknownWorkflowError
	it := c.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			return nil
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			last = unknownWorkflow(id, workflow, ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		}
	}
	return last
}

// Rerun starts a failed, interrupted or canceled run again as a new run with the same
// workflow, seeded with its completed checkpoints, so only missing steps run. The new run
// gets payload when it is not empty (to fix the input that made the run fail), else the
// failed run's payload.
func (c *Client) Rerun(ctx context.Context, id string, payload json.RawMessage) (string, error) {
	rec, err := c.Get(ctx, id)
	if err != nil {
		return "", err
	}
	switch rec.Status {
	case api.StatusFailed, api.StatusInterrupted, api.StatusCanceled:
	default:
		return "", &StateError{ID: id, Status: rec.Status, Want: "failed, interrupted or canceled",
			Hint: "only a run that did not finish can be re-run"}
	}
	if rec.Warning != "" {
		// Its checkpoints are unknown: a re-run would pay for every step again.
		return "", &StateError{ID: id, Status: rec.Status, Want: "readable",
			Hint: "its checkpoints cannot be read to seed a re-run: " + rec.Warning}
	}
	seed := map[string]json.RawMessage{}
	for k, v := range rec.State {
		if !api.IsReservedStateKey(k) {
			seed[k] = v
		}
	}
	// The run's own type and input ran on this task queue already: they are not asked of
	// the registry again, so a re-run needs no live worker to be accepted (it waits for one,
	// as the run did). A new input is checked like any start's.
	unchecked := len(payload) == 0
	if unchecked {
		payload = rec.Payload
	}
	return c.Start(ctx, StartRequest{Workflow: rec.Workflow, Payload: payload, Unchecked: unchecked,
		Options: &api.RunOptions{Seed: seed, RerunOf: id}})
}

// Summary is one row of List.
type Summary struct {
	ID        string     `json:"id"`
	Workflow  string     `json:"workflow"`
	Status    api.Status `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
	// Agent is the agent the run runs (an AgentRun's, a session's), "" when not known:
	// other workflows, and AgentRuns started before runs recorded it.
	Agent string `json:"agent,omitempty"`
	// Prompt is the start of an AgentRun's prompt (api.MemoPromptRunes runes), "" when
	// the run recorded none.
	Prompt string `json:"prompt,omitempty"`
}

// ListRequest filters List.
type ListRequest struct {
	Status   api.Status // empty: any
	Workflow string     // empty: any
	// Search, when set, keeps the runs whose id starts with it, whose workflow type is it
	// or whose agent is it.
	Search    string
	Limit     int // 0: 50; at most MaxListLimit
	PageToken []byte
}

// MaxListLimit is the most runs one List returns (a page; the page token gets the next).
const MaxListLimit = 1000

// List returns runs newest first, through the visibility API, and the next page token.
func (c *Client) List(ctx context.Context, req ListRequest) ([]Summary, []byte, error) {
	q, err := listQuery(req)
	if err != nil {
		return nil, nil, err
	}
	limit := req.Limit
	switch {
	case limit < 0 || limit > MaxListLimit:
		return nil, nil, &BadRequestError{Msg: fmt.Sprintf("list runs: limit %d is not between 1 and %d", limit, MaxListLimit)}
	case limit == 0:
		limit = 50
	}
	resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: c.namespace, PageSize: int32(limit), NextPageToken: req.PageToken, Query: q,
	})
	var ia *serviceerror.InvalidArgument
	if errors.As(err, &ia) {
		return nil, nil, &BadRequestError{Msg: fmt.Sprintf("list runs: %s", ia.Message)}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list runs (query %q): %w", q, err)
	}
	out := make([]Summary, 0, len(resp.GetExecutions()))
	now := time.Now()
	seen := map[string]bool{}
	for _, e := range resp.GetExecutions() {
		// A run is its workflow id: `show` reads the id's latest execution, so an earlier
		// one (a session's run before a reopen, a first prompt's failed start and the
		// retry that failed too) is not listed as a second run. Newest come first.
		id := e.GetExecution().GetWorkflowId()
		if seen[id] {
			continue
		}
		seen[id] = true
		s := Summary{ID: id, Workflow: e.GetType().GetName(), Agent: rowAgent(e), Prompt: c.rowPrompt(e.GetMemo()),
			CreatedAt: e.GetStartTime().AsTime().UTC(), Status: summaryStatus(e, now)}
		if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t := e.GetCloseTime().AsTime().UTC()
			s.ClosedAt = &t
		}
		out = append(out, s)
	}
	return out, resp.GetNextPageToken(), nil
}

func listQuery(req ListRequest) (string, error) {
	// The task queues' registries and the endpoints' token limiters are workflows, not runs.
	// An execution that continued as new is never a run's latest: its successor is listed.
	parts := []string{fmt.Sprintf("WorkflowType != '%s' AND WorkflowType != '%s' AND WorkflowType != '%s' AND ExecutionStatus != 'ContinuedAsNew'",
		api.WorkflowRegistry, api.WorkflowTokenLimiter, api.WorkflowNotifier)}
	if req.Search != "" {
		c, err := searchClause(req.Search)
		if err != nil {
			return "", err
		}
		parts = append(parts, c)
	}
	if req.Workflow != "" {
		if strings.ContainsAny(req.Workflow, `'"\`) {
			return "", &BadRequestError{Msg: fmt.Sprintf("workflow name %q contains a quote", req.Workflow)}
		}
		parts = append(parts, fmt.Sprintf("WorkflowType = '%s'", req.Workflow))
	}
	switch req.Status {
	case "":
	case api.StatusRunning, api.StatusSuspended:
		parts = append(parts, fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s'", api.SearchAttributeStatus, req.Status))
	case api.StatusPending, api.StatusQueued:
		parts = append(parts, fmt.Sprintf("ExecutionStatus = 'Running' AND %s IS NULL", api.SearchAttributeStatus))
	case api.StatusDone:
		parts = append(parts, "ExecutionStatus = 'Completed'")
	case api.StatusFailed:
		parts = append(parts, "ExecutionStatus = 'Failed'")
	case api.StatusCanceled:
		parts = append(parts, "ExecutionStatus = 'Canceled'")
	case api.StatusInterrupted:
		parts = append(parts, "(ExecutionStatus = 'Terminated' OR ExecutionStatus = 'TimedOut')")
	default:
		return "", &BadRequestError{Msg: fmt.Sprintf("unknown status %q (want one of %v)", req.Status, api.Statuses)}
	}
	return strings.Join(parts, " AND "), nil
}

// Follow calls fn with the run's record now and every time it changes, until fn returns
// true, the run closes, or ctx ends. It waits on history with a long poll rather than
// polling the query, so an idle run costs nothing, and on each change reads only the new
// events, the status and what the run waits for (the nexo.events query); the record is
// read whole only when a checkpoint or an artifact changed, and when the run closes. It
// returns the last record.
func (c *Client) Follow(ctx context.Context, id string, fn func(rec api.Record) bool) (api.Record, error) {
	return c.follow(ctx, id, fn, nil)
}

// follow is Follow, waking lf (when set) whenever a model call may have begun.
func (c *Client) follow(ctx context.Context, id string, fn func(rec api.Record) bool, lf *liveFollow) (api.Record, error) {
	desc, err := c.describe(ctx, id)
	if err != nil {
		return api.Record{}, err
	}
	// The history this follow waits on says nothing while an activity is retried: rw
	// reads the run's pending activities while one is pending, and every record handed
	// to fn (by this loop or by rw) carries them.
	hctx, stop := context.WithCancel(ctx)
	rw := newRetryWatch(c, id, func(r api.Record) bool { return lf.record(r, fn) }, stop)
	rw.retrying = retryingOf(desc)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		rw.run(hctx)
	}()
	defer func() {
		rw.end() // fn is not called after follow returns
		stop()
		<-watched
	}()
	if len(desc.GetPendingActivities()) > 0 {
		rw.poke()
	}
	if lf != nil && slices.ContainsFunc(desc.GetPendingActivities(), func(pa *workflowpb.PendingActivityInfo) bool {
		return pa.GetActivityType().GetName() == api.ActivityCompleteChat
	}) {
		lf.poke()
	}
	info := desc.GetWorkflowExecutionInfo()
	seen := info.GetHistoryLength()
	var rec api.Record
	// A run whose first workflow task has not completed has nothing to show yet (its
	// history is started, task scheduled, maybe task started): wait for that task instead
	// of asking a query that would only wait for it too.
	fresh := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && seen <= 3 &&
		!delayed(info)
	if fresh {
		seen = 0
	} else {
		// A task that failed for want of its workflow type before this follow began is
		// behind seen: look for it, or the follow would wait for a run that never starts.
		// (Such a run's history is a handful of events; a longer one has started.)
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && seen < 20 {
			if uw := c.neverStarted(ctx, id, info.GetType().GetName()); uw != nil {
				return api.Record{}, uw
			}
		}
		if rec, err = c.getDescribed(ctx, id, desc); err != nil {
			return api.Record{}, err
		}
		if rec, err = c.withTexts(ctx, rec); err != nil {
			return api.Record{}, err
		}
		if rw.deliver(&rec) {
			return rec, nil
		}
	}
	it := c.tc.GetWorkflowHistory(hctx, id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if last, done := rw.finished(); done {
			return last, nil // fn said stop when a retry changed; the wait was cut for it
		}
		if err != nil {
			if ctx.Err() != nil {
				return rec, ctx.Err()
			}
			return rec, fmt.Errorf("follow run %s: %w", id, err)
		}
		if ev.GetEventId() <= seen {
			continue
		}
		var next api.Record
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			// The run is open and its state just changed: its events query says how, a
			// page of what is new at a time.
			next, err = c.advance(ctx, id, rec)
			if err != nil {
				next, err = c.Get(ctx, id)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			next, err = c.Get(ctx, id)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			// The one task failure that retrying cannot end: no worker on the queue has the
			// workflow type. Say so instead of following a run that never starts.
			if uw := unknownWorkflow(id, rec.Workflow, ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage()); uw != nil {
				if uw.Workflow == "" {
					if r, gerr := c.Get(ctx, id); gerr == nil {
						uw.Workflow = r.Workflow
					}
				}
				return rec, uw
			}
			continue
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == api.ActivityCompleteChat {
				lf.poke() // its live text is in its heartbeat, not in history
			}
			rw.poke() // its retries are in the pending activity, not in history
			continue
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			rw.poke() // no longer retried: the next record says so
			continue
		default:
			continue
		}
		if err == nil {
			// Only the new events have texts to resolve: those of rec are resolved.
			next, err = c.withTexts(ctx, next)
		}
		if err != nil {
			return rec, err
		}
		rec = next
		if rw.deliver(&rec) {
			return rec, nil
		}
	}
	if last, done := rw.finished(); done {
		return last, nil
	}
	if ctx.Err() != nil {
		return rec, ctx.Err()
	}
	return c.Get(ctx, id)
}

// advance brings rec, a record of open run id, up to date through the events query: only
// the events after rec's last, the status and what the run waits for cross the wire. A
// record that cannot be advanced that way (none yet, a checkpoint or artifact was added or
// changed, the execution holds no events as old as rec's next, or a worker from before the
// events query) is read whole instead. rec itself is never changed: a follower may still
// hold it.
func (c *Client) advance(ctx context.Context, id string, rec api.Record) (api.Record, error) {
	if rec.ID == "" {
		return c.query(ctx, id)
	}
	last := lastEventSeq(rec)
	events := rec.Events
	for {
		p, err := c.queryEvents(ctx, id, last)
		if err != nil {
			return c.query(ctx, id)
		}
		if p.FirstSeq > last+1 || !sameShape(rec, p) {
			return c.query(ctx, id)
		}
		if p.Status.Closed() {
			// The page has no result: a run that closed (its last task's completion is
			// read before its close event) is read whole, from its stored record.
			return c.Get(ctx, id)
		}
		if len(p.Events) > 0 {
			events = append(events[:len(events):len(events)], p.Events...)
			last = p.Events[len(p.Events)-1].Seq
		}
		if p.More && len(p.Events) > 0 {
			continue
		}
		next := rec
		next.Events = events
		next.Status, next.Error, next.UpdatedAt = p.Status, p.Error, p.UpdatedAt
		next.State = make(map[string]json.RawMessage, len(rec.State))
		for k, v := range rec.State {
			if !api.IsReservedStateKey(k) {
				next.State[k] = v
			}
		}
		for k, v := range p.Waiting {
			next.State[k] = v
		}
		return next, nil
	}
}

// queryEvents asks run id for its events after seq after (one page).
func (c *Client) queryEvents(ctx context.Context, id string, after int64) (api.EventPage, error) {
	qctx, cancel := context.WithTimeout(ctx, c.QueryTimeout)
	defer cancel()
	v, err := c.tc.QueryWorkflow(qctx, id, "", api.QueryEvents, after, api.MaxEventPage)
	if err != nil {
		return api.EventPage{}, err
	}
	var p api.EventPage
	if err := v.Get(&p); err != nil {
		return api.EventPage{}, fmt.Errorf("decode events of run %s: %w", id, err)
	}
	return p, nil
}

// sameShape reports whether rec has the checkpoints and artifacts page names.
func sameShape(rec api.Record, p api.EventPage) bool {
	n := 0
	for k := range rec.State {
		if !api.IsReservedStateKey(k) {
			if !slices.Contains(p.Checkpoints, k) {
				return false
			}
			n++
		}
	}
	if n != len(p.Checkpoints) || len(rec.Artifacts) != len(p.Artifacts) {
		return false
	}
	for i, a := range rec.Artifacts {
		if a.Name != p.Artifacts[i].Name || a.SHA256 != p.Artifacts[i].SHA256 {
			return false
		}
	}
	return true
}

// lastEventSeq is the seq of rec's last event, 0 when it has none.
func lastEventSeq(rec api.Record) int64 {
	if n := len(rec.Events); n > 0 {
		return rec.Events[n-1].Seq
	}
	return 0
}
