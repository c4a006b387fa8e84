package runs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/api"
)

// execution is a visibility row of a closed workflow execution.
func execution(id, runID, workflow string, st enumspb.WorkflowExecutionStatus, start time.Time) *workflowpb.WorkflowExecutionInfo {
	return &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Type:      &commonpb.WorkflowType{Name: workflow},
		Status:    st, StartTime: timestamppb.New(start), CloseTime: timestamppb.New(start.Add(time.Second)),
	}
}

// TestListShowsEachRunOnce: a session whose first prompt's start failed and whose retry
// failed too has two executions under one id; `starter list` shows the id once, as
// `show` reads it (its latest execution), not two rows that look alike.
func TestListShowsEachRunOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	sid := api.SessionID("scribe", "u42")
	g := &gcClient{execs: []*workflowpb.WorkflowExecutionInfo{ // newest first, as visibility lists
		execution(sid, "run-2", api.WorkflowSession, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, t0.Add(2*time.Minute)),
		execution("r1", "run-r1", "DocumentApproval", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, t0.Add(time.Minute)),
		execution(sid, "run-1", api.WorkflowSession, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, t0),
	}}
	rows, _, err := New(g, "default", "nexo").List(context.Background(), ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	if got, want := strings.Join(ids, " "), sid+" r1"; got != want {
		t.Fatalf("listed %q, want %q (each run id once, newest first)", got, want)
	}
	if rows[0].Status != api.StatusFailed || !rows[0].CreatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("session row %+v, want the latest execution's (failed, started %s)", rows[0], t0.Add(2*time.Minute))
	}
}

// TestListSessionsRowsNameTheirWorkflow: GET /v1/sessions rows say "workflow": "Session"
// like every other run row, not "".
func TestListSessionsRowsNameTheirWorkflow(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	g := &gcClient{execs: []*workflowpb.WorkflowExecutionInfo{
		execution(api.SessionID("scribe", "u42"), "run-1", api.WorkflowSession, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, t0),
	}}
	rows, err := New(g, "default", "nexo").ListSessions(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want one", rows)
	}
	body, _ := json.Marshal(rows[0])
	if !strings.Contains(string(body), `"workflow":"Session"`) || rows[0].Agent != "scribe" || rows[0].Instance != "u42" {
		t.Errorf("row %s, want workflow Session, agent scribe, instance u42", body)
	}
}
