package runs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nexo-temporal/nexo/api"
)

// starterClient is a Temporal client holding one run, "d1" (DocumentApproval, suspended),
// whose ExecuteWorkflow behaves as the SDK's does on a taken id: an error only when the
// caller set WorkflowExecutionErrorWhenAlreadyStarted, else the existing run.
type starterClient struct {
	client.Client
	started []string
	// registry is what the task queue's registry answers; nil: there is none.
	registry *api.RegistryView
	// registryQueries counts the queries to it.
	registryQueries int
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
		Workers: []api.RegisteredWorker{{}}}
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
	fake := &starterClient{registry: &api.RegistryView{Workflows: []string{"DocumentApproval"}, Workers: []api.RegisteredWorker{{}}}}
	c := New(fake, "default", "nexo")
	for range 3 {
		if _, err := c.Start(context.Background(), StartRequest{Workflow: "DocumentApproval"}); err != nil {
			t.Fatal(err)
		}
	}
	if fake.registryQueries != 1 {
		t.Errorf("three starts of a known type asked the registry %d times, want once", fake.registryQueries)
	}
	fake.registry = &api.RegistryView{Workflows: []string{"DocumentApproval", "Invoice"}, Workers: []api.RegisteredWorker{{}}}
	if _, err := c.Start(context.Background(), StartRequest{Workflow: "Invoice"}); err != nil {
		t.Fatalf("Start(Invoice) after a worker announced it: %v", err)
	}
}
