package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// NotifyOutbox hands a notification to the notifier workflow of its receiver
// (api.NotifierID of taskQueue and target), starting the notifier if none runs: the
// worker's is a signal-with-start through its Temporal client (platform). It must be safe
// to call again with the same item: the notifier drops a repeated (run, seq).
type NotifyOutbox interface {
	Enqueue(ctx context.Context, taskQueue string, target api.NotifyTarget, item api.NotifyItem) error
}

// EnqueueNotification stores req's notification in the blob store and hands its reference
// to the receiver's notifier (the run's local activity, api.ActivityEnqueueNotification).
// The notifier's history and state hold the reference and what names the notification
// (run, event, seq, call), never its body.
func (a *Notifier) EnqueueNotification(ctx context.Context, req api.EnqueueNotificationRequest) error {
	r := req.Request
	if a.outbox == nil || a.store == nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"notify %s of %s in run %s: this worker has no notification outbox (a worker built without platform.New)",
			r.Target.Name(), r.Event, r.RunID), api.ErrTypeBadInput, nil)
	}
	if req.TaskQueue == "" {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify %s of %s in run %s: task_queue is empty",
			r.Target.Name(), r.Event, r.RunID), api.ErrTypeBadInput, nil)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify %s: encode the notification: %v", r.Target.Name(), err), api.ErrTypeBadInput, nil)
	}
	sum, err := a.store.PutBlob(ctx, body)
	if err != nil {
		return fmt.Errorf("notify %s of %s in run %s: store the notification: %w", r.Target.Name(), r.Event, r.RunID, err)
	}
	var call struct {
		CallID string `json:"call_id"`
	}
	_ = json.Unmarshal(r.Call, &call)
	item := api.NotifyItem{RunID: r.RunID, Workflow: r.Workflow, Agent: r.Agent, Event: r.Event, Seq: r.Seq, CallID: call.CallID,
		At: r.At, Ref: sum, Status: api.NotifyPending}
	if err := a.outbox.Enqueue(ctx, req.TaskQueue, r.Target, item); err != nil {
		return fmt.Errorf("notify %s of %s in run %s: hand it to %s: %w", r.Target.Name(), r.Event, r.RunID, api.NotifierID(req.TaskQueue, r.Target), err)
	}
	return nil
}

// DeliverNotification makes one attempt to POST the notification stored as req.Ref to
// req.Target (the notifier's activity, api.ActivityDeliverNotification), as NotifyApproval
// does: retryable failures are the notifier's to retry, the others are final.
func (a *Notifier) DeliverNotification(ctx context.Context, req api.DeliverNotificationRequest) error {
	if a.store == nil {
		return temporal.NewNonRetryableApplicationError("deliver a notification: this worker has no blob store", api.ErrTypeBadInput, nil)
	}
	if !artifacts.ValidSum(req.Ref) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("deliver a notification to %s: ref %q is not a sha256", req.Target.Name(), req.Ref), api.ErrTypeBadInput, nil)
	}
	body, err := a.store.GetBlob(ctx, req.Ref)
	switch {
	case errors.Is(err, artifacts.ErrNotFound), errors.Is(err, artifacts.ErrChecksum):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("deliver the notification %s to %s: %v", req.Ref, req.Target.Name(), err), api.ErrTypeBadInput, nil)
	case err != nil:
		return fmt.Errorf("deliver the notification %s to %s: read it: %w", req.Ref, req.Target.Name(), err)
	}
	var r api.NotifyApprovalRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("deliver the notification %s to %s: it does not decode: %v", req.Ref, req.Target.Name(), err), api.ErrTypeBadInput, nil)
	}
	r.Target = req.Target
	return a.NotifyApproval(ctx, r)
}
