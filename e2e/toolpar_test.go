package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/permissions"
)

// toolsFixturePrefix names the fixtures of parallel tool calls, thinking and plans.
const toolsFixturePrefix = "tools_"

// parallelGated: scribe with tool_concurrency 3 under approve asks for a read, a write
// (which needs a human) and a glob in one reply. The read and the glob run while the
// write waits; once approved it runs, and the model gets the three results in its order.
func parallelGated(t *testing.T) (*platform, client.Client, string) {
	t.Helper()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("brief.md"), writeCall("summary.md", "Launch on Monday.\n"), globCall("*.md")}},
		fakellm.Reply{Content: "I read the brief and wrote summary.md."},
	)
	p := newPlatform(t)
	p.writeConfig(strings.Replace(historyAgentConfig(model.Start(t)), "max_turns: 5", "max_turns: 5\n    tool_concurrency: 3", 1))
	p.writeWorkspace(historyBrief)
	p.start()
	c := p.dial()
	id := p.startAgent("Read the brief and write a summary.")
	wantPending(t, p, id, "1.2")
	// Both allowed calls end while the write waits (no sleep: the run's events say so).
	deadline := time.Now().Add(30 * time.Second)
	for countEvents(p.record(id), "agent_tool_result") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the read and the glob did not run while the write waited: %+v", p.record(id).Events)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.ok("approve", id, "--by", "ada")
	rec := p.waitStatus(id, api.StatusDone)
	var order []string
	for _, e := range rec.Events {
		switch e.Type {
		case "agent_tool_call", "agent_tool_result", "approval_requested", "approval_decided":
			var d struct {
				CallID string `json:"call_id"`
			}
			_ = json.Unmarshal(e.Data, &d)
			order = append(order, e.Type+":"+d.CallID)
		}
	}
	got := strings.Join(order, " ")
	if !strings.HasPrefix(got, "agent_tool_call:1.1 agent_tool_call:1.2 agent_tool_call:1.3 ") ||
		!strings.HasSuffix(got, "approval_decided:1.2 agent_tool_result:1.2") {
		t.Errorf("events: %s\nwant every start first, the write's result last after its decision", got)
	}
	if a, ok := rec.FindArtifact("summary.md"); ok && a.Content != nil {
		t.Logf("summary.md: %q", *a.Content)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	var ids []string
	for _, m := range reqs[1].Messages {
		if m["role"] == "tool" {
			ids = append(ids, fmt.Sprint(m["tool_call_id"]))
		}
	}
	if strings.Join(ids, " ") != "1.1 1.2 1.3" {
		t.Errorf("tool results reached the model as %v, want 1.1 1.2 1.3 (the model's order)", ids)
	}
	return p, c, id
}

func TestParallelToolsGatedE2E(t *testing.T) {
	t.Parallel()
	parallelGated(t)
}

func recordToolsParallelGated(t *testing.T, r *recorder) {
	_, c, id := parallelGated(t)
	r.save(c, "agent_parallel_gated.json", id, "")
}

// sessionThinkingPlan: a session turn whose model replies carry reasoning (streamed, as
// reasoning_content and as Ollama's reasoning) and call update_plan; `session watch`
// shows the thinking and the plan. The session is closed, so watch ends.
func sessionThinkingPlan(t *testing.T) (*platform, client.Client, string) {
	t.Helper()
	model := fakellm.New(
		fakellm.Reply{Reasoning: "The user wants a plan; I record it first.",
			ToolCalls: []fakellm.Call{toolCall(agents.ToolUpdatePlan, map[string]any{"steps": []map[string]string{
				{"step": "read the brief", "status": "done"}, {"step": "write the note", "status": "in_progress"}}})}},
		fakellm.Reply{Reasoning: "The plan is recorded; now I answer.", ReasoningField: fakellm.FieldReasoning,
			Content: "Plan made: two steps."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: planner
    instructions: You plan before you act.
    plan: true
    sandbox: {type: local, dir: ./workspace}
    max_turns: 5
`)
	p.writeWorkspace(map[string]string{"brief.md": historyBrief["brief.md"]})
	p.start()
	c := p.dial()
	id := api.SessionID("planner", "t1")
	if out := p.ok("session", "prompt", "planner", "t1", "Plan the launch."); !strings.Contains(out, "Plan made: two steps.") {
		t.Fatalf("reply %q", out)
	}
	p.ok("session", "close", "planner", "t1")
	watch := p.ok("session", "watch", "planner", "t1", "--from", "0")
	for _, want := range []string{
		"thinking: The user wants a plan; I record it first.",
		"plan: [x] read the brief · [>] write the note",
		"tool 1.1.1 update_plan",
		"tool 1.1.1 completed: plan updated: 2 steps (1 done, 1 in progress, 0 pending)",
		"thinking: The plan is recorded; now I answer.",
		"text: Plan made: two steps.",
	} {
		if !strings.Contains(watch, want) {
			t.Errorf("session watch lacks %q:\n%s", want, watch)
		}
	}
	for _, m := range model.Requests()[1].Messages {
		if c, _ := m["content"].(string); strings.Contains(c, "I record it first") {
			t.Errorf("the reasoning was sent back to the model: %v", m)
		}
	}
	return p, c, id
}

func TestSessionThinkingAndPlanE2E(t *testing.T) {
	t.Parallel()
	sessionThinkingPlan(t)
}

func recordToolsSessionThinkingPlan(t *testing.T, r *recorder) {
	_, c, id := sessionThinkingPlan(t)
	waitQuiet(t, c, id, "")
	r.save(c, "session_thinking_plan.json", id, "")
}

// BenchmarkParallelTools: one model reply asks for N shell calls of `sleep 0.2` in a local
// sandbox; the run's wall time with tool_concurrency N against 1 (the default):
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench ParallelTools -benchtime 3x
func BenchmarkParallelTools(b *testing.B) {
	const n = 8
	calls := make([]fakellm.Call, n)
	for i := range calls {
		calls[i] = fakellm.Call{Name: agents.ToolShell, Arguments: json.RawMessage(`{"command":"sleep 0.2"}`)}
	}
	llm := activities.NewLLM(activities.LLMConfig{BaseURL: fakellm.New(fakellm.Reply{ToolCalls: calls}, fakellm.Reply{Content: "done"}).Start(b), Model: "fake"})
	spec := func(name string, c int) agents.Spec {
		return agents.Spec{Name: name, ToolConcurrency: c, Permissions: permissions.Policy{Mode: permissions.ModeAuto},
			Sandbox: api.SandboxSpec{Type: api.SandboxLocal}}
	}
	tc, _ := benchPlatform(b, activities.Deps{LLM: llm, Agents: []agents.Spec{spec("one", 1), spec("many", n)}}, nil)
	run := func(agent string) time.Duration {
		in, _ := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: "sleep"})
		t0 := time.Now()
		r, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: benchTaskQueue}, api.WorkflowAgentRun, json.RawMessage(in))
		if err != nil {
			b.Fatal(err)
		}
		var res api.AgentResult
		if err := r.Get(context.Background(), &res); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	run("one") // warm-up
	var one, many []time.Duration
	for range b.N {
		one = append(one, run("one"))
		many = append(many, run("many"))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(one)), "ms/run-concurrency-1")
	b.ReportMetric(ms(median(many)), fmt.Sprintf("ms/run-concurrency-%d", n))
	b.ReportMetric(float64(median(one))/float64(median(many)), "speedup")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d tools of 200 ms in one reply: tool_concurrency 1 %.0f ms, tool_concurrency %d %.0f ms (median of %d runs)",
		n, ms(median(one)), n, ms(median(many)), len(one))
}
