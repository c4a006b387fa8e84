package workflows

import (
	"encoding"
	"encoding/json"
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
	for typ, fields := range a.Inputs {
		a.Inputs[typ] = sortedUnique(fields)
	}
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

// TypeRecorder is a Registry that remembers the workflow types registered through it, so
// a worker announces exactly what it registered (RegisterAll and a user's own workflows),
// not a list kept by hand that can drift.
type TypeRecorder struct {
	r      Registry
	names  []string
	inputs map[string][]string
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

// RecordInput records the input type of the workflow type name (Register calls it for
// every workflow it registers), for Inputs.
func (t *TypeRecorder) RecordInput(name string, in reflect.Type) {
	fields, ok := InputFields(in)
	if !ok {
		return
	}
	if t.inputs == nil {
		t.inputs = map[string][]string{}
	}
	t.inputs[name] = fields
}

// Inputs are the JSON field names of the input of each registered workflow type whose
// input is a struct (api.WorkerAnnouncement.Inputs); nil when there is none.
func (t *TypeRecorder) Inputs() map[string][]string {
	if len(t.inputs) == 0 {
		return nil
	}
	out := make(map[string][]string, len(t.inputs))
	for name, fields := range t.inputs {
		out[name] = slices.Clone(fields)
	}
	return out
}

// inputRecorder is what Register tells a Registry that records input types
// (TypeRecorder), so the type survives the wrapping into a RunFunc.
type inputRecorder interface {
	RecordInput(name string, in reflect.Type)
}

// recordInput tells r, when it records input types, that name's input is In.
func recordInput[In any](r Registry, name string) {
	if ir, ok := r.(inputRecorder); ok {
		ir.RecordInput(name, reflect.TypeFor[In]())
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// InputFields returns the JSON field names encoding/json decodes into a value of type t
// (a struct or a pointer to one), sorted: exported fields by their json tag name or Go
// name, the fields of embedded structs promoted, "-" left out. ok is false when t is not
// a struct or decodes itself (json.Unmarshaler, encoding.TextUnmarshaler): any field may
// then be meant, and an input of it cannot be checked.
func InputFields(t reflect.Type) (fields []string, ok bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || decodesItself(t) {
		return nil, false
	}
	fields = []string{}
	structFields(t, map[reflect.Type]bool{}, &fields)
	return sortedUnique(fields), true
}

func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// structFields appends the JSON names of t's fields, as encoding/json's typeFields finds
// them (visited guards against embedding cycles through pointers).
func structFields(t reflect.Type, visited map[reflect.Type]bool, out *[]string) {
	if visited[t] {
		return
	}
	visited[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			// Promoted, even from an unexported embedded type, as encoding/json does.
			structFields(ft, visited, out)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		*out = append(*out, name)
	}
}

// Types are the workflow types runs can be started of: every one registered, sorted,
// except the platform's own, which are not runs (the registry, the token limiters).
func (t *TypeRecorder) Types() []string {
	out := sortedUnique(t.names)
	return slices.DeleteFunc(out, func(n string) bool { return n == api.WorkflowRegistry || n == api.WorkflowTokenLimiter })
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
