package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/api/searchattr"
	"github.com/nexo-temporal/nexo/internal/execlocal"
	"github.com/nexo-temporal/nexo/permissions"
)

// Registry is the part of a Temporal worker that Register needs, so tests can pass a
// testsuite environment and users their own worker.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Options configure a registered workflow.
type Options struct {
	// Sandbox the run's files live in (Stage, Artifact with Path). Empty means a local
	// workspace owned by the run and removed when it ends.
	Sandbox api.SandboxSpec
}

// Register registers fn as the Nexo workflow type name. The registered function wraps fn
// with the run runtime: it builds the run record, answers the nexo.run query, dispatches
// signals, keeps the NexoStatus search attribute current and records the outcome.
//
// The workflow's input is the run payload (any JSON, decoded into In); an optional second
// argument api.RunOptions seeds checkpoints for a re-run.
func Register[In, Out any](r Registry, name string, fn func(ctx workflow.Context, in In) (Out, error), opts Options) {
	r.RegisterWorkflowWithOptions(Wrap(name, fn, opts), workflow.RegisterOptions{Name: name})
	recordInput[In](r, name)
}

// RunFunc is the shape of every registered Nexo workflow.
type RunFunc func(ctx workflow.Context, payload json.RawMessage, opts *api.RunOptions) (json.RawMessage, error)

// Wrap returns fn wrapped with the run runtime, for registering by hand or testing.
func Wrap[In, Out any](name string, fn func(ctx workflow.Context, in In) (Out, error), opts Options) RunFunc {
	return func(ctx workflow.Context, payload json.RawMessage, ro *api.RunOptions) (json.RawMessage, error) {
		rt, ctx := start(ctx, name, payload, ro, opts)
		// Also when the execution is evicted from the worker's cache: the SDK ends the
		// workflow's coroutines with runtime.Goexit, which runs this.
		defer forgetRuntime(ctx)
		var in In
		if err := decodePayload(payload, &in); err != nil {
			return nil, rt.fail(ctx, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("decode payload of %s: %v", name, err), api.ErrTypeBadInput, nil))
		}
		out, err := fn(ctx, in)
		if err != nil {
			if workflow.IsContinueAsNewError(err) {
				// Not an outcome: the run goes on in a new execution that carries its state.
				return nil, err
			}
			return nil, rt.fail(ctx, err)
		}
		result, err := json.Marshal(out)
		if err != nil {
			return nil, rt.fail(ctx, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("encode result of %s: %v", name, err), api.ErrTypeBadInput, nil))
		}
		rt.finish(ctx, result)
		return result, nil
	}
}

func decodePayload(payload json.RawMessage, in any) error {
	if len(payload) == 0 || string(payload) == "null" {
		return nil
	}
	return json.Unmarshal(payload, in)
}

// runtime is the state of one run. It lives in workflow memory and is rebuilt by replay,
// so it is never persisted separately; the query serves it.
type runtime struct {
	rec     api.Record
	sandbox api.SandboxSpec
	// toolDir is the working directory of the current session turn's tools, relative to
	// the workspace ("" for the workspace itself; a prompt's dir, session.go).
	toolDir string
	// sandboxUsed is set once an activity touched the run's sandbox, so it is released.
	sandboxUsed bool
	// depth is how deep this run is in a delegation (0: not a delegate; delegate.go).
	depth int

	// suspension bookkeeping, see suspend.go.
	suspendGen int
	suspendKey string
	// suspendCheck, when set, refuses a resume input that does not fit (SuspendFor).
	suspendCheck func(map[string]any) error
	suspended    bool
	resumeInput  map[string]any
	resumeReady  bool
	pending      *approvalWaiter
	decided      map[string]string // tool call id → how it was decided (nexo.decide refuses a second decision)
	decidedOrder []string          // the keys of decided, oldest first (a session carries the newest)

	// agent state: human decisions remembered for the run, and the file versions the
	// agent has read (for the read-before-write guard).
	approvals permissions.Approvals
	stamps    map[string]api.FileStamp
	// streamed holds the text of model calls received so far as SignalStream chunks
	// (sessions), so the final message adds only what the chunks did not carry.
	streamed map[string]string
	// streamCall is the model call whose streamed output is being accepted.
	streamCall string
	// seqBase numbers events on from an earlier run (a session after continue-as-new).
	seqBase int64

	// rootCtx is the run's own context (worker sessions are opened from it); hostSession
	// pins a docker sandbox's activities to its worker; parked is set while the workspace
	// is archived and no container exists (see hostroute.go).
	rootCtx     workflow.Context
	hostSession workflow.Context
	parked      bool
	// host is the run's host queue routing (hostq.go), which replaces worker sessions.
	host hostState

	// skillFiles are the recorded skill files copied into the sandbox, by agent, copied
	// again when a docker sandbox is re-created; probed lists agents whose requires were
	// met (see skills.go).
	skillFiles map[string]api.MaterializeSkillsRequest
	probed     map[string]bool

	// threadV is the run's version of ChangeThreadByRef, once asked (thread.go).
	threadV *workflow.Version

	// agent is the agent whose loop runs now (set by agentLoop): the value of the
	// NexoApprovalAgent search attribute while one of its calls waits. approvalAttr is the
	// value last upserted ("" none), inboxV the run's version of ChangeInbox, once asked.
	agent        string
	approvalAttr string
	inboxV       *workflow.Version

	notify notifier // receivers of approval notifications (notify.go)

	// toolSlots bounds the tool calls of one model reply running at once, while they run
	// concurrently (tool_concurrency, toolpar.go); nil otherwise.
	toolSlots workflow.Semaphore
	budget    budgetState // the agents' budgets: version, raises (budget.go)
}

