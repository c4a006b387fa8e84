package workflows

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// AgentUnavailableFor bounds how long a run waits for a worker that has its agent (a
// rolling deploy replaces workers within minutes; a name no worker will ever know must not
// hang the run).
const AgentUnavailableFor = 10 * time.Minute

// agentRetryFirst and agentRetryMax are the backoff between two asks: doubling from the
// first to the cap.
const (
	agentRetryFirst = time.Second
	agentRetryMax   = 30 * time.Second
)

// EventAgentUnavailable is the event naming a worker that could not resolve the agent.
const EventAgentUnavailable = "agent_unavailable"

// resolveAgent is the run's agent definition, resolved by a worker that has it and stored
// under state["agent"] like any checkpoint.
func resolveAgent(ctx workflow.Context, name string) (agents.Spec, error) {
	return Step(ctx, "agent", func(ctx workflow.Context) (agents.Spec, error) {
		var spec agents.Spec
		if workflow.GetVersion(ctx, ChangeAgentUnavailable, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			err := workflow.ExecuteActivity(ctx, api.ActivityResolveAgent, name).Get(ctx, &spec)
			return spec, err
		}
		rt, err := runtimeOf(ctx, "agent "+name)
		if err != nil {
			return spec, err
		}
		// Not eager: a worker that completes a workflow task may take the activities it
		// schedules itself, and the run's workflow tasks stick to the worker that lacks the
		// agent, which would then be asked every time. Through the task queue any of the
		// queue's workers can take it.
		opts := workflow.GetActivityOptions(ctx)
		opts.DisableEagerExecution = true
		ctx = workflow.WithActivityOptions(ctx, opts)
		deadline := workflow.Now(ctx).Add(AgentUnavailableFor)
		wait := agentRetryFirst
		lacking := map[string]bool{}
		for {
			err := workflow.ExecuteActivity(ctx, api.ActivityResolveAgent, name).Get(ctx, &spec)
			worker, ok := agentUnavailable(err)
			if !ok {
				return spec, err
			}
			if !lacking[worker] {
				lacking[worker] = true
				rt.emit(ctx, EventAgentUnavailable, map[string]string{"agent": name, "worker": worker})
			}
			if !workflow.Now(ctx).Add(wait).Before(deadline) {
				return spec, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"no worker of task queue %s offers agent %q: asked for %s, and the workers that answered lack it (%s); add the agent to a worker's config (or start a worker that has it) and rerun",
					workflow.GetInfo(ctx).TaskQueueName, name, AgentUnavailableFor, strings.Join(sortedSet(lacking), ", ")),
					api.ErrTypeAgentUnavailable, err)
			}
			if err := workflow.Sleep(ctx, wait); err != nil {
				return spec, err
			}
			wait = min(2*wait, agentRetryMax)
		}
	})
}

// agentUnavailable reports whether err is a worker's "no such agent here", and which
// worker said it (the identity the activity failure carries).
func agentUnavailable(err error) (worker string, ok bool) {
	var app *temporal.ApplicationError
	if err == nil || !errors.As(err, &app) || app.Type() != api.ErrTypeAgentUnavailable {
		return "", false
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) && act.Identity() != "" {
		return act.Identity(), true
	}
	return "(unknown worker)", true
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
