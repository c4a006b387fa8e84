package workflows

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// NotifyRetryFor is how long one notification is retried (5xx, 408, 429, a receiver that
// cannot be reached) before it is given up.
const NotifyRetryFor = 6 * time.Hour

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
	asked   map[string]map[string]any // call id → approval_requested data
	// pending are the notifications started and not yet finished, which the run's close
	// gives a moment to finish (awaitNotifications).
	pending []workflow.Future
}

// use makes spec's receivers the run's (the agent loop calls it before its first turn).
func (n *notifier) use(spec agents.Spec) {
	n.agent, n.targets = spec.Name, spec.Notify
}

// notifyApproval starts one NotifyApproval activity per receiver for the approval event
// just appended, and does not wait for it: a slow or broken receiver never holds the run.
// The activity runs on a disconnected context, so canceling the run does not cancel a
// notification already under way; one still pending when the run closes or continues as
// new is abandoned by Temporal (its later attempts are not started).
func (rt *runtime) notifyApproval(ctx workflow.Context, eventType string) {
	n := &rt.notify
	if len(n.targets) == 0 {
		return
	}
	switch eventType {
	case api.EventApprovalRequested, api.EventApprovalEscalated, api.EventApprovalDecided:
	default:
		return
	}
	if workflow.GetVersion(ctx, ChangeApprovalNotify, workflow.DefaultVersion, 1) < 1 {
		return
	}
	ev := rt.rec.Events[len(rt.rec.Events)-1]
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil || data == nil {
		data = map[string]any{}
	}
	callID, _ := data["call_id"].(string)
	if eventType == api.EventApprovalRequested {
		if n.asked == nil {
			n.asked = map[string]map[string]any{}
		}
		n.asked[callID] = data
	} else if asked, ok := n.asked[callID]; ok {
		for _, k := range []string{"tool", "capability", "detail", "args"} {
			if _, set := data[k]; !set {
				if v, ok := asked[k]; ok {
					data[k] = v
				}
			}
		}
		if eventType == api.EventApprovalDecided {
			delete(n.asked, callID)
		}
	}
	call, _ := json.Marshal(data)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	dctx = workflow.WithActivityOptions(dctx, notifyOptions())
	for _, t := range n.targets {
		n.pending = append(n.pending, workflow.ExecuteActivity(dctx, api.ActivityNotifyApproval, api.NotifyApprovalRequest{
			RunID: rt.rec.ID, Workflow: rt.rec.Workflow, Agent: n.agent, Target: t,
			Event: eventType, Seq: ev.Seq, At: ev.At, Call: call,
		}))
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
