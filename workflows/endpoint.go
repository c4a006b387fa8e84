package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
)

// changeModelEndpointQueue: the model calls (CompleteChat, CompactThread) of an agent
// whose endpoint has a request rate limit go to the endpoint's own task queue
// (spec.ModelQueue, api.ModelTaskQueue), which every worker polls at the endpoint's rate,
// so the Temporal server paces the calls of every run on the fleet together. Runs whose
// recorded spec names no such queue never ask for the version, so their histories are
// unchanged.
const changeModelEndpointQueue = "model-endpoint-queue"

// modelCallOptionsFor are modelCallOptions routed to the agent's rate-limited model task
// queue when it has one. A call there waits in the queue (scheduled, not started) until
// the fleet has capacity: no attempt is spent waiting, and the wait is bounded only by the
// call's retry budget (ScheduleToClose), not by a schedule-to-start timeout.
func modelCallOptionsFor(ctx workflow.Context, spec agents.Spec) workflow.ActivityOptions {
	o := modelCallOptions(spec)
	if spec.ModelQueue != "" && workflow.GetVersion(ctx, changeModelEndpointQueue, workflow.DefaultVersion, 1) >= 1 {
		o.TaskQueue = spec.ModelQueue
	}
	return o
}
