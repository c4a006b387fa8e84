package workflows

import (
	"encoding"
	"encoding/json"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

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
	return api.SortedUnique(fields), true
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
// except the platform's own, which are not runs (the registry, the token limiters, the notifiers).
func (t *TypeRecorder) Types() []string {
	out := api.SortedUnique(t.names)
	return slices.DeleteFunc(out, func(n string) bool {
		return n == api.WorkflowRegistry || n == api.WorkflowTokenLimiter || n == api.WorkflowNotifier
	})
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
