package workflows

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// docInput is an input with tags, as a user's workflow has.
type docInput struct {
	DocID    string `json:"doc_id"`
	Approved bool   `json:"approved"`
}

// TestTypeRecorderRecordsWhatIsRegistered: the types a worker announces are the ones it
// registered, not a list kept apart; the registry itself is not a type runs can have.
func TestTypeRecorderRecordsWhatIsRegistered(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
		"AgentRun": {"agent", "fork", "max_turns", "parent", "prompt"},
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

// TestTypeRecorderLeavesOutTheTokenLimiter: the token limiter is registered on every
// worker but is not a type runs can be started of.
func TestTypeRecorderLeavesOutTheTokenLimiter(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	rec := RecordTypes(s.NewTestWorkflowEnvironment())
	RegisterAll(rec)
	for _, typ := range rec.Types() {
		if typ == api.WorkflowTokenLimiter || typ == api.WorkflowRegistry || typ == api.WorkflowNotifier {
			t.Errorf("Types() = %v lists %s", rec.Types(), typ)
		}
	}
}
