package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/api"
)

// starterClient is a Temporal client holding one run, "d1" (DocumentApproval, suspended),
// whose ExecuteWorkflow behaves as the SDK's does on a taken id: an error only when the
// caller set WorkflowExecutionErrorWhenAlreadyStarted, else the existing run.
type starterClient struct {
	client.Client
	started []string
	// options are the options of each start.
	options []client.StartWorkflowOptions
	// registry is what the task queue's registry answers; nil: there is none.
	registry *api.RegistryView
	// registryQueries counts the queries to it.
	registryQueries int
	// polled is how long ago a worker last polled the task queue; 0: none polls.
	polled time.Duration
}

func (s *starterClient) DescribeTaskQueue(context.Context, string, enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	resp := &workflowservice.DescribeTaskQueueResponse{}
	if s.polled > 0 {
		resp.Pollers = []*taskqueuepb.PollerInfo{{LastAccessTime: timestamppb.New(time.Now().Add(-s.polled)), Identity: "worker@host"}}
	}
	return resp, nil
}

func (s *starterClient) QueryWorkflowWithOptions(ctx context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	if req.WorkflowID != api.RegistryID("nexo") || req.QueryType != api.QueryRegistry {
		return nil, serviceerror.NewNotFound("no such workflow")
	}
	s.registryQueries++
	if s.registry == nil {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	if s.registry.Workers == nil { // a registry that never answers in time
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(*s.registry)
	if err != nil {
		return nil, err
	}
	return &client.QueryWorkflowWithOptionsResponse{QueryResult: client.NewValue(p)}, nil
}

func (s *starterClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, workflow any, _ ...any) (client.WorkflowRun, error) {
	if o.ID == "d1" {
		if o.WorkflowExecutionErrorWhenAlreadyStarted {
			return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "run-1")
		}
		return nil, nil
	}
	s.started = append(s.started, o.ID)
	s.options = append(s.options, o)
	return nil, nil
}

func (s *starterClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id != "d1" {
		return nil, serviceerror.NewNotFound("no such workflow")
	}
	st, _ := converter.GetDefaultDataConverter().ToPayload(string(api.StatusSuspended))
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Type:             &commonpb.WorkflowType{Name: "DocumentApproval"},
		Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{api.SearchAttributeStatus: st}},
	}}, nil
}

func TestStartRefusesATakenID(t *testing.T) {
	tc := &starterClient{}
	_, err := New(tc, "default", "nexo").Start(context.Background(), StartRequest{Workflow: "BuildDashboard", ID: "d1"})
	var ex *ExistsError
	if !errors.As(err, &ex) {
		t.Fatalf("Start with a taken id: err = %v, want an ExistsError", err)
	}
	if want := "run d1 already exists (DocumentApproval, suspended)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to say %q", err, want)
	}
}

func TestStartValidatesTheID(t *testing.T) {
	for _, id := range []string{"a/b", ".", "..", "   ", strings.Repeat("x", 300), "session:agent:victim"} {
		t.Run(id, func(t *testing.T) {
			tc := &starterClient{}
			_, err := New(tc, "default", "nexo").Start(context.Background(), StartRequest{Workflow: "DocumentApproval", ID: id})
			var br *BadRequestError
			if !errors.As(err, &br) {
				t.Fatalf("Start(id %q): err = %v, want a BadRequestError", id, err)
			}
			if len(tc.started) != 0 {
				t.Errorf("Start(id %q) started %v", id, tc.started)
			}
		})
	}
	tc := &starterClient{}
	if _, err := New(tc, "default", "nexo").Start(context.Background(), StartRequest{Workflow: "DocumentApproval", ID: "report-7"}); err != nil || len(tc.started) != 1 {
		t.Errorf("Start(report-7) = %v, started %v", err, tc.started)
	}
}

