package workflows

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

func announce(env *testsuite.TestWorkflowEnvironment, at time.Duration, identity string, workflows, agents []string) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalRegister, api.WorkerAnnouncement{Identity: identity, Workflows: workflows, Agents: agents})
	}, at)
}

func queryRegistry(t *testing.T, env *testsuite.TestWorkflowEnvironment) api.RegistryView {
	t.Helper()
	v, err := env.QueryWorkflow(api.QueryRegistry)
	if err != nil {
		t.Fatalf("query %s: %v", api.QueryRegistry, err)
	}
	var view api.RegistryView
	if err := v.Get(&view); err != nil {
		t.Fatal(err)
	}
	return view
}

func identities(v api.RegistryView) []string {
	out := []string{}
	for _, w := range v.Workers {
		out = append(out, w.Identity)
	}
	return out
}

// TestRegistryUnionAndExpiry: two workers announce, the registry answers the union; a
// worker that stops announcing is dropped 25 hours after its last announcement (by the
// registry's own timer, with no other announcement to trigger it), one that refreshes
// stays.
func TestRegistryUnionAndExpiry(t *testing.T) {
	env := newEnv(t)
	announce(env, time.Minute, "a", []string{"DocumentApproval", "BuildDashboard"}, []string{"scribe"})
	announce(env, 2*time.Minute, "b", []string{"AgentRun", "DocumentApproval", "AgentRun"}, []string{"scribe", "researcher"})
	announce(env, 24*time.Hour, "b", []string{"AgentRun", "DocumentApproval"}, []string{"researcher"})
	announce(env, 3*time.Minute, "", []string{"Intruder"}, nil) // no identity: ignored
	type check struct {
		at                         time.Duration
		workers, workflows, agents []string
	}
	checks := []check{
		{4 * time.Minute, []string{"a", "b"}, []string{"AgentRun", "BuildDashboard", "DocumentApproval"}, []string{"researcher", "scribe"}},
		{25*time.Hour + 30*time.Second, []string{"a", "b"}, []string{"AgentRun", "BuildDashboard", "DocumentApproval"}, []string{"researcher", "scribe"}},
		{25*time.Hour + 2*time.Minute, []string{"b"}, []string{"AgentRun", "DocumentApproval"}, []string{"researcher"}},
		{49*time.Hour + time.Minute, []string{}, []string{}, []string{}},
	}
	for _, c := range checks {
		env.RegisterDelayedCallback(func() {
			v := queryRegistry(t, env)
			if got := identities(v); !reflect.DeepEqual(got, c.workers) {
				t.Errorf("at %v: workers = %v, want %v", c.at, got, c.workers)
			}
			if !reflect.DeepEqual(v.Workflows, c.workflows) {
				t.Errorf("at %v: workflows = %v, want %v", c.at, v.Workflows, c.workflows)
			}
			if !reflect.DeepEqual(v.Agents, c.agents) {
				t.Errorf("at %v: agents = %v, want %v", c.at, v.Agents, c.agents)
			}
		}, c.at)
	}
	env.RegisterDelayedCallback(env.CancelWorkflow, 50*time.Hour)
	env.ExecuteWorkflow(api.WorkflowRegistry, RegistryState{})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want the cancellation", err)
	}
}

// TestRegistryContinuesAsNewWithItsEntries: after its limit of announcements the registry
// continues as new, carrying the workers it knows (and its limit).
func TestRegistryContinuesAsNewWithItsEntries(t *testing.T) {
	env := newEnv(t)
	announce(env, time.Minute, "a", []string{"DocumentApproval"}, nil)
	announce(env, 2*time.Minute, "b", []string{"AgentRun"}, []string{"scribe"})
	env.ExecuteWorkflow(api.WorkflowRegistry, RegistryState{ContinueAfter: 2})
	var cae *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cae) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	if cae.WorkflowType.Name != api.WorkflowRegistry {
		t.Errorf("continued as %s, want %s", cae.WorkflowType.Name, api.WorkflowRegistry)
	}
	var st RegistryState
	if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &st); err != nil {
		t.Fatal(err)
	}
	if st.ContinueAfter != 2 || len(st.Workers) != 2 {
		t.Fatalf("carried state = %+v, want workers a and b and continue_after 2", st)
	}
	if b := st.Workers["b"]; !reflect.DeepEqual(b.Workflows, []string{"AgentRun"}) || !reflect.DeepEqual(b.Agents, []string{"scribe"}) || b.SeenAt.IsZero() {
		t.Errorf("carried worker b = %+v", b)
	}
}

// docInput is an input with tags, as a user's workflow has.
type docInput struct {
	DocID    string `json:"doc_id"`
	Approved bool   `json:"approved"`
}

