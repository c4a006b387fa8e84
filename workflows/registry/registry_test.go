package registry

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: api.WorkflowRegistry})
	return env
}

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
	t.Parallel()
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
	env.ExecuteWorkflow(api.WorkflowRegistry, State{})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want the cancellation", err)
	}
}

// TestRegistryContinuesAsNewWithItsEntries: after its limit of announcements the registry
// continues as new, carrying the workers it knows (and its limit).
func TestRegistryContinuesAsNewWithItsEntries(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	announce(env, time.Minute, "a", []string{"DocumentApproval"}, nil)
	announce(env, 2*time.Minute, "b", []string{"AgentRun"}, []string{"scribe"})
	env.ExecuteWorkflow(api.WorkflowRegistry, State{ContinueAfter: 2})
	var cae *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cae) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	if cae.WorkflowType.Name != api.WorkflowRegistry {
		t.Errorf("continued as %s, want %s", cae.WorkflowType.Name, api.WorkflowRegistry)
	}
	var st State
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

// TestRegistryMergesInputs: the registry checks a type's input only when every worker
// offering it announced its fields, with the union of them (a rolling deploy).
func TestRegistryMergesInputs(t *testing.T) {
	t.Parallel()
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
	env.ExecuteWorkflow(api.WorkflowRegistry, State{})
}

// TestRegistryLiveRule: a worker that announces a TTL is kept that long after each
// announcement: one that keeps announcing stays, one killed after its last announcement
// is dropped a TTL later (by the registry's timer, nothing else happening), one that says
// goodbye is dropped at once, and what it offered no longer counts.
func TestRegistryLiveRule(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	signal := func(at time.Duration, name string, v any) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, v) }, at)
	}
	live := func(id string, workflows, agents []string) api.WorkerAnnouncement {
		return api.WorkerAnnouncement{Identity: id, Workflows: workflows, Agents: agents, TTLSeconds: 60}
	}
	for at := time.Minute; at <= 10*time.Minute; at += 20 * time.Second {
		signal(at, api.SignalRegister, live("steady", []string{"AgentRun"}, []string{"keeper"}))
	}
	for _, at := range []time.Duration{time.Minute, 80 * time.Second, 100 * time.Second} {
		signal(at, api.SignalRegister, live("killed", []string{"AgentRun", "RefundRequest"}, []string{"scribe"}))
	}
	signal(140*time.Second, api.SignalRegister, live("stopped", []string{"AgentRun", "Invoice"}, []string{"clerk"}))
	signal(3*time.Minute, api.SignalDeregister, api.WorkerDeparture{Identity: "stopped"})
	checks := []struct {
		at                 time.Duration
		workers, workflows []string
		agents             []string
	}{
		{110 * time.Second, []string{"killed", "steady"}, []string{"AgentRun", "RefundRequest"}, []string{"keeper", "scribe"}},
		// killed announced last at 1m40s: kept until 2m40s.
		{150 * time.Second, []string{"killed", "steady", "stopped"}, []string{"AgentRun", "Invoice", "RefundRequest"}, []string{"clerk", "keeper", "scribe"}},
		{161 * time.Second, []string{"steady", "stopped"}, []string{"AgentRun", "Invoice"}, []string{"clerk", "keeper"}},
		// stopped said goodbye at 3m, 20 s before its TTL ran out.
		{3*time.Minute + time.Second, []string{"steady"}, []string{"AgentRun"}, []string{"keeper"}},
		{10 * time.Minute, []string{"steady"}, []string{"AgentRun"}, []string{"keeper"}},
		// steady announced last at 10m: gone at 11m.
		{11*time.Minute + time.Second, []string{}, []string{}, []string{}},
	}
	for _, c := range checks {
		env.RegisterDelayedCallback(func() {
			v := queryRegistry(t, env)
			if got := identities(v); !reflect.DeepEqual(got, c.workers) {
				t.Errorf("at %v: workers = %v, want %v", c.at, got, c.workers)
			}
			if !reflect.DeepEqual(v.Workflows, c.workflows) || !reflect.DeepEqual(v.Agents, c.agents) {
				t.Errorf("at %v: workflows %v agents %v, want %v and %v", c.at, v.Workflows, v.Agents, c.workflows, c.agents)
			}
		}, c.at)
	}
	env.RegisterDelayedCallback(env.CancelWorkflow, 12*time.Minute)
	env.ExecuteWorkflow(api.WorkflowRegistry, State{})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want the cancellation", err)
	}
}

