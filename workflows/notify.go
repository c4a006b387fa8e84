package workflows

import (
	"encoding/json"
	"maps"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// NotifyRetryFor is how long one notification is retried (5xx, 408, 429, a receiver that
// cannot be reached) before it is given up.
const NotifyRetryFor = api.NotifyRetryFor

// notifyOptions: a receiver may be down for hours; the notification is retried with
// backoff within NotifyRetryFor. Other 4xx answers are non-retryable at the source.
func notifyOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: NotifyRetryFor,
		StartToCloseTimeout:    time.Minute,
		HeartbeatTimeout:       ActivityHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Minute,
			// The budget ends the retries; this count is only a bound it reaches first
			// (explicit: Temporal's testsuite caps "unlimited" at 10 attempts).
			MaximumAttempts:        int32(NotifyRetryFor / time.Second),
			NonRetryableErrorTypes: []string{api.ErrTypeBadInput},
		},
	}
}

// notifier is what a run knows of the receivers of its approval notifications: the
// recorded spec of the agent whose loop runs, and what each pending call's request said,
// so an escalation or a decision carries the call's capability, detail and arguments.
type notifier struct {
	agent   string
	targets []api.NotifyTarget
	asked   map[string]map[string]any // call id → approval_requested data, as the gate gave it
	// pending are the notifications started and not yet finished, which the run's close
	// gives a moment to finish (awaitNotifications).
	pending []workflow.Future
	// tickets and serving order the hand-overs to the outbox (enqueueNotifications): the
	// calls of one model reply may be gated concurrently (tool_concurrency), and a
	// receiver's notifier must get a run's notifications in seq order.
	tickets, serving int
}

// use makes spec's receivers the run's (the agent loop calls it before its first turn).
func (n *notifier) use(spec agents.Spec) {
	n.agent, n.targets = spec.Name, spec.Notify
}

// emitApproval records the approval event eventType (api.EventApprovalRequested,
// EventApprovalEscalated or EventApprovalDecided) of tool call callID with data, then
// notifies the receivers of it. The notification is scheduled here, by the gate that knows
// the event is an approval's, with the data it already has: not by emit, which would have
// to look at every event's type and read back the JSON it just wrote.
func (rt *runtime) emitApproval(ctx workflow.Context, eventType, callID string, data map[string]any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	ev := rt.appendEvent(ctx, eventType, raw)
	rt.notifyApproval(ctx, ev, callID, data)
}

// notifyApproval notifies the receivers of the approval event ev (of call callID, with
// data as given to emitApproval). Runs recorded since ChangeNotifyOutbox hand it to each
// receiver's outbox (enqueueNotifications). Runs recorded before keep their path to their
// end: one NotifyApproval activity per receiver, not waited for, on a disconnected context
// so canceling the run does not cancel a notification under way; one still pending when
// the run closes is given NotifyCloseGrace (awaitNotifications), then abandoned.
func (rt *runtime) notifyApproval(ctx workflow.Context, ev api.Event, callID string, data map[string]any) {
	n := &rt.notify
	if len(n.targets) == 0 {
		return
	}
	if workflow.GetVersion(ctx, ChangeApprovalNotify, workflow.DefaultVersion, 1) < 1 {
		return
	}
	call := ev.Data // sanitised as the event's
	if ev.Type == api.EventApprovalRequested {
		if n.asked == nil {
			n.asked = map[string]map[string]any{}
		}
		n.asked[callID] = data
	} else if asked, ok := n.asked[callID]; ok {
		// An escalation or a decision carries what the request said of the call.
		merged := maps.Clone(data)
		for _, k := range []string{"tool", "capability", "detail", "args"} {
			if _, set := merged[k]; !set {
				if v, ok := asked[k]; ok {
					merged[k] = v
				}
			}
		}
		if ev.Type == api.EventApprovalDecided {
			delete(n.asked, callID)
		}
		if raw, err := json.Marshal(merged); err == nil {
			call = SanitizeJSON(raw)
		}
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if workflow.GetVersion(ctx, ChangeNotifyOutbox, workflow.DefaultVersion, 1) >= 1 {
		rt.enqueueNotifications(dctx, ev, call)
		return
	}
	dctx = workflow.WithActivityOptions(dctx, notifyOptions())
	for _, t := range n.targets {
		n.pending = append(n.pending, workflow.ExecuteActivity(dctx, api.ActivityNotifyApproval, api.NotifyApprovalRequest{
			RunID: rt.rec.ID, Workflow: rt.rec.Workflow, Agent: n.agent, Target: t,
			Event: ev.Type, Seq: ev.Seq, At: ev.At, Call: call,
		}))
	}
}

// enqueueOptions: handing a notification over is a blob write and a signal-with-start,
// milliseconds; its retries cover a store or frontend that blinks. The budget is short
// because the run waits for it, and what it bounds is only the hand-over: the delivery
// has its own NotifyRetryFor in the notifier.
func enqueueOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 2 * time.Minute,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        15 * time.Second,
			NonRetryableErrorTypes: []string{api.ErrTypeBadInput},
		},
	}
}

