package workflows

import (
	"context"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// TestHarnessLoopReplacesTheModel: an agent with a loop runs its turns as HarnessStep
// (never CompleteChat); a tool the harness was not offered comes back to it as an error
// result, as an unknown tool from a model does; a plan line becomes an agent_plan event;
// the step's answer is the run's result.
func TestHarnessLoopReplacesTheModel(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "harnessed", Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		Loop: &api.LoopSpec{Type: api.LoopHarness, Command: []string{"/bin/h"}}}
	f := &agentFakes{spec: spec}
	f.register(env) // its CompleteChat fails the test's run: the script is empty
	var steps []api.CompleteChatRequest
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		steps = append(steps, req)
		if len(steps) == 1 {
			return api.CompleteChatResult{Message: api.ChatMessage{Content: "Teleporting.", ToolCalls: []api.ToolCall{{ID: "t", Name: "teleport", Arguments: `{}`}}},
				Plan: []api.PlanStep{{Step: "teleport", Status: "in_progress"}}, Usage: api.Usage{TotalTokens: 7}}, nil
		}
		return api.CompleteChatResult{Message: api.ChatMessage{Content: "I cannot teleport."}, Usage: api.Usage{TotalTokens: 3}}, nil
	}), activity.RegisterOptions{Name: api.ActivityHarnessStep})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "harnessed"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res api.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil || res.Content != "I cannot teleport." || res.Turns != 2 || res.Usage.TotalTokens != 10 {
		t.Fatalf("result = %+v, %v", res, err)
	}
	if len(f.requests) != 0 || len(steps) != 2 {
		t.Fatalf("model calls %d, loop steps %d; want 0 and 2", len(f.requests), len(steps))
	}
	if steps[0].Loop == nil || steps[0].Loop.Command[0] != "/bin/h" || steps[0].Agent != "harnessed" {
		t.Errorf("the step does not carry the loop: %+v", steps[0])
	}
	last := steps[1].Messages[len(steps[1].Messages)-1]
	if last.Role != api.RoleTool || !last.IsError || !strings.Contains(last.Content, `unknown tool "teleport"`) {
		t.Errorf("the harness got %+v, want an error result naming the unknown tool", last)
	}
	rec := queryRecord(t, env)
	plans := eventsOf(rec, "agent_plan")
	if len(plans) != 1 || plans[0]["call_id"] != "1" {
		t.Errorf("agent_plan events = %v", plans)
	}
	if countEvents(rec, "agent_tool_call") != 1 || countEvents(rec, api.EventAgentDone) != 1 {
		t.Errorf("events: %d tool calls, %d done", countEvents(rec, "agent_tool_call"), countEvents(rec, api.EventAgentDone))
	}
}
