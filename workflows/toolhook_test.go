package workflows

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// TestToolHookEvents: the agent's tool_hooks reach the tool activity with each call, and
// what the hooks did (here a denial) is a tool_hook event between the call and its
// result, never part of what the model reads.
func TestToolHookEvents(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "keeper", Permissions: permissions.Policy{Mode: permissions.ModeAuto}, ToolHooks: []string{"guard", "stamp"}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{toolReply(call("read_file", `{"path":"a.txt"}`)), text("done")},
		hooked: []api.ToolHookNote{{Hook: "guard", Action: api.ToolHookDenied, Reason: "not today"}}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "keeper"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 1 || !slices.Equal(f.tools[0].Hooks, spec.ToolHooks) {
		t.Fatalf("RunTool requests = %+v, want one naming the hooks %v", f.tools, spec.ToolHooks)
	}
	rec := queryRecord(t, env)
	var types []string
	var hooked []map[string]any
	for _, ev := range rec.Events {
		types = append(types, ev.Type)
		if ev.Type == api.EventToolHook {
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			hooked = append(hooked, d)
		}
	}
	if joined := strings.Join(types, ","); !strings.Contains(joined, "agent_tool_call,tool_hook,agent_tool_result") {
		t.Errorf("events = %s, want a tool_hook event between the call and its result", joined)
	}
	if len(hooked) != 1 || hooked[0]["hook"] != "guard" || hooked[0]["action"] != "denied" || hooked[0]["reason"] != "not today" ||
		hooked[0]["tool"] != "read_file" || hooked[0]["call_id"] != "1.1" {
		t.Errorf("tool_hook events = %v", hooked)
	}
	if got := lastToolMessage(f.requests[1]); strings.Contains(got, "guard") {
		t.Errorf("the model's tool result holds the hook notes: %q", got)
	}
}
