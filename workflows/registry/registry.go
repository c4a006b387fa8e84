// Package registry is the worker registry of a task queue: one long-lived workflow (not a
// Nexo run) that workers announce what they offer to, and clients ask before starting a run
// (api.QueryRegistry), so a workflow type or agent no worker has is refused up front.
//
// Its workflow type name is api.WorkflowRegistry, registered by workflows.RegisterAll.
package registry

import (
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

// Workflow is the registry of one task queue (workflow id api.RegistryID): workers
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
	for typ, fields := range a.Inputs {
		a.Inputs[typ] = sortedUnique(fields)
	}
	workers[a.Identity] = api.RegisteredWorker{WorkerAnnouncement: a, SeenAt: now}
	return ""
}

// expireWorkers drops the workers not seen for api.RegistryExpiry.
func expireWorkers(workers map[string]api.RegisteredWorker, now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		if !now.Before(workers[id].SeenAt.Add(api.RegistryExpiry)) {
			delete(workers, id)
		}
	}
}

// nextExpiry is when the first worker expires.
func nextExpiry(workers map[string]api.RegisteredWorker) (time.Time, bool) {
	var next time.Time
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		if at := workers[id].SeenAt.Add(api.RegistryExpiry); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

func registryView(workers map[string]api.RegisteredWorker) api.RegistryView {
	v := api.RegistryView{Workflows: []string{}, Agents: []string{}, Workers: []api.RegisteredWorker{}}
	for _, id := range slices.Sorted(maps.Keys(workers)) {
		w := workers[id]
		v.Workflows = append(v.Workflows, w.Workflows...)
		v.Agents = append(v.Agents, w.Agents...)
		v.Workers = append(v.Workers, w)
	}
	v.Workflows = sortedUnique(v.Workflows)
	v.Agents = sortedUnique(v.Agents)
	v.Inputs = registryInputs(v.Workers)
	return v
}

// registryInputs merges the workers' input fields: a type is checked only when every
// worker offering it announced its fields (one offering it unchecked, an older worker or
// a map input, could run any input), with the union of their fields.
func registryInputs(workers []api.RegisteredWorker) map[string][]string {
	out := map[string][]string{}
	unchecked := map[string]bool{}
	for _, w := range workers {
		for _, typ := range w.Workflows {
			fields, ok := w.Inputs[typ]
			if !ok {
				unchecked[typ] = true
				continue
			}
			out[typ] = append(out[typ], fields...)
		}
	}
	for typ := range out {
		if unchecked[typ] {
			delete(out, typ)
			continue
		}
		out[typ] = sortedUnique(out[typ])
	}
	if len(out) == 0 {
		return nil
	}
	return out
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
