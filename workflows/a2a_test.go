package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// a2aSpec is an agent with one remote, weather, under mode.
func a2aSpec(mode permissions.Mode) agents.Spec {
	return agents.Spec{Name: "lead", Instructions: "Ask the weather agent.", Permissions: permissions.Policy{Mode: mode},
		A2A: []api.A2ARemote{{Name: "weather", URL: "http://weather.test/a2a", TokenEnv: "WEATHER_TOKEN"}}}
}

// a2aFakes answers DescribeA2AAgents from the "card" and CallA2AAgent with answer (or
// err), recording the calls.
type a2aFakes struct {
	calls  []api.CallA2AAgentRequest
	answer api.RunToolResult
	err    error
}

func (f *a2aFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, req api.DescribeA2AAgentsRequest) (api.DescribeA2AAgentsResult, error) {
		var out api.DescribeA2AAgentsResult
		for _, r := range req.Remotes {
			out.Agents = append(out.Agents, api.A2AAgent{Remote: r.Name, Description: "Forecasts for any city.", Endpoint: "http://weather.test/rpc", Card: "Weather"})
		}
		return out, nil
	}, activity.RegisterOptions{Name: api.ActivityDescribeA2AAgents})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.CallA2AAgentRequest) (api.RunToolResult, error) {
		f.calls = append(f.calls, req)
		return f.answer, f.err
	}, activity.RegisterOptions{Name: api.ActivityCallA2AAgent})
}

func a2aCall(msg string) api.ToolCall {
	return api.ToolCall{Name: "a2a_weather", Arguments: string(mustJSON(map[string]string{"message": msg, "context_id": "ctx-7"}))}
}

// TestA2AToolWaitsForApproval: under approve an a2a_weather call waits for a human as
// capability a2a, its message the detail; approved, CallA2AAgent gets the message, the
// context id and the endpoint the card named, and its answer is the next model call's
// tool result. The tool was offered described by the card.
func TestA2AToolWaitsForApproval(t *testing.T) {
	env := newEnv(t)
	d := &delegateFakes{specs: map[string]agents.Spec{"lead": a2aSpec(permissions.ModeApprove)},
		lead: []api.ChatMessage{toolReply(a2aCall("Weather in Lisbon?")), text("Sunny, it says.")}}
	d.register(env)
	f := &a2aFakes{answer: api.RunToolResult{Content: "Sunny, 21 C.\n\n[A2A task t1, context ctx-7: completed]"}}
	f.register(env)
	var waiting api.Record
	env.RegisterDelayedCallback(func() {
		waiting = queryRecord(t, env)
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "lead", Prompt: "Weather?"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	a, ok := waiting.Approval()
	if !ok || a.Tool != "a2a_weather" || a.Capability != "a2a" || a.Detail != "Weather in Lisbon?" {
		t.Errorf("__approval__ = %+v (present %v), want a2a_weather of capability a2a with its message", a, ok)
	}
	if len(f.calls) != 1 || f.calls[0].Message != "Weather in Lisbon?" || f.calls[0].ContextID != "ctx-7" ||
		f.calls[0].Endpoint != "http://weather.test/rpc" || f.calls[0].Remote.TokenEnv != "WEATHER_TOKEN" {
		t.Fatalf("CallA2AAgent = %+v, want one call with the message, context and the card's endpoint", f.calls)
	}
	if got := lastToolResult(t, d.leadReqs[1]); !strings.HasPrefix(got.Content, "Sunny, 21 C.") {
		t.Errorf("tool result = %q, want the remote's answer", got.Content)
	}
	offered := ""
	for _, def := range d.leadReqs[0].Tools {
		if def.Name == "a2a_weather" {
			offered = def.Description
		}
	}
	if !strings.Contains(offered, "Forecasts for any city.") {
		t.Errorf("a2a_weather offered as %q, want the card's description", offered)
	}
	if ev := delegateEvents(t, queryRecord(t, env), api.EventA2AAgents); len(ev) != 1 || ev[0]["weather"] != "http://weather.test/rpc" {
		t.Errorf("a2a_agents = %v, want weather's endpoint", ev)
	}
}

// TestA2AToolFailureIsAnErrorResult: a remote that fails after the retries (a final 401)
// is an error result the model sees, naming the remote; the run goes on. Under
// read_only the tool is not offered at all, and no card is read.
func TestA2AToolFailureIsAnErrorResult(t *testing.T) {
	env := newEnv(t)
	d := &delegateFakes{specs: map[string]agents.Spec{"lead": a2aSpec(permissions.ModeAuto)},
		lead: []api.ChatMessage{toolReply(a2aCall("Weather in Lisbon?")), text("It refused me.")}}
	d.register(env)
	f := &a2aFakes{err: temporal.NewNonRetryableApplicationError("remote A2A agent weather: message/send: the remote answered 401 Unauthorized", api.ErrTypeBadInput, nil)}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "lead", Prompt: "Weather?"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the run failed with its remote: %v", err)
	}
	if got := lastToolResult(t, d.leadReqs[1]); !strings.HasPrefix(got.Content, "error: remote A2A agent weather: ") || !strings.Contains(got.Content, "401 Unauthorized") {
		t.Errorf("tool result = %q, want an error naming the remote and the 401", got.Content)
	}

	spec := a2aSpec(permissions.ModeReadOnly)
	if permissions.NeverAllows(spec.Permissions, permissions.CapA2A) != true {
		t.Error("read_only allows capability a2a; want it never offered")
	}
	spec.Permissions.Allow = []permissions.Capability{permissions.CapA2A}
	if v := permissions.Decide(spec.Permissions, permissions.Call{Capability: permissions.CapA2A, Tool: "a2a_weather"}, permissions.Approvals{}); !v.Allowed() {
		t.Errorf("read_only with allow: [a2a] = %v, want allowed", v)
	}
}