// enqueueNotifications hands the notification of event ev (whose call is call) to the
// notifier of each receiver (package workflows/notifier), one receiver after the other
// and waiting for each, and one event after the other in seq order (the notifier drops a
// seq it has seen a later one of), so a receiver's notifier gets a run's notifications in
// seq order.
// The hand-over is a local activity: its input (the whole notification) stays out of the
// run's history, which records one marker per receiver; the notifier holds a reference to
// the stored notification. Nothing of the delivery is the run's any more: the run closes
// or continues as new at once, and the notification keeps its whole retry window.
//
// A hand-over that fails (the blob store or Temporal's frontend down for minutes) is
// logged and the run goes on: a notification never fails its run.
func (rt *runtime) enqueueNotifications(ctx workflow.Context, ev api.Event, call json.RawMessage) {
	n := &rt.notify
	// The event was appended with its seq just now, with no yield since: taking a ticket
	// here puts the hand-overs in seq order, whatever goroutine each runs in.
	ticket := n.tickets
	n.tickets++
	_ = workflow.Await(ctx, func() bool { return n.serving == ticket }) // ctx is disconnected: it is not canceled
	defer func() { n.serving++ }()
	lctx := workflow.WithLocalActivityOptions(ctx, enqueueOptions())
	tq := workflow.GetInfo(ctx).TaskQueueName
	for _, t := range n.targets {
		err := workflow.ExecuteLocalActivity(lctx, api.ActivityEnqueueNotification, api.EnqueueNotificationRequest{
			TaskQueue: tq,
			Request: api.NotifyApprovalRequest{RunID: rt.rec.ID, Workflow: rt.rec.Workflow, Agent: n.agent, Target: t,
				Event: ev.Type, Seq: ev.Seq, At: ev.At, Call: call},
		}).Get(lctx, nil)
		if err != nil {
			workflow.GetLogger(ctx).Warn("approval notification not handed to its receiver's outbox", "receiver", t.Name(),
				"event", ev.Type, "seq", ev.Seq, "error", err)
		}
	}
}

// NotifyCloseGrace bounds how long a closing run waits for its pending notifications; one
// still retrying then (a receiver that is down) is abandoned, as before.
const NotifyCloseGrace = 30 * time.Second

// awaitNotifications lets the notifications still under way finish, for at most
// NotifyCloseGrace, before the run closes.
func (rt *runtime) awaitNotifications(ctx workflow.Context) {
	n := &rt.notify
	var open []workflow.Future
	for _, f := range n.pending {
		if !f.IsReady() {
			open = append(open, f)
		}
	}
	n.pending = open
	if len(open) == 0 || workflow.GetVersion(ctx, ChangeNotifyBeforeClose, workflow.DefaultVersion, 1) < 1 {
		return
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timedOut := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, NotifyCloseGrace), func(workflow.Future) { timedOut = true })
	for _, f := range open {
		sel.AddFuture(f, func(workflow.Future) {})
	}
	for left := len(open); left > 0 && !timedOut; left-- {
		sel.Select(ctx)
	}
	n.pending = nil
}
