package workflows

import (
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// RegistryState is what a task queue's registry holds, and carries across
// continue-as-new.
type RegistryState struct {
	// Workers by identity.
	Workers map[string]api.RegisteredWorker `json:"workers"`
	// ContinueAfter is the number of announcements after which the registry continues as
	// new (0: registryContinueAfter). Tests lower it.
	ContinueAfter int `json:"continue_after,omitempty"`
}

// registryContinueAfter bounds the registry's history: an announcement adds about four
// events (signal, timer started and canceled, task), so 500 stay far below Temporal's
// limits, and a few workers announcing hourly continue as new every few days.
const registryContinueAfter = 500

// registryMaxWorkers bounds the entries, so a flood of announcements with made-up
// identities cannot grow the state past what continue-as-new can carry.
const registryMaxWorkers = 1000

// RegistryWorkflow is the registry of one task queue (workflow id api.RegistryID): workers
// announce what they offer with the api.SignalRegister signal (signal-with-start creates
// the registry on the first one), and api.QueryRegistry answers with the union, so a
// client refuses a workflow type no worker has instead of starting a run that never
// starts. It is not a Nexo run: no run record, no NexoStatus, no events.
//
// A signal rather than an update: a worker's announcement needs no answer and must reach
// the registry even while no worker is polling (a worker starting when the others are
// down announces before its own polling has begun). An entry not refreshed for
// api.RegistryExpiry is dropped by a durable timer, so a worker that is gone stops
// counting even when no other announces.
func RegistryWorkflow(ctx workflow.Context, st RegistryState) error {
	if st.Workers == nil {
		st.Workers = map[string]api.RegisteredWorker{}
	}
	limit := st.ContinueAfter
	if limit <= 0 {
		limit = registryContinueAfter
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryRegistry, func() (api.RegistryView, error) {
		return registryView(st.Workers), nil
	}); err != nil {
		return err
	}
	logger := workflow.GetLogger(ctx)
	announcements := workflow.GetSignalChannel(ctx, api.SignalRegister)
	record := func(a api.WorkerAnnouncement) {
		if why := registerWorker(st.Workers, a, workflow.Now(ctx)); why != "" {
			logger.Warn("registry: announcement ignored", "identity", a.Identity, "reason", why)
		}
	}
	received := 0
	for {
		expireWorkers(st.Workers, workflow.Now(ctx))
		if received >= limit || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// Announcements already delivered to this execution would be lost with it.
			for {
				var a api.WorkerAnnouncement
				if !announcements.ReceiveAsync(&a) {
					break
				}
				record(a)
			}
			return workflow.NewContinueAsNewError(ctx, api.WorkflowRegistry, st)
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(announcements, func(c workflow.ReceiveChannel, _ bool) {
			var a api.WorkerAnnouncement
			c.Receive(ctx, &a)
			record(a)
			received++
		})
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		if next, ok := nextExpiry(st.Workers); ok {
			sel.AddFuture(workflow.NewTimer(timerCtx, next.Sub(workflow.Now(ctx))), func(workflow.Future) {})
		}
		sel.Select(ctx)
		cancelTimer()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// registerWorker records a, seen at now; it returns why a was ignored, or "".
func registerWorker(workers map[string]api.RegisteredWorker, a api.WorkerAnnouncement, now time.Time) string {
	if strings.TrimSpace(a.Identity) == "" {
		return "no identity"
	}
	if _, known := workers[a.Identity]; !known && len(workers) >= registryMaxWorkers {
		return "too many workers"
	}
	a.Workflows = sortedUnique(a.Workflows)
	a.Agents = sortedUnique(a.Agents)
	workers[a.Identity] = api.RegisteredWorker{WorkerAnnouncement: a, SeenAt: now}
	return ""
}

// expireWorkers drops the workers not seen for api.RegistryExpiry.
func expireWorkers(workers map[string]api.RegisteredWorker, now time.Time) {
	for _, id := range sortedKeys(workers) {
		if !now.Before(workers[id].SeenAt.Add(api.RegistryExpiry)) {
			delete(workers, id)
		}
	}
}

// nextExpiry is when the first worker expires.
func nextExpiry(workers map[string]api.RegisteredWorker) (time.Time, bool) {
	var next time.Time
	for _, id := range sortedKeys(workers) {
		if at := workers[id].SeenAt.Add(api.RegistryExpiry); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

func registryView(workers map[string]api.RegisteredWorker) api.RegistryView {
	v := api.RegistryView{Workflows: []string{}, Agents: []string{}, Workers: []api.RegisteredWorker{}}
	for _, id := range sortedKeys(workers) {
		w := workers[id]
		v.Workflows = append(v.Workflows, w.Workflows...)
		v.Agents = append(v.Agents, w.Agents...)
		v.Workers = append(v.Workers, w)
	}
	v.Workflows = sortedUnique(v.Workflows)
	v.Agents = sortedUnique(v.Agents)
	return v
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// TypeRecorder is a Registry that remembers the workflow types registered through it, so
// a worker announces exactly what it registered (RegisterAll and a user's own workflows),
// not a list kept by hand that can drift.
type TypeRecorder struct {
	r     Registry
	names []string
}

// RecordTypes wraps r.
func RecordTypes(r Registry) *TypeRecorder { return &TypeRecorder{r: r} }

// RegisterWorkflowWithOptions registers w on the wrapped Registry and records its type.
func (t *TypeRecorder) RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions) {
	t.r.RegisterWorkflowWithOptions(w, options)
	name := options.Name
	if name == "" { // the SDK names it after the function, as here
		name = functionName(w)
	}
	t.names = append(t.names, name)
}

// Types are the workflow types runs can be started of: every one registered, sorted,
// except the registry itself.
func (t *TypeRecorder) Types() []string {
	out := sortedUnique(t.names)
	return slices.DeleteFunc(out, func(n string) bool { return n == api.WorkflowRegistry })
}

// functionName is the SDK's default type name of a workflow function: its name without
// the package path.
func functionName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func {
		return ""
	}
	name := goruntime.FuncForPC(v.Pointer()).Name()
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	return strings.TrimSuffix(name, "-fm")
}
