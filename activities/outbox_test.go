package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// outboxFake is the NotifyOutbox a test watches: every hand-over, with its notifier's id.
type outboxFake struct {
	ids   []string
	items []api.NotifyItem
	err   error
}

func (o *outboxFake) Enqueue(_ context.Context, taskQueue string, target api.NotifyTarget, item api.NotifyItem) error {
	o.ids = append(o.ids, api.NotifierID(taskQueue, target))
	o.items = append(o.items, item)
	return o.err
}

// TestOutboxStoresTheNotificationAndDeliversIt: a run's hand-over stores the notification
// in the blob store and gives the receiver's notifier only its reference and what names
// it; the notifier's delivery reads it back and POSTs it, signed, as NotifyApproval does.
// A reference that is not in the store is a final failure naming it.
func TestOutboxStoresTheNotificationAndDeliversIt(t *testing.T) {
	t.Parallel()
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ob := &outboxFake{}
	a := activities.New(activities.Deps{Store: store, Outbox: ob, LookupEnv: func(k string) (string, bool) {
		return "s3cret", k == "HOOK_SECRET"
	}})
	srv, got := receiver(t, http.StatusNoContent)
	target := api.NotifyTarget{URL: srv.URL + "/hook", SecretEnv: "HOOK_SECRET", AllowPrivate: true}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	req := api.NotifyApprovalRequest{RunID: "0193-run", Workflow: api.WorkflowAgentRun, Agent: "coder", Target: target,
		Event: api.EventApprovalRequested, Seq: 4, At: at,
		Call: json.RawMessage(`{"call_id":"1.1","tool":"shell","capability":"shell","detail":"make deploy","args":{"command":"make deploy"}}`)}
	if err := a.Notifier.EnqueueNotification(context.Background(), api.EnqueueNotificationRequest{TaskQueue: "nexo", Request: req}); err != nil {
		t.Fatal(err)
	}
	if len(ob.items) != 1 || ob.ids[0] != api.NotifierID("nexo", target) {
		t.Fatalf("hand-overs %v to %v, want one to the receiver's notifier", ob.items, ob.ids)
	}
	it := ob.items[0]
	if it.RunID != "0193-run" || it.Seq != 4 || it.Event != api.EventApprovalRequested || it.CallID != "1.1" || !it.At.Equal(at) ||
		it.Status != api.NotifyPending || !artifacts.ValidSum(it.Ref) {
		t.Errorf("item %+v, want run 0193-run seq 4 call 1.1, pending, with a blob reference", it)
	}
	if b, _ := json.Marshal(it); strings.Contains(string(b), "make deploy") {
		t.Errorf("the item carries the call's arguments (%s); want only the reference", b)
	}
	if strings.Contains(api.NotifierID("nexo", target), srv.URL) {
		t.Errorf("notifier id %s names the receiver's URL, which may be a credential", api.NotifierID("nexo", target))
	}

	if err := a.Notifier.DeliverNotification(context.Background(), api.DeliverNotificationRequest{Target: target, Ref: it.Ref}); err != nil {
		t.Fatal(err)
	}
	r := <-got
	var n api.Notification
	if err := json.Unmarshal(r.body, &n); err != nil {
		t.Fatal(err)
	}
	if n.RunID != "0193-run" || n.Seq != 4 || n.CallID != "1.1" || n.Detail != "make deploy" || r.header.Get(api.SignatureHeader) != activities.Signature("s3cret", r.body) {
		t.Errorf("delivered %+v signed %q, want the stored notification, signed", n, r.header.Get(api.SignatureHeader))
	}

	missing := strings.Repeat("ab", 32)
	err = a.Notifier.DeliverNotification(context.Background(), api.DeliverNotificationRequest{Target: target, Ref: missing})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), missing) {
		t.Errorf("delivering a missing notification: %v, want a final failure naming %s", err, missing)
	}
}

// TestOutboxWithoutAnOutboxSaysSo: a worker given no outbox (a Deps without one) refuses a
// hand-over at once, naming why, instead of retrying it.
func TestOutboxWithoutAnOutboxSaysSo(t *testing.T) {
	t.Parallel()
	a := activities.New(activities.Deps{})
	err := a.Notifier.EnqueueNotification(context.Background(), api.EnqueueNotificationRequest{TaskQueue: "nexo",
		Request: api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested, Target: api.NotifyTarget{URL: "https://h.example/x"}}})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "no notification outbox") {
		t.Errorf("err = %v, want a final failure saying the worker has no outbox", err)
	}
}