func TestStartRefusesATypeNoWorkerOffers(t *testing.T) {
	offered := &api.RegistryView{Workflows: []string{"AgentRun", "BuildDashboard", "DocumentApproval", "Session"},
		Workers: []api.RegisteredWorker{liveWorker}}
	cases := []struct {
		name     string
		registry *api.RegistryView
		workflow string
		// want is the error's text ("" : the run starts).
		want string
	}{
		{"unknown type", offered, "NoSuchWorkflow",
			`no worker on task queue nexo offers workflow type "NoSuchWorkflow" (offered: AgentRun, BuildDashboard, DocumentApproval, Session)`},
		{"typo", offered, "DocumentAproval", `did you mean "DocumentApproval"?`},
		{"offered type", offered, "DocumentApproval", ""},
		{"no registry", nil, "NoSuchWorkflow", ""},
		{"registry that does not answer", &api.RegistryView{Workflows: []string{"DocumentApproval"}}, "NoSuchWorkflow", ""},
		{"registry with no live worker", &api.RegistryView{Workflows: []string{}, Workers: []api.RegisteredWorker{}}, "NoSuchWorkflow", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := &starterClient{registry: tc.registry}
			c := New(fake, "default", "nexo")
			c.RegistryTimeout = 50 * time.Millisecond
			_, err := c.Start(context.Background(), StartRequest{Workflow: tc.workflow})
			if tc.want == "" {
				if err != nil || len(fake.started) != 1 {
					t.Fatalf("Start(%s) = %v, started %v; want it started", tc.workflow, err, fake.started)
				}
				return
			}
			var ut *UnknownTypeError
			if !errors.As(err, &ut) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start(%s) = %v, want an UnknownTypeError saying %q", tc.workflow, err, tc.want)
			}
			if len(fake.started) != 0 {
				t.Errorf("Start(%s) started %v", tc.workflow, fake.started)
			}
		})
	}
}

// TestStartAsksAgainForATypeItHasNotSeen: a known type is taken from the last answer for a
// few seconds; a type missing from it is asked again, so a worker deployed since is not
// refused.
func TestStartAsksAgainForATypeItHasNotSeen(t *testing.T) {
	fake := &starterClient{registry: &api.RegistryView{Workflows: []string{"DocumentApproval"}, Workers: []api.RegisteredWorker{liveWorker}}}
	c := New(fake, "default", "nexo")
	for range 3 {
		if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval"}); err != nil {
			t.Fatal(err)
		}
	}
	if fake.registryQueries != 1 {
		t.Errorf("three starts of a known type asked the registry %d times, want once", fake.registryQueries)
	}
	fake.registry = &api.RegistryView{Workflows: []string{"DocumentApproval", "Invoice"}, Workers: []api.RegisteredWorker{liveWorker}}
	if _, err := c.Start(context.Background(), StartRequest{Workflow: "Invoice"}); err != nil {
		t.Fatalf("Start(Invoice) after a worker announced it: %v", err)
	}
}

