package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
)

// modelCallOptionsFor are modelCallOptions routed to the agent's rate-limited model task
// queue when it has one. A call there waits in the queue (scheduled, not started) until
// the fleet has capacity: no attempt is spent waiting, and the wait is bounded only by the
// call's retry budget (ScheduleToClose), not by a schedule-to-start timeout.
func modelCallOptionsFor(ctx workflow.Context, spec agents.Spec) workflow.ActivityOptions {
	o := modelCallOptions(spec)
	if spec.ModelQueue != "" && workflow.GetVersion(ctx, ChangeModelEndpointQueue, workflow.DefaultVersion, 1) >= 1 {
		o.TaskQueue = spec.ModelQueue
	}
	return o
}