// TestTypeRecorderRecordsWhatIsRegistered: the types a worker announces are the ones it
// registered, not a list kept apart; the registry itself is not a type runs can have.
func TestTypeRecorderRecordsWhatIsRegistered(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	rec := RecordTypes(env)
	RegisterAll(rec)
	rec.RegisterWorkflowWithOptions(customFlow, workflow.RegisterOptions{}) // named by the SDK after the function
	want := []string{"AgentRun", "Session", "customFlow"}
	if got := rec.Types(); !reflect.DeepEqual(got, want) {
		t.Errorf("Types() = %v, want %v", got, want)
	}
	env.ExecuteWorkflow("customFlow")
	if err := env.GetWorkflowError(); err != nil {
		t.Errorf("customFlow under the SDK's own name: %v", err)
	}
}

func customFlow(workflow.Context) error { return nil }

type inputBase struct {
	Tenant string `json:"tenant"`
}

type inputDecodesItself struct{ raw string }

func (d *inputDecodesItself) UnmarshalJSON(b []byte) error { d.raw = string(b); return nil }

// TestInputFields: the field names are the ones encoding/json decodes, so the starter
// refuses exactly the fields a run would silently drop.
func TestInputFields(t *testing.T) {
	type embeddedPtr struct {
		*inputBase
		Note string
	}
	type full struct {
		inputBase                   // promoted, although unexported
		DocID     string            `json:"doc_id"`
		Approved  bool              `json:"approved,omitempty"`
		Plain     int               // no tag: the Go name
		Skipped   string            `json:"-"`
		Dash      string            `json:"-,"` // the name "-"
		Named     inputBase         `json:"named"`
		hidden    string            //nolint:unused // unexported: never decoded
		Extra     map[string]string `json:",omitempty"`
	}
	_ = full{}.hidden
	tests := []struct {
		name string
		typ  reflect.Type
		want []string
		ok   bool
	}{
		{"struct with tags, embedding and skips", reflect.TypeFor[full](), []string{"-", "Extra", "Plain", "approved", "doc_id", "named", "tenant"}, true},
		{"pointer to struct", reflect.TypeFor[*docInput](), []string{"approved", "doc_id"}, true},
		{"embedded pointer", reflect.TypeFor[embeddedPtr](), []string{"Note", "tenant"}, true},
		{"empty struct: every field is unknown", reflect.TypeFor[struct{}](), []string{}, true},
		{"map: unchecked", reflect.TypeFor[map[string]any](), nil, false},
		{"any: unchecked", reflect.TypeFor[any](), nil, false},
		{"raw JSON: unchecked", reflect.TypeFor[json.RawMessage](), nil, false},
		{"decodes itself: unchecked", reflect.TypeFor[inputDecodesItself](), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := InputFields(tt.typ)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("InputFields(%v) = %q, %v; want %q, %v", tt.typ, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestTypeRecorderRecordsInputs: Register tells the recorder each workflow's input type,
// for the shipped workflows and a user's own alike; a map input is left unchecked.
func TestTypeRecorderRecordsInputs(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	rec := RecordTypes(env)
	RegisterAll(rec)
	type invoiceInput struct {
		InvoiceID string  `json:"invoice_id"`
		Amount    float64 `json:"amount"`
	}
	Register(rec, "Invoice", func(workflow.Context, invoiceInput) (string, error) { return "", nil }, Options{})
	Register(rec, "Loose", func(workflow.Context, map[string]any) (string, error) { return "", nil }, Options{})
	got := rec.Inputs()
	want := map[string][]string{
		"AgentRun": {"agent", "fork", "max_turns", "prompt"},
		"Invoice":  {"amount", "invoice_id"},
	}
	for typ, fields := range want {
		if !reflect.DeepEqual(got[typ], fields) {
			t.Errorf("Inputs()[%s] = %q, want %q", typ, got[typ], fields)
		}
	}
	if _, ok := got["Loose"]; ok {
		t.Errorf("Inputs() checks Loose, whose input is a map: %q", got["Loose"])
	}
	if _, ok := got["Session"]; !ok {
		t.Errorf("Inputs() has no Session fields: %v", got)
	}
}

// TestRegistryMergesInputs: the registry checks a type's input only when every worker
// offering it announced its fields, with the union of them (a rolling deploy).
func TestRegistryMergesInputs(t *testing.T) {
	env := newEnv(t)
	signal := func(at time.Duration, a api.WorkerAnnouncement) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.SignalRegister, a) }, at)
	}
	signal(time.Minute, api.WorkerAnnouncement{Identity: "old", Workflows: []string{"DocumentApproval", "Invoice"},
		Inputs: map[string][]string{"DocumentApproval": {"doc_id"}}})
	signal(2*time.Minute, api.WorkerAnnouncement{Identity: "new", Workflows: []string{"DocumentApproval", "Invoice"},
		Inputs: map[string][]string{"DocumentApproval": {"doc_id", "approved"}, "Invoice": {"invoice_id"}}})
	env.RegisterDelayedCallback(func() {
		v := queryRegistry(t, env)
		want := map[string][]string{"DocumentApproval": {"approved", "doc_id"}}
		if !reflect.DeepEqual(v.Inputs, want) {
			t.Errorf("view inputs = %v, want %v (Invoice unchecked: worker old offers it without fields)", v.Inputs, want)
		}
	}, 3*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 4*time.Minute)
	env.ExecuteWorkflow(api.WorkflowRegistry, RegistryState{})
}