// TestRegistryRecordedBeforeTheLiveRuleMigrates: a registry that started before the live
// rule (GetVersion answers DefaultVersion) keeps its 25-hour expiry for the announcements
// it knew, and continues as new at the first announcement with a TTL (or goodbye), so the
// new run takes the rule; what it held is carried, the goodbye applied.
func TestRegistryRecordedBeforeTheLiveRuleMigrates(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		signal  string
		payload any
		want    []string
	}{
		{"announcement with a TTL", api.SignalRegister, api.WorkerAnnouncement{Identity: "new", Workflows: []string{"AgentRun"}, TTLSeconds: 60}, []string{"new", "old"}},
		{"goodbye", api.SignalDeregister, api.WorkerDeparture{Identity: "old"}, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t)
			env.OnGetVersion(ChangeLiveRegistry, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			announce(env, time.Minute, "old", []string{"DocumentApproval"}, nil)
			env.RegisterDelayedCallback(func() {
				if got := identities(queryRegistry(t, env)); !reflect.DeepEqual(got, []string{"old"}) {
					t.Errorf("before the live rule's first message: workers %v, want [old]", got)
				}
				env.SignalWorkflow(tt.signal, tt.payload)
			}, 2*time.Hour) // an hour past the live rule's TTL: the old rule keeps it
			env.ExecuteWorkflow(api.WorkflowRegistry, State{})
			var cae *workflow.ContinueAsNewError
			if err := env.GetWorkflowError(); !errors.As(err, &cae) {
				t.Fatalf("workflow error = %v, want continue-as-new", err)
			}
			var st State
			if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &st); err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for id := range st.Workers {
				got = append(got, id)
			}
			slices.Sort(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("carried workers %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRegistryPublishesAnnouncementsInItsMemo: on "registry-memo" the registry keeps what
// each worker announced in its memo beside the identities, without the send time, in one
// upsert per change: a refresh that changes nothing writes nothing, a departure and a new
// agent do; announcements past api.MaxRegistryMemo publish null (clients ask the query).
func TestRegistryPublishesAnnouncementsInItsMemo(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	var upserts []map[string]any
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(map[string]any))
	}).Return(nil)
	signal := func(at time.Duration, name string, v any) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, v) }, at)
	}
	a := func(id string, agents []string, at time.Duration) api.WorkerAnnouncement {
		return api.WorkerAnnouncement{Identity: id, Workflows: []string{"AgentRun"}, Agents: agents,
			Pools: map[string]string{"scribe": "gpu"}, TTLSeconds: 3600, At: time.Unix(0, 0).Add(at)}
	}
	signal(time.Minute, api.SignalRegister, a("w1", []string{"scribe"}, time.Minute))
	signal(2*time.Minute, api.SignalRegister, a("w2", []string{"keeper"}, 2*time.Minute))
	signal(3*time.Minute, api.SignalRegister, a("w1", []string{"scribe"}, 3*time.Minute)) // a refresh
	signal(4*time.Minute, api.SignalDeregister, api.WorkerDeparture{Identity: "w2"})
	signal(5*time.Minute, api.SignalRegister, a("w1", []string{"clerk", "scribe"}, 5*time.Minute))
	huge := a("w3", nil, 6*time.Minute)
	for i := range 3000 {
		huge.Agents = append(huge.Agents, fmt.Sprintf("agent-%04d-with-a-long-name", i))
	}
	signal(6*time.Minute, api.SignalRegister, huge)
	env.RegisterDelayedCallback(env.CancelWorkflow, 7*time.Minute)
	env.ExecuteWorkflow(api.WorkflowRegistry, State{})

	type published struct {
		ids    []string
		agents [][]string // per announcement; nil list: null
	}
	var got []published
	for _, u := range upserts {
		p := published{ids: u[api.MemoRegistryLive].([]string)}
		list, _ := u[api.MemoRegistryWorkers].([]api.WorkerAnnouncement)
		if list != nil {
			p.agents = [][]string{}
		}
		for _, w := range list {
			if !w.At.IsZero() {
				t.Errorf("announcement of %s in the memo keeps its send time %v", w.Identity, w.At)
			}
			if w.Pools["scribe"] != "gpu" || w.TTLSeconds != 3600 {
				t.Errorf("announcement of %s in the memo = %+v, want its pools and TTL", w.Identity, w)
			}
			p.agents = append(p.agents, w.Agents)
		}
		got = append(got, p)
	}
	want := []published{
		{ids: []string{}, agents: [][]string{}},
		{ids: []string{"w1"}, agents: [][]string{{"scribe"}}},
		{ids: []string{"w1", "w2"}, agents: [][]string{{"scribe"}, {"keeper"}}},
		// the refresh at 3m: nothing
		{ids: []string{"w1"}, agents: [][]string{{"scribe"}}},
		{ids: []string{"w1"}, agents: [][]string{{"clerk", "scribe"}}},
		{ids: []string{"w1", "w3"}, agents: nil}, // past MaxRegistryMemo
	}
	if len(got) != len(want) {
		t.Fatalf("%d upserts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].ids, want[i].ids) || len(got[i].agents) != len(want[i].agents) || (got[i].agents == nil) != (want[i].agents == nil) {
			t.Errorf("upsert %d = %+v, want %+v", i, got[i], want[i])
			continue
		}
		for j := range want[i].agents {
			if !slices.Equal(got[i].agents[j], want[i].agents[j]) {
				t.Errorf("upsert %d announcement %d agents %v, want %v", i, j, got[i].agents[j], want[i].agents[j])
			}
		}
	}
}