func start(ctx workflow.Context, name string, payload json.RawMessage, ro *api.RunOptions, opts Options) (*runtime, workflow.Context) {
	info := workflow.GetInfo(ctx)
	if len(payload) == 0 || string(payload) == "null" {
		payload = json.RawMessage("{}")
	}
	rt := &runtime{
		rec: api.Record{
			ID:        info.WorkflowExecution.ID,
			Workflow:  name,
			Status:    api.StatusRunning,
			Payload:   payload,
			State:     map[string]json.RawMessage{},
			Events:    []api.Event{},
			Artifacts: []api.Artifact{},
			CreatedAt: info.WorkflowStartTime.UTC(),
			UpdatedAt: workflow.Now(ctx).UTC(),
		},
		sandbox: opts.Sandbox,
	}
	keepRuntime(ctx, rt)
	ctx = workflow.WithActivityOptions(ctx, DefaultActivityOptions())
	rt.rootCtx = ctx

	// The query handler is registered before anything can block, so a run is readable
	// from its first workflow task on.
	if err := workflow.SetQueryHandler(ctx, api.QueryRun, rt.query); err != nil {
		panic(fmt.Sprintf("register query %s: %v", api.QueryRun, err)) // only on a duplicate name: a programming error
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryEvents, rt.eventsPage); err != nil {
		panic(fmt.Sprintf("register query %s: %v", api.QueryEvents, err))
	}
	startSignalDispatcher(ctx, rt)

	if ro != nil {
		for _, k := range sortedKeys(ro.Seed) {
			if !api.IsReservedStateKey(k) {
				rt.rec.State[k] = ro.Seed[k]
			}
		}
		if ro.RerunOf != "" {
			rt.emit(ctx, "rerun", map[string]any{"of": ro.RerunOf, "seeded": sortedKeys(ro.Seed)})
		}
	}
	rt.setStatus(ctx, api.StatusRunning)
	return rt, ctx
}

// ActivityHeartbeatTimeout is the heartbeat timeout of every activity a Nexo workflow runs:
// a worker silent this long is taken as lost and the attempt is retried.
const ActivityHeartbeatTimeout = 10 * time.Second

// DefaultActivityOptions are the options of every activity a Nexo workflow runs unless the
// workflow sets its own with workflow.WithActivityOptions. Retries are bounded so a step
// that keeps failing fails the run (which can then be re-run) instead of retrying forever.
// Each call returns a fresh value (its RetryPolicy too), so no caller can change another's.
//
// Every activity heartbeats while it runs (the worker keeps each one alive, see
// activities.Register), so an attempt on a worker that was killed is retried elsewhere
// after ActivityHeartbeatTimeout, not after its start-to-close timeout.
func DefaultActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    ActivityHeartbeatTimeout,
		RetryPolicy:         defaultRetryPolicy(),
	}
}

func defaultRetryPolicy() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    5,
		NonRetryableErrorTypes: []string{
			api.ErrTypeBadInput, api.ErrTypeNotFound, api.ErrTypeEscape, api.ErrTypeTooLarge,
		},
	}
}

// ErrNoRuntime is returned (wrapped with the operation) by the authoring API (Checkpoint,
// Emit, Suspend, Artifact, RunAgent, ...) called from a workflow that was not registered
// through Register or Wrap, so it has no run record to work on.
var ErrNoRuntime = errors.New("workflow has no run runtime: register it with workflows.Register")

// runtimes holds the run runtime of every execution this process is running, keyed by the
// execution's *workflow.Info. The SDK hands the same Info pointer to every context of one
// execution (the workflow function's, a workflow.Go goroutine's, and the root-derived
// context an update handler gets, which carries none of the workflow's ctx values) and a
// fresh one to every new execution (continue-as-new, a replay after cache eviction). The
// SDK has no workflow-local variable; this is its equivalent. Wrap removes the entry when
// the workflow function returns or is unwound by an eviction.
var runtimes execlocal.Map[*workflow.Info, *runtime]

