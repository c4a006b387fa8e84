// Package registry is the worker registry of a task queue: one long-lived workflow (not a
// Nexo run) that workers announce what they offer to, and clients ask before starting a run
// (api.QueryRegistry), so a workflow type or agent no worker has is refused up front.
//
// Its workflow type name is api.WorkflowRegistry, registered by workflows.RegisterAll.
package registry

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// State is what a task queue's registry holds, and carries across
// continue-as-new.
type State struct {
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

// ChangeLiveRegistry is the change id of the live rule (listed in workflows/versions.go
// as workflows.ChangeLiveRegistry; this package cannot import that one): version 1 keeps a
// worker for the TTL its announcement names (a minute by default, so a killed worker drops
// out within one), drops a worker that says goodbye (api.SignalDeregister) at once, and
// publishes the identities it holds in its memo (api.MemoRegistryLive) as they change.
// A registry recorded before (DefaultVersion) keeps every worker 25 hours; it continues
// as new at the first message of the live rule it receives, so it takes the rule at once.
const ChangeLiveRegistry = "registry-live"

// ChangeRegistryMemo is the change id of the announcements in the memo (listed in
// workflows/versions.go as workflows.ChangeRegistryMemo): version 1 of a registry on the
// live rule publishes, beside the identities, what each worker announced
// (api.MemoRegistryWorkers), in the same memo upsert, so a client checks a start with one
// DescribeWorkflowExecution instead of a query that needs a worker's task. A registry
// recorded before publishes the identities only until it continues as new.
const ChangeRegistryMemo = "registry-memo"

// Workflow is the registry of one task queue (workflow id api.RegistryID): workers
// announce what they offer with the api.SignalRegister signal (signal-with-start creates
// the registry on the first one), and api.QueryRegistry answers with the union, so a
// client refuses a workflow type no worker has instead of starting a run that never
// starts. It is not a Nexo run: no run record, no NexoStatus, no events.
//
// A signal rather than an update: a worker's announcement needs no answer and must reach
// the registry even while no worker is polling (a worker starting when the others are
// down announces before its own polling has begun). An entry not refreshed within the
// TTL its announcement names is dropped by a durable timer, so a worker that is gone
// stops counting even when no other announces; a worker that stops gracefully says so
// (api.SignalDeregister) and is dropped at once.
func Workflow(ctx workflow.Context, st State) error {
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
	live := workflow.GetVersion(ctx, ChangeLiveRegistry, workflow.DefaultVersion, 1) >= 1
	ttl := func(w api.RegisteredWorker) time.Duration {
		if !live {
			return api.RegistryExpiry
		}
		return w.TTL()
	}
	withAnnouncements := live && workflow.GetVersion(ctx, ChangeRegistryMemo, workflow.DefaultVersion, 1) >= 1
	logger := workflow.GetLogger(ctx)
	announcements := workflow.GetSignalChannel(ctx, api.SignalRegister)
	departures := workflow.GetSignalChannel(ctx, api.SignalDeregister)
	// migrate: a registry recorded before the live rule received a message of it (an
	// announcement with a TTL, a goodbye); it continues as new to take the rule.
	migrate := false
	record := func(a api.WorkerAnnouncement) {
		if why := registerWorker(st.Workers, a, workflow.Now(ctx)); why != "" {
			logger.Warn("registry: announcement ignored", "identity", a.Identity, "reason", why)
		}
		migrate = migrate || !live && a.TTLSeconds > 0
	}
	depart := func(d api.WorkerDeparture) {
		delete(st.Workers, d.Identity)
		migrate = migrate || !live
	}
	published, havePublished := "", false
	publish := func() {
		ids := slices.Sorted(maps.Keys(st.Workers))
		if ids == nil {
			ids = []string{}
		}
		key := strings.Join(ids, "\n")
		fields := map[string]any{api.MemoRegistryLive: ids}
		if withAnnouncements {
			list, raw := memoAnnouncements(st.Workers)
			fields[api.MemoRegistryWorkers] = list
			key += "\x00" + raw
		}
		if havePublished && key == published {
			return
		}
		if err := workflow.UpsertMemo(ctx, fields); err != nil {
			logger.Warn("registry: publish the live workers in the memo", "error", err)
			return
		}
		published, havePublished = key, true
	}
	received := 0
	for {
		expireWorkers(st.Workers, workflow.Now(ctx), ttl)
		if live {
			publish()
		}
		if migrate || received >= limit || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// Messages already delivered to this execution would be lost with it. A goodbye
			// is final (a worker that comes back has another identity), so it is applied
			// after the announcements.
			for {
				var a api.WorkerAnnouncement
				if !announcements.ReceiveAsync(&a) {
					break
				}
				record(a)
			}
			for {
				var d api.WorkerDeparture
				if !departures.ReceiveAsync(&d) {
					break
				}
				depart(d)
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
		sel.AddReceive(departures, func(c workflow.ReceiveChannel, _ bool) {
			var d api.WorkerDeparture
			c.Receive(ctx, &d)
			depart(d)
			received++
		})
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		if next, ok := nextExpiry(st.Workers, ttl); ok {
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
	a.Workflows = api.SortedUnique(a.Workflows)
	a.Agents = api.SortedUnique(a.Agents)
	for typ, fields := range a.Inputs {
		a.Inputs[typ] = api.SortedUnique(fields)
	}
	workers[a.Identity] = api.RegisteredWorker{WorkerAnnouncement: a, SeenAt: now}
	return ""
}

// expireWorkers drops the workers not seen for their ttl.
func expireWorkers(workers map[string]api.RegisteredWorker, now time.Time, ttl func(api.RegisteredWorker) time.Duration) {
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		if w := workers[id]; !now.Before(w.SeenAt.Add(ttl(w))) {
			delete(workers, id)
		}
	}
}

// nextExpiry is when the first worker expires.
func nextExpiry(workers map[string]api.RegisteredWorker, ttl func(api.RegisteredWorker) time.Duration) (time.Time, bool) {
	var next time.Time
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		w := workers[id]
		if at := w.SeenAt.Add(ttl(w)); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// memoAnnouncements is what MemoRegistryWorkers holds: each worker's announcement, sorted by
// identity, without its send time (which changes with every refresh while nothing it
// offers does), and the JSON of that; nil (null in the memo) when the JSON passes
// api.MaxRegistryMemo.
func memoAnnouncements(workers map[string]api.RegisteredWorker) ([]api.WorkerAnnouncement, string) {
	list := make([]api.WorkerAnnouncement, 0, len(workers))
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		a := workers[id].WorkerAnnouncement
		a.At = time.Time{}
		list = append(list, a)
	}
	raw, err := json.Marshal(list)
	if err != nil || len(raw) > api.MaxRegistryMemo {
		return nil, "null"
	}
	return list, string(raw)
}

func registryView(workers map[string]api.RegisteredWorker) api.RegistryView {
	list := make([]api.RegisteredWorker, 0, len(workers))
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		list = append(list, workers[id])
	}
	return api.NewRegistryView(list)
}
