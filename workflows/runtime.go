package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
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

type runtimeKey struct{}

// runtime is the state of one run. It lives in workflow memory and is rebuilt by replay,
// so it is never persisted separately; the query serves it.
type runtime struct {
	rec     api.Record
	sandbox api.SandboxSpec
	// sandboxUsed is set once an activity touched the run's sandbox, so it is released.
	sandboxUsed bool

	// suspension bookkeeping, see suspend.go.
	suspendGen int
	suspendKey string
	// suspendCheck, when set, refuses a resume input that does not fit (SuspendFor).
	suspendCheck func(map[string]any) error
	suspended    bool
	resumeInput  map[string]any
	resumeReady  bool
	pending      *approvalWaiter

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

	// skillFiles are the recorded skill files copied into the sandbox, by agent, copied
	// again when a docker sandbox is re-created; probed lists agents whose requires were
	// met (see skills.go).
	skillFiles map[string]api.MaterializeSkillsRequest
	probed     map[string]bool

	// threadV is the run's version of changeThreadByRef, once asked (thread.go).
	threadV *workflow.Version
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
	ctx = workflow.WithValue(ctx, runtimeKey{}, rt)
	ctx = workflow.WithActivityOptions(ctx, DefaultActivityOptions)
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

// DefaultActivityOptions apply to every activity a Nexo workflow runs unless the workflow
// sets its own with workflow.WithActivityOptions. Retries are bounded so a step that keeps
// failing fails the run (which can then be re-run) instead of retrying forever.
//
// Every activity heartbeats while it runs (the worker keeps each one alive, see
// activities.Register), so an attempt on a worker that was killed is retried elsewhere
// after ActivityHeartbeatTimeout, not after its start-to-close timeout.
var DefaultActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 5 * time.Minute,
	HeartbeatTimeout:    ActivityHeartbeatTimeout,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    5,
		NonRetryableErrorTypes: []string{
			api.ErrTypeBadInput, api.ErrTypeNotFound, api.ErrTypeEscape, api.ErrTypeTooLarge,
		},
	},
}

func runtimeOf(ctx workflow.Context) *runtime {
	rt, ok := ctx.Value(runtimeKey{}).(*runtime)
	if !ok {
		panic("nexo: workflow context has no run runtime; register the workflow with workflows.Register")
	}
	return rt
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

var statusKey = temporal.NewSearchAttributeKeyKeyword(api.SearchAttributeStatus)

func (rt *runtime) touch(ctx workflow.Context) {
	rt.rec.UpdatedAt = workflow.Now(ctx).UTC()
}

func (rt *runtime) setStatus(ctx workflow.Context, s api.Status) {
	rt.rec.Status = s
	rt.touch(ctx)
	// The search attribute mirrors the status so `starter list --status` is a visibility
	// query. An upsert only fails on an unregistered attribute, a setup error the worker
	// checks at start; the record stays right either way.
	if err := workflow.UpsertTypedSearchAttributes(ctx, statusKey.ValueSet(string(s))); err != nil {
		workflow.GetLogger(ctx).Warn("upsert NexoStatus failed", "error", err)
	}
}

func (rt *runtime) setState(ctx workflow.Context, key string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("nexo: state %s is not JSON: %v", key, err)) // only our own types go here
	}
	rt.rec.State[key] = raw
	rt.touch(ctx)
}

func (rt *runtime) finish(ctx workflow.Context, result json.RawMessage) {
	rt.rec.Result = result
	for _, k := range api.ReservedStateKeys {
		delete(rt.rec.State, k)
	}
	rt.release(ctx)
	rt.emit(ctx, "done", nil)
	rt.setStatus(ctx, api.StatusDone)
	rt.persist(ctx)
}

// changeCancelOutcome: a canceled run returns a CanceledError whatever its step made of the
// cancellation (runs canceled before it could close failed).
const changeCancelOutcome = "cancel-outcome"

// fail records err as the run's outcome and returns it for the workflow to return.
func (rt *runtime) fail(ctx workflow.Context, err error) error {
	msg := errorMessage(err)
	rt.rec.Error = &msg
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) || errors.Is(ctx.Err(), workflow.ErrCanceled) {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		rt.release(dctx)
		rt.emit(dctx, "canceled", nil)
		rt.setStatus(dctx, api.StatusCanceled)
		rt.persist(dctx)
		// Temporal closes a run canceled only when it returns a CanceledError; a step that
		// rewrapped its cancellation (a tool call's "canceled") would close it failed.
		if !errors.As(err, &canceled) && workflow.GetVersion(dctx, changeCancelOutcome, workflow.DefaultVersion, 1) >= 1 {
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
	rt.emit(ctx, "failed", map[string]any{"error": msg})
	rt.setStatus(ctx, api.StatusFailed)
	rt.persist(ctx)
	return err
}

// errorMessage says what went wrong without Temporal's wrapping: an activity failure reads
// "activity error (type: X, scheduledEventID: 5, ...): msg", which tells a user nothing more
// than "X: msg".
func errorMessage(err error) string {
	if act, ok := err.(*temporal.ActivityError); ok && errors.Unwrap(act) != nil {
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
var releaseOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	HeartbeatTimeout:    ActivityHeartbeatTimeout,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
}

// release removes the run's own sandbox when it has one. Best effort: a failure is an
// event, never a changed outcome.
func (rt *runtime) release(ctx workflow.Context) {
	if !rt.sandboxUsed {
		return
	}
	rt.sandboxUsed = false
	opts := releaseOptions
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