func keepRuntime(ctx workflow.Context, rt *runtime) { runtimes.Set(workflow.GetInfo(ctx), rt) }

func forgetRuntime(ctx workflow.Context) { runtimes.Delete(workflow.GetInfo(ctx)) }

// runtimeOf returns the run runtime of ctx's execution, from any context of it, or an
// error naming op and wrapping ErrNoRuntime.
func runtimeOf(ctx workflow.Context, op string) (*runtime, error) {
	info := workflow.GetInfo(ctx)
	rt, ok := runtimes.Get(info)
	if !ok {
		return nil, fmt.Errorf("%s in workflow %s (%s): %w", op, info.WorkflowType.Name, info.WorkflowExecution.ID, ErrNoRuntime)
	}
	return rt, nil
}

// query answers api.QueryRun. It returns a copy, so a caller cannot alias workflow state.
func (rt *runtime) query() (api.Record, error) {
	rec := rt.rec
	rec.State = make(map[string]json.RawMessage, len(rt.rec.State))
	for k, v := range rt.rec.State {
		rec.State[k] = v
	}
	rec.Events = append([]api.Event(nil), rt.rec.Events...)
	rec.Artifacts = append([]api.Artifact(nil), rt.rec.Artifacts...)
	return rec, nil
}

func (rt *runtime) touch(ctx workflow.Context) {
	rt.rec.UpdatedAt = workflow.Now(ctx).UTC()
}

func (rt *runtime) setStatus(ctx workflow.Context, s api.Status) {
	rt.rec.Status = s
	rt.touch(ctx)
	// The search attribute mirrors the status so `starter list --status` is a visibility
	// query. An upsert only fails on an unregistered attribute, a setup error the worker
	// checks at start; the record stays right either way.
	if err := workflow.UpsertTypedSearchAttributes(ctx, searchattr.Status.ValueSet(string(s))); err != nil {
		workflow.GetLogger(ctx).Warn("upsert NexoStatus failed", "error", err)
	}
	// A decided call leaves the record's approval state and sets the status: the inbox
	// attribute follows here, so every status change re-checks it.
	rt.syncApprovalAttr(ctx)
}

// syncApprovalAttr upserts NexoApprovalAgent when what the record waits for changed: the
// agent of the pending call while state holds __approval__, unset otherwise. It asks the
// version only once a call waits (or an upsert was made), so a run that never waits for a
// human records no marker.
func (rt *runtime) syncApprovalAttr(ctx workflow.Context) {
	want := ""
	if _, ok := rt.rec.State[api.StateApproval]; ok {
		want = rt.agent
		if want == "" {
			want = rt.rec.Workflow // an approval outside an agent loop: name the workflow
		}
	}
	if want == rt.approvalAttr {
		return
	}
	if rt.inboxV == nil {
		v := workflow.GetVersion(ctx, ChangeInbox, workflow.DefaultVersion, 1)
		rt.inboxV = &v
	}
	if *rt.inboxV < 1 {
		return
	}
	upd := searchattr.ApprovalAgent.ValueUnset()
	if want != "" {
		upd = searchattr.ApprovalAgent.ValueSet(want)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, upd); err != nil {
		// Only on an unregistered attribute, which the worker checks at start.
		workflow.GetLogger(ctx).Warn("upsert "+api.SearchAttributeApprovalAgent+" failed", "error", err)
		return
	}
	rt.approvalAttr = want
}

func (rt *runtime) setState(ctx workflow.Context, key string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("nexo: state %s is not JSON: %v", key, err)) // only our own types go here
	}
	rt.rec.State[key] = raw
	rt.touch(ctx)
	if key == api.StateApproval {
		rt.syncApprovalAttr(ctx)
	}
}

func (rt *runtime) finish(ctx workflow.Context, result json.RawMessage) {
	rt.rec.Result = result
	for _, k := range api.ReservedStateKeys {
		delete(rt.rec.State, k)
	}
	rt.release(ctx)
	rt.awaitNotifications(ctx)
	rt.emit(ctx, "done", nil)
	rt.setStatus(ctx, api.StatusDone)
	rt.persist(ctx)
}

