package runs

import (
	"context"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/artifacts"
)

// gcClient shows executions, each with a one-event history whose input names one blob.
type gcClient struct {
	client.Client
	execs   []*workflowpb.WorkflowExecutionInfo
	history map[string]string // workflow id → the blob its history names
}

func (g *gcClient) ListWorkflow(_ context.Context, _ *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: g.execs}, nil
}

func (g *gcClient) GetWorkflowHistory(_ context.Context, id, _ string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	ev := &historypb.HistoryEvent{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`{"thread":"` + g.history[id] + `"}`)}}},
		}}}
	return &oneEvent{ev: ev}
}

func (g *gcClient) WorkflowService() workflowservice.WorkflowServiceClient { return nsService{} }

type nsService struct {
	workflowservice.WorkflowServiceClient
}

func (nsService) DescribeNamespace(context.Context, *workflowservice.DescribeNamespaceRequest, ...grpc.CallOption) (*workflowservice.DescribeNamespaceResponse, error) {
	return &workflowservice.DescribeNamespaceResponse{Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(72 * time.Hour)}}, nil
}

type oneEvent struct{ ev *historypb.HistoryEvent }

func (o *oneEvent) HasNext() bool { return o.ev != nil }
func (o *oneEvent) Next() (*historypb.HistoryEvent, error) {
	ev := o.ev
	o.ev = nil
	return ev, nil
}

func TestMarkStoreLeavesOutRunsClosedBeforeTheRetention(t *testing.T) {
	now := time.Now()
	exec := func(id string, closedAgo time.Duration) *workflowpb.WorkflowExecutionInfo {
		e := &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: id + "-run"},
			Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
		if closedAgo > 0 {
			e.Status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
			e.CloseTime = timestamppb.New(now.Add(-closedAgo))
		}
		return e
	}
	sums := map[string]string{"open": artifacts.Sum([]byte("open")), "recent": artifacts.Sum([]byte("recent")), "old": artifacts.Sum([]byte("old"))}
	tc := &gcClient{execs: []*workflowpb.WorkflowExecutionInfo{exec("open", 0), exec("recent", time.Hour), exec("old", 50*time.Hour)}, history: sums}
	c := New(tc, "default", "nexo")

	for _, tt := range []struct {
		retention time.Duration
		kept      []string
		gone      []string
	}{
		{0, []string{"open", "recent", "old"}, nil},
		{48 * time.Hour, []string{"open", "recent"}, []string{"old"}},
	} {
		marks := artifacts.NewMarks()
		st, err := c.MarkStore(context.Background(), marks, tt.retention, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range tt.kept {
			if !marks.Has(sums[id]) || !marks.KeepsRun(id) {
				t.Errorf("retention %s: run %s (blob %s) not marked", tt.retention, id, sums[id])
			}
		}
		for _, id := range tt.gone {
			if marks.Has(sums[id]) || marks.KeepsRun(id) {
				t.Errorf("retention %s: run %s closed 50h ago is marked", tt.retention, id)
			}
		}
		if st.Open != 1 || st.Closed != len(tt.kept)-1 || st.Expired != len(tt.gone) || st.NamespaceRetention != 72*time.Hour {
			t.Errorf("retention %s: stats %+v", tt.retention, st)
		}
	}
}
