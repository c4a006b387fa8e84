package workflows

import (
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// WorkerDefaults are what a worker decides for the runs it executes, outside their
// histories: values that are not part of replay matching, so workers of one task queue may
// differ in them and a replayer needs none.
type WorkerDefaults struct {
	// ActivityHeartbeatTimeout caps the heartbeat timeout of every activity the runs
	// schedule (0: no cap, ActivityHeartbeatTimeout as today). An activity in flight on a
	// worker that died is retried elsewhere this long after its last heartbeat; the worker
	// keeps every activity alive with a heartbeat well within it (activities.KeepAlive,
	// every activities.HeartbeatThrottle). Tests that kill workers set it to about a second.
	ActivityHeartbeatTimeout time.Duration
}

// Interceptor returns the worker interceptor that applies d to every workflow the worker
// runs: it sits on the workflow's outbound calls, so the run code's own activity options
// (DefaultActivityOptions and the others) stay what they are and d is applied where an
// activity is scheduled. Timeouts are attributes of a command, not its identity: a history
// recorded with one cap replays under another (TestReplayRecordedHistories replays every
// fixture with a 1 s cap too).
func Interceptor(d WorkerDefaults) interceptor.WorkerInterceptor {
	return &defaultsInterceptor{d: d}
}

type defaultsInterceptor struct {
	interceptor.InterceptorBase
	d WorkerDefaults
}

func (i *defaultsInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &defaultsInbound{d: i.d}
	in.Next = next
	return in
}

type defaultsInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	d WorkerDefaults
}

func (i *defaultsInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &defaultsOutbound{d: i.d}
	o.Next = outbound
	return i.Next.Init(o)
}

type defaultsOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	d WorkerDefaults
}

func (o *defaultsOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if hb := o.d.ActivityHeartbeatTimeout; hb > 0 {
		if ao := workflow.GetActivityOptions(ctx); ao.HeartbeatTimeout > hb {
			ao.HeartbeatTimeout = hb
			ctx = workflow.WithActivityOptions(ctx, ao)
		}
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
