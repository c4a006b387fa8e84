package runs

import (
	"context"
	"errors"
	"strings"
	"testing"

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