// fail records err as the run's outcome and returns it for the workflow to return.
func (rt *runtime) fail(ctx workflow.Context, err error) error {
	msg := errorMessage(err)
	rt.rec.Error = &msg
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) || errors.Is(ctx.Err(), workflow.ErrCanceled) {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		rt.release(dctx)
		rt.awaitNotifications(dctx)
		rt.emit(dctx, "canceled", nil)
		rt.setStatus(dctx, api.StatusCanceled)
		rt.persist(dctx)
		// Temporal closes a run canceled only when it returns a CanceledError (errors.As
		// through wrappers); a step that flattened its cancellation to text (a tool call's,
		// before errors kept their type, and any user code that does) would close it failed.
		if !errors.As(err, &canceled) && workflow.GetVersion(dctx, ChangeCancelOutcome, workflow.DefaultVersion, 1) >= 1 {
			return temporal.NewCanceledError(msg)
		}
		return err
	}
	if len(msg) > api.MaxFailureMessage {
		// The SDK would send the whole message, and every cause's, in the closing command.
		msg = fmt.Sprintf("%s… (%d bytes of the message cut)", strings.ToValidUTF8(msg[:api.MaxFailureMessage], ""), len(msg)-api.MaxFailureMessage)
		rt.rec.Error = &msg
		err = temporal.NewNonRetryableApplicationError(msg, api.ErrTypeTooLarge, nil)
	}
	rt.release(ctx)
	rt.awaitNotifications(ctx)
	rt.emit(ctx, "failed", map[string]any{"error": msg})
	rt.setStatus(ctx, api.StatusFailed)
	rt.persist(ctx)
	return failure(msg, err)
}

// failure is the error a failed run closes with. When err is workflow code's wrapping
// around an ApplicationError (a checkpoint's, an agent's model call's), the run closes with
// an ApplicationError of the same type and non-retryable flag whose message is the
// record's, so a client or parent workflow matches the type at the top with errors.As
// (without it the top would be a Go wrapper the SDK names by its Go type, retryable);
// Temporal's own errors under the wrapping (activity, cause) stay as its cause. Any other
// error is returned as it is.
func failure(msg string, err error) error {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || error(app) == err {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(msg, app.Type(), temporal.ApplicationErrorOptions{
		NonRetryable: app.NonRetryable(),
		Cause:        temporalCause(err),
	})
}

// temporalCause is the first Temporal error in err's chain: what is under workflow code's
// wrappers, whose text the run's message already carries.
func temporalCause(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.(type) {
		case *temporal.ApplicationError, *temporal.ActivityError, *temporal.ChildWorkflowExecutionError,
			*temporal.CanceledError, *temporal.TimeoutError, *temporal.PanicError, *temporal.TerminatedError,
			*temporal.ServerError:
			return e
		}
	}
	return nil
}

// wrapError puts the operation that failed in front of err without flattening it: its
// message reads "op: what failed" (errorMessage: no Temporal wrapping), and errors.As and
// errors.Is still reach what is underneath (an ApplicationError with its type and
// non-retryable flag, a CanceledError, a sentinel such as ErrTurnLimit).
type wrapError struct {
	op  string // "" adds nothing to the message
	err error
}

func (e *wrapError) Error() string {
	if e.op == "" {
		return errorMessage(e.err)
	}
	return e.op + ": " + errorMessage(e.err)
}

func (e *wrapError) Unwrap() error { return e.err }

// wrap returns err behind the operation format names; use it where workflow code adds
// context to an error, never fmt.Errorf("...: %s", errorMessage(err)), which loses the type.
func wrap(err error, format string, args ...any) error {
	return &wrapError{op: fmt.Sprintf(format, args...), err: err}
}

// errorMessage says what went wrong without Temporal's wrapping: an activity failure reads
// "activity error (type: X, scheduledEventID: 5, ...): msg", which tells a user nothing more
// than "X: msg". It is the text for the record and events; the error itself travels
// wrapped (see wrap).
func errorMessage(err error) string {
	if act, ok := err.(*temporal.ActivityError); ok && errors.Unwrap(act) != nil {
		if act.RetryState() == enumspb.RETRY_STATE_TIMEOUT {
			return fmt.Sprintf("%s: %s (retried until its retry budget ran out)", act.ActivityType().GetName(), innerMessage(errors.Unwrap(act)))
		}
		return fmt.Sprintf("%s: %s", act.ActivityType().GetName(), innerMessage(errors.Unwrap(act)))
	}
	return err.Error()
}

// innerMessage is the message of an ApplicationError without its type suffix.
func innerMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Message() != "" {
		return app.Message()
	}
	return err.Error()
}

// releaseOptions: removing a sandbox is quick; a few attempts, then an event.
func releaseOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    ActivityHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	}
}

// release removes the run's own sandbox when it has one. Best effort: a failure is an
// event, never a changed outcome.
func (rt *runtime) release(ctx workflow.Context) {
	if !rt.sandboxUsed {
		return
	}
	rt.sandboxUsed = false
	opts := releaseOptions()
	err := rt.onSandbox(ctx, &opts, api.ActivityReleaseSandbox, api.ReleaseSandboxRequest{
		RunID: rt.rec.ID, Sandbox: rt.sandbox,
	}, nil)
	rt.leaveHost()
	if err != nil {
		rt.emit(ctx, "sandbox_release_failed", map[string]any{"error": errorMessage(err)})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
