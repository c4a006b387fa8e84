package runs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/nexo-temporal/nexo/api"
)

// Notifications asks every running notifier of the task queue (the receivers' outboxes,
// package workflows/notifier) for its undelivered and failed notifications, sorted by
// receiver. A notifier that does not answer within QueryTimeout is listed with its Error,
// not dropped: an outbox nobody can read is itself worth a look.
func (c *Client) Notifications(ctx context.Context) ([]api.NotifierStatus, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND TaskQueue = '%s'",
		api.WorkflowNotifier, strings.ReplaceAll(c.taskQueue, "'", ""))
	var out []api.NotifierStatus
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.namespace, Query: q, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list the notifiers of task queue %s: %w", c.taskQueue, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			st := api.NotifierStatus{ID: id}
			qctx, cancel := context.WithTimeout(ctx, c.QueryTimeout)
			v, err := c.tc.QueryWorkflow(qctx, id, "", api.QueryNotifications)
			cancel()
			if err == nil {
				err = v.Get(&st)
			}
			st.ID = id
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				st.Error = fmt.Sprintf("query %s of %s: %v (is a worker polling task queue %q?)", api.QueryNotifications, id, err, c.taskQueue)
			}
			out = append(out, st)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Receiver != out[j].Receiver {
			return out[i].Receiver < out[j].Receiver
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
