package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
)

// Origin is what a run was started as: its id, workflow type and input (its current
// execution's, after a continue-as-new).
type Origin struct {
	ID       string
	Workflow string
	Input    json.RawMessage
	// InputErr says why Input is nil though the run has one: it is stored by reference and
	// could not be read back (Get and show name the problem).
	InputErr error
}

// Origin reads run id's start from the first event of its history, without asking a
// worker, so it answers for a run no worker serves now. The gateway judges by it which
// runs a limited token may see. An unknown id is a NotFoundError, as for Get.
func (c *Client) Origin(ctx context.Context, id string) (Origin, error) {
	if id == "" {
		return Origin{}, &BadRequestError{Msg: "run id is empty"}
	}
	resp, err := c.tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: c.namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: id}, MaximumPageSize: 1,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return Origin{}, &NotFoundError{ID: id}
	}
	if err != nil {
		return Origin{}, fmt.Errorf("read the start of run %s: %w", id, err)
	}
	events := resp.GetHistory().GetEvents()
	if len(events) == 0 || events[0].GetWorkflowExecutionStartedEventAttributes() == nil {
		return Origin{}, fmt.Errorf("read the start of run %s: its history does not begin with its start", id)
	}
	a := events[0].GetWorkflowExecutionStartedEventAttributes()
	o := Origin{ID: id, Workflow: a.GetWorkflowType().GetName()}
	if o.Input, err = c.firstPayload(ctx, a.GetInput()); err != nil {
		o.InputErr = fmt.Errorf("read the input of run %s: %w", id, err)
	}
	return o, nil
}