// TestRegistryBeforeTheMemoPublishesIdentitiesOnly: a registry recorded before
// "registry-memo" keeps publishing the identities alone.
func TestRegistryBeforeTheMemoPublishesIdentitiesOnly(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnGetVersion(ChangeRegistryMemo, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	var upserts []map[string]any
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(map[string]any))
	}).Return(nil)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalRegister, api.WorkerAnnouncement{Identity: "w1", Workflows: []string{"AgentRun"}, TTLSeconds: 3600})
	}, time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Minute)
	env.ExecuteWorkflow(api.WorkflowRegistry, State{})
	if len(upserts) != 2 {
		t.Fatalf("upserts %v, want two", upserts)
	}
	for _, u := range upserts {
		if _, ok := u[api.MemoRegistryWorkers]; ok || len(u) != 1 {
			t.Errorf("upsert %v, want the identities only", u)
		}
	}
}

// TestRegistryKeepsTheAnnouncedPage: the page a worker announces it serves is in the
// registry's answer (so a starter links runs there), and goes when the worker does.
func TestRegistryKeepsTheAnnouncedPage(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalRegister, api.WorkerAnnouncement{Identity: "dev", Workflows: []string{"AgentRun"},
			TTLSeconds: 60, PageURL: "http://127.0.0.1:21001"})
		env.SignalWorkflow(api.SignalRegister, api.WorkerAnnouncement{Identity: "plain", Workflows: []string{"AgentRun"}, TTLSeconds: 600})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		if got := queryRegistry(t, env).PageURL(); got != "http://127.0.0.1:21001" {
			t.Errorf("PageURL() with the dev worker registered = %q, want http://127.0.0.1:21001", got)
		}
	}, 90*time.Second)
	env.RegisterDelayedCallback(func() {
		if got := queryRegistry(t, env).PageURL(); got != "" {
			t.Errorf("PageURL() after the dev worker's TTL = %q, want none", got)
		}
	}, 3*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 4*time.Minute)
	env.ExecuteWorkflow(api.WorkflowRegistry, State{})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want the cancellation", err)
	}
}
