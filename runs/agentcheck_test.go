package runs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

func TestCheckAgent(t *testing.T) {
	v := api.RegistryView{Workflows: []string{api.WorkflowAgentRun}, Agents: []string{"keeper", "scribe"}, Workers: []api.RegisteredWorker{liveWorker}}
	in := func(agent string) json.RawMessage {
		b, _ := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: "hi"})
		return b
	}
	if err := checkAgent(v, "nexo", api.WorkflowAgentRun, in("scribe")); err != nil {
		t.Errorf("offered agent refused: %v", err)
	}
	err := checkAgent(v, "nexo", api.WorkflowAgentRun, in("scrib"))
	if err == nil || !strings.Contains(err.Error(), `no worker on task queue nexo offers agent "scrib" (offered: keeper, scribe); did you mean "scribe"?`) {
		t.Errorf("unknown agent: err = %v", err)
	}
	if err := checkAgent(api.RegistryView{Workflows: []string{api.WorkflowAgentRun}}, "nexo", api.WorkflowAgentRun, in("scrib")); err != nil {
		t.Errorf("a registry without live workers cannot tell, but refused: %v", err)
	}
	// Live workers that offer no agent: the run would only wait (issue 29 item 2).
	none := api.RegistryView{Workflows: []string{api.WorkflowAgentRun}, Agents: []string{}, Workers: []api.RegisteredWorker{liveWorker}}
	if err := checkAgent(none, "nexo", api.WorkflowAgentRun, in("scribe")); err == nil ||
		!strings.Contains(err.Error(), `no worker on task queue nexo offers agent "scribe" (offered: none)`) {
		t.Errorf("live workers without agents: err = %v, want the refusal", err)
	}
	if err := checkAgent(v, "nexo", "DocumentApproval", json.RawMessage(`{"agent":"x"}`)); err != nil {
		t.Errorf("another workflow type checked for agents: %v", err)
	}
}
