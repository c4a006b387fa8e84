package runs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nexo-temporal/nexo/api"
)

// memoryClient answers the nexo.run query with rec (as a worker replaying the run would,
// whatever its close status) and describes the run with status; it records signals.
type memoryClient struct {
	client.Client
	rec     api.Record
	status  enumspb.WorkflowExecutionStatus
	signals []string
}

type recordValue struct{ rec api.Record }

func (v recordValue) HasValue() bool { return true }
func (v recordValue) Get(ptr any) error {
	b, err := json.Marshal(v.rec)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func (m *memoryClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return recordValue{m.rec}, nil
}

func (m *memoryClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: m.status}}, nil
}

func (m *memoryClient) SignalWorkflow(_ context.Context, _, _, name string, _ any) error {
	m.signals = append(m.signals, name)
	return nil
}

func suspendedRecord(t *testing.T, key string, v any) api.Record {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return api.Record{ID: "r1", Workflow: "X", Status: api.StatusSuspended, State: map[string]json.RawMessage{key: raw}}
}

// TestDecideReportsTheRealStatus: deciding a run that was terminated while it waited is
// refused with its real status, not the "suspended" its replayed memory answers with.
func TestDecideReportsTheRealStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  api.Record
		d    Decision
	}{
		{"another call", suspendedRecord(t, api.StateApproval, api.ApprovalInfo{CallID: "1.1", Tool: "shell"}), Decision{Approved: true, CallID: "9.9"}},
		{"a call on a workflow pause", suspendedRecord(t, api.StateSuspend, api.SuspendInfo{Reason: "awaiting approval"}), Decision{Approved: true, CallID: "1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memoryClient{rec: tc.rec, status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}
			_, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", tc.d)
			var se *StateError
			if !errors.As(err, &se) || se.Status != api.StatusInterrupted {
				t.Fatalf("Decide on a terminated run: %v, want a StateError with status interrupted", err)
			}
			if len(m.signals) != 0 {
				t.Errorf("signalled %v", m.signals)
			}
		})
	}
	t.Run("resume", func(t *testing.T) {
		m := &memoryClient{rec: suspendedRecord(t, api.StateApproval, api.ApprovalInfo{CallID: "1.1", Tool: "shell"}),
			status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}
		err := New(m, "default", "nexo").Resume(context.Background(), "r1", ResumeRequest{})
		var se *StateError
		if !errors.As(err, &se) || se.Status != api.StatusInterrupted {
			t.Fatalf("Resume on a terminated run: %v, want a StateError with status interrupted", err)
		}
	})
}

// TestApproveAlwaysOnAWorkflowPause: --always means nothing to a workflow's own pause, so
// it is refused rather than dropped.
func TestApproveAlwaysOnAWorkflowPause(t *testing.T) {
	m := &memoryClient{rec: suspendedRecord(t, api.StateSuspend, api.SuspendInfo{Reason: "awaiting approval"}),
		status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	_, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", Decision{Approved: true, Always: true})
	var br *BadRequestError
	if !errors.As(err, &br) || !strings.Contains(err.Error(), "applies to tool calls only") {
		t.Fatalf("approve --always on a workflow pause: %v, want a refusal naming tool calls", err)
	}
	if len(m.signals) != 0 {
		t.Errorf("signalled %v", m.signals)
	}
	if _, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", Decision{Approved: true}); err != nil || len(m.signals) != 1 {
		t.Errorf("approve without --always: %v, signals %v", err, m.signals)
	}
}