// TestStartRefusesUnknownInputFields: a field the workflow's input does not take is
// refused with the one meant, before anything starts; inputs of types announced without
// fields (map inputs, older workers) start unchecked.
func TestStartRefusesUnknownInputFields(t *testing.T) {
	offered := &api.RegistryView{Workflows: []string{"DocumentApproval", "Loose", "Empty"},
		Inputs:  map[string][]string{"DocumentApproval": {"approved", "doc_id"}, "Empty": {}},
		Workers: []api.RegisteredWorker{liveWorker}}
	cases := []struct {
		name, workflow, input string
		// want is the error's text ("" : the run starts).
		want string
	}{
		{"typo", "DocumentApproval", `{"docid":"42"}`, `input of DocumentApproval: unknown field "docid" (did you mean "doc_id"?)`},
		{"two unknown", "DocumentApproval", `{"doc_id":"42","aproved":true,"zzz":1}`,
			`input of DocumentApproval: unknown field "aproved" (did you mean "approved"?); unknown field "zzz" (it takes approved, doc_id)`},
		{"no fields at all", "Empty", `{"x":1}`, `input of Empty: unknown field "x" (it takes no fields)`},
		{"not an object", "DocumentApproval", `["42"]`, `input of DocumentApproval must be a JSON object (its fields: approved, doc_id), not ["42"]`},
		{"known fields", "DocumentApproval", `{"doc_id":"42","approved":true}`, ""},
		{"case as encoding/json matches it", "DocumentApproval", `{"DOC_ID":"42"}`, ""},
		{"empty input", "DocumentApproval", ``, ""},
		{"null input", "DocumentApproval", `null`, ""},
		{"unchecked type", "Loose", `{"anything":1}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := &starterClient{registry: offered}
			_, err := New(fake, "default", "nexo").Start(context.Background(),
				StartRequest{Workflow: tc.workflow, Payload: json.RawMessage(tc.input)})
			if tc.want == "" {
				if err != nil || len(fake.started) != 1 {
					t.Fatalf("Start(%s, %s) = %v, started %v; want it started", tc.workflow, tc.input, err, fake.started)
				}
				return
			}
			var br *BadRequestError
			if !errors.As(err, &br) || err.Error() != tc.want {
				t.Fatalf("Start(%s, %s) = %v\nwant a BadRequestError %q", tc.workflow, tc.input, err, tc.want)
			}
			if len(fake.started) != 0 {
				t.Errorf("Start(%s, %s) started %v", tc.workflow, tc.input, fake.started)
			}
		})
	}
	var uf *UnknownFieldError
	_, err := New(&starterClient{registry: offered}, "default", "nexo").Start(context.Background(),
		StartRequest{Workflow: "DocumentApproval", Payload: json.RawMessage(`{"docid":"42"}`)})
	if !errors.As(err, &uf) || uf.Fields[0] != "docid" || uf.Suggestions[0] != "doc_id" {
		t.Errorf("Start error %v does not carry the UnknownFieldError", err)
	}
}

// TestStartAsksAgainForAFieldItHasNotSeen: a field the cached answer does not know is
// checked against a fresh one, so a worker deployed since with the field is not refused.
func TestStartAsksAgainForAFieldItHasNotSeen(t *testing.T) {
	fake := &starterClient{registry: &api.RegistryView{Workflows: []string{"DocumentApproval"},
		Inputs: map[string][]string{"DocumentApproval": {"doc_id"}}, Workers: []api.RegisteredWorker{liveWorker}}}
	c := New(fake, "default", "nexo")
	if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", Payload: json.RawMessage(`{"doc_id":"1"}`)}); err != nil {
		t.Fatal(err)
	}
	fake.registry = &api.RegistryView{Workflows: []string{"DocumentApproval"},
		Inputs: map[string][]string{"DocumentApproval": {"doc_id", "priority"}}, Workers: []api.RegisteredWorker{liveWorker}}
	if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", Payload: json.RawMessage(`{"doc_id":"1","priority":2}`)}); err != nil {
		t.Fatalf("Start with a field a new worker announced: %v", err)
	}
	if fake.registryQueries != 2 {
		t.Errorf("registry asked %d times, want 2 (once more for the new field)", fake.registryQueries)
	}
}

// TestStartLinksTheRunToItsPage: with a PageURL the run's static summary and details (what
// the Temporal Web UI shows, as Markdown) link to its Nexo page; without one, nothing.
func TestStartLinksTheRunToItsPage(t *testing.T) {
	fake := &starterClient{}
	c := New(fake, "default", "nexo")
	c.PageURL = "http://127.0.0.1:8234"
	if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", ID: "report-7"}); err != nil {
		t.Fatal(err)
	}
	o := fake.options[0]
	if want := "DocumentApproval run · [open in Nexo](http://127.0.0.1:8234/runs/report-7)"; o.StaticSummary != want {
		t.Errorf("StaticSummary = %q, want %q", o.StaticSummary, want)
	}
	if want := "[http://127.0.0.1:8234/runs/report-7](http://127.0.0.1:8234/runs/report-7)"; !strings.Contains(o.StaticDetails, want) {
		t.Errorf("StaticDetails = %q, want it to contain %q", o.StaticDetails, want)
	}
	c.PageURL = ""
	if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", ID: "report-8"}); err != nil {
		t.Fatal(err)
	}
	if o := fake.options[1]; o.StaticSummary != "" || o.StaticDetails != "" {
		t.Errorf("without a PageURL: summary %q, details %q; want none", o.StaticSummary, o.StaticDetails)
	}
}

// TestStartLinksToTheAnnouncedPage: with PageURLFromWorkers (the starter without
// gateway.url) a run links to the page a live worker announced it serves, the latest
// announcement when several did, whatever PageURL guessed; with no page announced, or
// without PageURLFromWorkers, PageURL.
func TestStartLinksToTheAnnouncedPage(t *testing.T) {
	worker := func(id, page string, seen time.Time) api.RegisteredWorker {
		w := liveWorker
		w.Identity, w.PageURL, w.SeenAt = id, page, seen
		return w
	}
	now := time.Now()
	tests := []struct {
		name      string
		workers   []api.RegisteredWorker
		fromWorks bool
		want      string
	}{
		{"one worker serves the page", []api.RegisteredWorker{worker("a", "http://127.0.0.1:21001", now)}, true,
			"http://127.0.0.1:21001/runs/r"},
		{"the latest announcement of two", []api.RegisteredWorker{
			worker("a", "http://127.0.0.1:21001", now.Add(-time.Minute)), worker("b", "", now),
			worker("c", "http://127.0.0.1:31001", now.Add(-time.Second))}, true,
			"http://127.0.0.1:31001/runs/r"},
		{"no worker serves a page", []api.RegisteredWorker{worker("a", "", now)}, true,
			"http://127.0.0.1:8234/runs/r"},
		{"gateway.url given: its own", []api.RegisteredWorker{worker("a", "http://127.0.0.1:21001", now)}, false,
			"http://127.0.0.1:8234/runs/r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &starterClient{registry: &api.RegistryView{Workflows: []string{"DocumentApproval"}, Workers: tt.workers}}
			c := New(fake, "default", "nexo")
			c.PageURL, c.PageURLFromWorkers = "http://127.0.0.1:8234", tt.fromWorks
			if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", ID: "r"}); err != nil {
				t.Fatal(err)
			}
			if want := "DocumentApproval run · [open in Nexo](" + tt.want + ")"; fake.options[0].StaticSummary != want {
				t.Errorf("StaticSummary = %q, want %q", fake.options[0].StaticSummary, want)
			}
			if !strings.Contains(fake.options[0].StaticDetails, "("+tt.want+")") {
				t.Errorf("StaticDetails = %q, want a link to %s", fake.options[0].StaticDetails, tt.want)
			}
		})
	}
}

// TestStartRefusesWhenTheCheckCannotBeMade: a registry that does not answer in time while
// workers poll the task queue is asked again with longer timeouts, then the start is
// refused with "could not check" and what to do, not let through unchecked (an unknown
// field was accepted under load). Unchecked (--no-check) starts it; with no worker polling
// there is nothing to check against and the run starts, waiting for one.
func TestStartRefusesWhenTheCheckCannotBeMade(t *testing.T) {
	slow := &api.RegistryView{Workflows: []string{"DocumentApproval"}} // Workers nil: never answers
	fake := &starterClient{registry: slow, polled: 5 * time.Second}
	c := New(fake, "default", "nexo")
	c.RegistryTimeout = 20 * time.Millisecond
	_, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", Payload: json.RawMessage(`{"docid":"x"}`)})
	var cu *CheckUnavailableError
	if !errors.As(err, &cu) || !strings.Contains(err.Error(), `could not check workflow type "DocumentApproval"`) ||
		!strings.Contains(err.Error(), "--no-check") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start with a registry that does not answer = %v, want a CheckUnavailableError naming --no-check", err)
	}
	if len(fake.started) != 0 || fake.registryQueries != registryTries {
		t.Errorf("started %v after %d registry queries, want nothing started after %d", fake.started, fake.registryQueries, registryTries)
	}
	if cu.Waited < 140*time.Millisecond { // 20 + 40 + 80 ms
		t.Errorf("gave up after %s, want the three tries' 140ms at least", cu.Waited)
	}

	if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", Unchecked: true}); err != nil || len(fake.started) != 1 {
		t.Fatalf("Start Unchecked = %v (started %v), want it started", err, fake.started)
	}

	for name, polled := range map[string]time.Duration{"no worker polls": 0, "the last poll is old": 10 * time.Minute} {
		fake := &starterClient{registry: slow, polled: polled}
		c := New(fake, "default", "nexo")
		c.RegistryTimeout = 5 * time.Millisecond
		if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval"}); err != nil || len(fake.started) != 1 {
			t.Errorf("%s: Start = %v (started %v), want it started to wait for a worker", name, err, fake.started)
		}
	}
}

// liveWorker is a registry entry of the live rule (an announcement with a TTL).
var liveWorker = api.RegisteredWorker{WorkerAnnouncement: api.WorkerAnnouncement{Identity: "worker@host", TTLSeconds: 60}}

// TestLiveWorkersDropsGoneWorkersOlderThanTheRule: an entry without a TTL (a worker older
// than the live rule, kept a day) counts only while its identity polls the task queue;
// what it alone offered leaves the union with it. Entries of the live rule are kept.
func TestLiveWorkersDropsGoneWorkersOlderThanTheRule(t *testing.T) {
	w := func(id string, ttl int, workflows ...string) api.RegisteredWorker {
		return api.RegisteredWorker{WorkerAnnouncement: api.WorkerAnnouncement{Identity: id, Workflows: workflows, Agents: []string{id + "-agent"}, TTLSeconds: ttl}}
	}
	view := api.NewRegistryView([]api.RegisteredWorker{w("gone", 0, "RefundRequest"), w("worker@host", 0, "DocumentApproval"), w("live", 60, "AgentRun")})
	fake := &starterClient{polled: 10 * time.Second} // worker@host polls
	got := LiveWorkers(context.Background(), fake, "nexo", view)
	var ids []string
	for _, x := range got.Workers {
		ids = append(ids, x.Identity)
	}
	if want := []string{"worker@host", "live"}; !slices.Equal(ids, want) {
		t.Errorf("workers %v, want %v", ids, want)
	}
	if want := []string{"AgentRun", "DocumentApproval"}; !slices.Equal(got.Workflows, want) {
		t.Errorf("workflows %v, want %v (RefundRequest only the gone worker offered)", got.Workflows, want)
	}
	if want := []string{"live-agent", "worker@host-agent"}; !slices.Equal(got.Agents, want) {
		t.Errorf("agents %v, want %v", got.Agents, want)
	}
}

// memoClient is a starterClient whose registry does not answer in time (no worker runs its
// query) and whose description carries the memo of registered identities (nil: no memo).
type memoClient struct {
	starterClient
	live []string
	// workers is the memo of announcements (api.MemoRegistryWorkers): absent when unset,
	// null when workersNull.
	workers     []api.WorkerAnnouncement
	workersNull bool
	describes   int
}

func (m *memoClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id != api.RegistryID("nexo") {
		return nil, serviceerror.NewNotFound("no such workflow")
	}
	m.describes++
	info := &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{}}}
	if m.live != nil {
		p, _ := converter.GetDefaultDataConverter().ToPayload(m.live)
		info.Memo.Fields[api.MemoRegistryLive] = p
	}
	if m.workers != nil || m.workersNull {
		p, _ := converter.GetDefaultDataConverter().ToPayload(m.workers)
		info.Memo.Fields[api.MemoRegistryWorkers] = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

// TestStartCheckCountsOnlyRegisteredPollers: when the registry cannot answer, a worker
// that polled 10 s ago counts as polling (the start is refused as unchecked) only while
// the registry's memo still lists it; one that said goodbye does not, and the start goes
// ahead to wait for a worker. A registry without the memo keeps the poller rule alone.
func TestStartCheckCountsOnlyRegisteredPollers(t *testing.T) {
	for _, tt := range []struct {
		name    string
		live    []string
		refused bool
	}{
		{"killed worker still registered", []string{"worker@host"}, true},
		{"worker said goodbye", []string{}, false},
		{"registry older than the memo", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := &memoClient{starterClient: starterClient{registry: &api.RegistryView{}, polled: 10 * time.Second}, live: tt.live}
			c := New(fake, "default", "nexo")
			c.RegistryTimeout = 10 * time.Millisecond
			_, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval", ID: "r1"})
			var cu *CheckUnavailableError
			if got := errors.As(err, &cu); got != tt.refused {
				t.Errorf("Start: err = %v, refused %v, want refused %v", err, got, tt.refused)
			}
			if !tt.refused && (err != nil || len(fake.started) != 1) {
				t.Errorf("Start: err = %v, started %v, want the run started", err, fake.started)
			}
		})
	}
}

// TestStartCheckReadsTheRegistryMemo: a registry whose memo holds the workers'
// announcements answers the check with no query (its query would never answer here, as
// under load or with no worker to run it): a type no worker offers and an unknown input
// field are refused, a known one starts. When a listed worker does not poll (just started,
// or killed), the memo is null (too big) or absent (an older registry), the check asks the
// query as before.
func TestStartCheckReadsTheRegistryMemo(t *testing.T) {
	offer := []api.WorkerAnnouncement{{Identity: "worker@host", Workflows: []string{"DocumentApproval"},
		Inputs: map[string][]string{"DocumentApproval": {"doc_id"}}, TTLSeconds: 60}}
	for _, tt := range []struct {
		name      string
		workers   []api.WorkerAnnouncement
		null      bool
		polled    time.Duration
		workflow  string
		input     string
		want      string // in the error; "" the run starts
		wantQuery bool
	}{
		{"unknown type, from the memo", offer, false, time.Second, "DocumentAproval", `{}`, `did you mean "DocumentApproval"`, false},
		{"unknown field, from the memo", offer, false, time.Second, "DocumentApproval", `{"docid":"1"}`, `unknown field "docid"`, false},
		{"known type and field", offer, false, time.Second, "DocumentApproval", `{"doc_id":"1"}`, "", false},
		{"a listed worker does not poll", offer, false, 0, "DocumentAproval", `{}`, "", true},
		{"memo too big (null)", nil, true, time.Second, "DocumentAproval", `{}`, "could not check", true},
		{"older registry (no memo)", nil, false, time.Second, "DocumentAproval", `{}`, "could not check", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := &memoClient{starterClient: starterClient{registry: &api.RegistryView{}, polled: tt.polled},
				live: []string{"worker@host"}, workers: tt.workers, workersNull: tt.null}
			c := New(fake, "default", "nexo")
			c.RegistryTimeout = 10 * time.Millisecond
			_, err := c.Start(context.Background(), StartRequest{Workflow: tt.workflow, ID: "r1", Payload: json.RawMessage(tt.input)})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Start: %v, want the run started", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Start: err = %v, want one saying %q", err, tt.want)
			}
			if asked := fake.registryQueries > 0; asked != tt.wantQuery {
				t.Errorf("registry queries %d, want asked %v", fake.registryQueries, tt.wantQuery)
			}
		})
	}
}
