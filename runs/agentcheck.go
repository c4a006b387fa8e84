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
	if workflow != api.WorkflowAgentRun || len(v.Agents) == 0 {
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

// agentOffered refuses agent when the registry names the agents its workers offer and
// agent is not one of them (a session fork, an AgentRun).
func agentOffered(v api.RegistryView, taskQueue, agent string) error {
	if len(v.Agents) == 0 || slices.Contains(v.Agents, agent) {
		return nil
	}
	msg := fmt.Sprintf("no worker on task queue %s offers agent %q (offered: %s)", taskQueue, agent, strings.Join(v.Agents, ", "))
	if s := suggest.Nearest(agent, v.Agents); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return &BadRequestError{Msg: msg}
}
