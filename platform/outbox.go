package platform

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
)

// notifyOutbox is the worker's activities.NotifyOutbox: each receiver's notifier is a
// workflow on the run's task queue (every worker registers it, workflows.RegisterAll),
// started by the first notification handed to it. Signal-with-start, not a child workflow
// of the run: one notifier serves every run of the receiver, it is created or reached in
// one atomic call whatever runs race to it, and it belongs to no run, so no run's close,
// continue-as-new or cancellation reaches it.
type notifyOutbox struct {
	tc client.Client
}

var _ activities.NotifyOutbox = notifyOutbox{}

func (o notifyOutbox) Enqueue(ctx context.Context, taskQueue string, target api.NotifyTarget, item api.NotifyItem) error {
	id := api.NotifierID(taskQueue, target)
	_, err := o.tc.SignalWithStartWorkflow(ctx, id, api.SignalNotify, item,
		client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, api.WorkflowNotifier, api.NotifierInput{Target: target})
	if err != nil {
		return fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	return nil
}
