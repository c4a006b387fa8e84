package runs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/suggest"
)

// checkAgent refuses an AgentRun whose agent no registered worker offers: the run would
// only wait for a worker that has it (workflows/agentavail.go) and fail after
// workflows.AgentUnavailableFor. A registry with no agents at all cannot tell (workers
// older than agent announcements), so it passes.
func checkAgent(v api.RegistryView, taskQueue, workflow string, payload json.RawMessage) error {
	if workflow != api.WorkflowAgentRun || len(v.Workers) == 0 {
		return nil
	}
	var in struct {
		Agent string `json:"agent"`
	}
	if json.Unmarshal(payload, &in) != nil || in.Agent == "" {
		return nil
	}
	return agentOffered(v, taskQueue, in.Agent)
}

// agentOffered refuses agent when live workers are registered and none of them offers it
// (a session fork, an AgentRun): live workers that offer no agent at all refuse it too,
// since its run would only wait for one. With no live worker there is nothing to check
// against, and the run waits for one.
func agentOffered(v api.RegistryView, taskQueue, agent string) error {
	if len(v.Workers) == 0 || slices.Contains(v.Agents, agent) {
		return nil
	}
	offered := strings.Join(v.Agents, ", ")
	if offered == "" {
		offered = "none"
	}
	msg := fmt.Sprintf("no worker on task queue %s offers agent %q (offered: %s)", taskQueue, agent, offered)
	if s := suggest.Nearest(agent, v.Agents); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return &BadRequestError{Msg: msg}
}
