package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"

	"github.com/nexo-temporal/nexo/api"
)

// NoPoolHostError: the agent of a new run names a sandbox pool no live host serves (no
// worker polls the pool's claim queue), so the run would wait for a host at its first
// tool call; it was not started.
type NoPoolHostError struct {
	Agent, Pool string
	// Queue is the pool's claim queue (api.PoolQueueName).
	Queue string
}

func (e *NoPoolHostError) Error() string {
	return fmt.Sprintf("agent %q runs its tools on sandbox pool %q, which no live host serves (nothing polls task queue %s): start one with `worker --sandbox-host --pool %s`",
		e.Agent, e.Pool, e.Queue, e.Pool)
}

// poolPollerFresh is how recently a pool's host must have polled to count as live. An
// idle worker polls again as each long poll ends (about a minute), so a live host is
// never older than that; a host that died counts as live at most this long after.
const poolPollerFresh = 2 * time.Minute

// poolOf is the sandbox pool of agent as the registry knows it: the pool the worker that
// announced itself last, of those offering the agent, names for it ("" for none, or when
// no worker offers it). The last one wins so an agent whose pool a new config changed or
// dropped is checked against what the current workers run.
func poolOf(v api.RegistryView, agent string) string {
	var latest *api.RegisteredWorker
	for i := range v.Workers {
		w := &v.Workers[i]
		if !slices.Contains(w.Agents, agent) {
			continue
		}
		if latest == nil || w.SeenAt.After(latest.SeenAt) {
			latest = w
		}
	}
	if latest == nil {
		return ""
	}
	return latest.Pools[agent]
}

// livePoller reports whether any of pollers polled within poolPollerFresh of now.
func livePoller(pollers []*taskqueuepb.PollerInfo, now time.Time) bool {
	for _, p := range pollers {
		if at := p.GetLastAccessTime(); at != nil && now.Sub(at.AsTime()) <= poolPollerFresh {
			return true
		}
	}
	return false
}

// checkPool refuses an AgentRun whose agent (as the registry view v announces it) names a
// sandbox pool that no live host polls. Without a registry answer (v nil) there is
// nothing to check.
func (c *Client) checkPool(ctx context.Context, v *api.RegistryView, workflow string, payload json.RawMessage) error {
	if v == nil || workflow != api.WorkflowAgentRun {
		return nil
	}
	var in struct {
		Agent string `json:"agent"`
	}
	if json.Unmarshal(payload, &in) != nil || in.Agent == "" {
		return nil
	}
	return c.checkAgentPool(ctx, *v, in.Agent)
}

// checkSessionPool refuses a prompt to a session of an agent whose sandbox pool no live
// host polls: the turn would wait for a host at its first tool call. It reads the
// registry (a recent answer, else asks); when the registry cannot tell, the prompt goes.
func (c *Client) checkSessionPool(ctx context.Context, agent string) error {
	now := time.Now()
	v, ok := c.offered.fresh(now)
	if !ok {
		var err error
		if v, err = c.Workflows(ctx); err != nil {
			return nil
		}
		c.offered.store(v, now)
	}
	return c.checkAgentPool(ctx, v, agent)
}

// checkAgentPool asks Temporal for the pollers of the claim queue of agent's pool (by v)
// and refuses with a NoPoolHostError when none polled lately; an agent without a pool
// passes.
func (c *Client) checkAgentPool(ctx context.Context, v api.RegistryView, agent string) error {
	pool := poolOf(v, agent)
	if pool == "" {
		return nil
	}
	queue := api.PoolQueueName(c.taskQueue, pool)
	resp, err := c.tc.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return fmt.Errorf("find the hosts of sandbox pool %s (task queue %s): %w", pool, queue, err)
	}
	if livePoller(resp.GetPollers(), time.Now()) {
		return nil
	}
	return &NoPoolHostError{Agent: agent, Pool: pool, Queue: queue}
}
