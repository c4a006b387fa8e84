package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	tclient "go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/mcptest"
	"github.com/nexo-temporal/nexo/permissions"
)

// BenchmarkMCPToolCall measures one MCP tool call (echo on a stdio server) three ways and
// reports the medians and the ratio of the first to the last:
//
//   - platform: inside an agent run on the embedded server, from the agent_tool_call event
//     to its agent_tool_result (the CallMCPTool activity's round trip through Temporal:
//     schedule, poll, call, complete, next workflow task);
//
//   - activity: the CallMCPTool method called directly (the client pool, no Temporal);
//
//   - direct: mcp-go's client calling the server.
//
//     GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench MCPToolCall -benchtime 3x
func BenchmarkMCPToolCall(b *testing.B) {
	const calls = 30 // per run
	echo := fakellm.Call{Name: "srv__echo", Arguments: json.RawMessage(`{"text":"ping"}`)}
	script := make([]fakellm.Reply, 0, calls+1)
	for range calls {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{echo}})
	}
	script = append(script, fakellm.Reply{Content: "done"})
	server := api.MCPServerSpec{Name: "srv", Transport: api.MCPStdio, Command: mcptest.BuildServer(b)}

	spec := agents.Spec{Name: "mcper", MaxTurns: calls + 1, Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		MCP: []api.MCPServerSpec{server}}
	llm := activities.NewLLM(activities.LLMConfig{BaseURL: fakellm.New(script...).Start(b), Model: "fake"})
	tc, acts := benchPlatform(b, activities.Deps{LLM: llm, Agents: []agents.Spec{spec}}, nil)

	var platform []time.Duration
	for i := 0; i < b.N+1; i++ { // the first run warms up and is not counted
		in, _ := json.Marshal(api.AgentRunInput{Agent: "mcper", Prompt: "echo"})
		run, err := tc.ExecuteWorkflow(context.Background(), tclient.StartWorkflowOptions{TaskQueue: benchTaskQueue}, api.WorkflowAgentRun, json.RawMessage(in))
		if err != nil {
			b.Fatal(err)
		}
		var res api.AgentResult
		if err := run.Get(context.Background(), &res); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			continue
		}
		q, err := tc.QueryWorkflow(context.Background(), run.GetID(), "", api.QueryRun)
		if err != nil {
			b.Fatal(err)
		}
		var rec api.Record
		if err := q.Get(&rec); err != nil {
			b.Fatal(err)
		}
		platform = append(platform, toolCallTimes(b, rec)...)
	}
	if len(platform) != b.N*calls {
		b.Fatalf("%d timed calls, want %d", len(platform), b.N*calls)
	}

	n := len(platform)
	args := json.RawMessage(`{"text":"ping"}`)
	activity := make([]time.Duration, 0, n)
	for range n + 1 {
		t0 := time.Now()
		res, err := acts.MCP.CallMCPTool(context.Background(), api.CallMCPToolRequest{RunID: "bench", Server: server, Tool: "echo", Args: args})
		if err != nil || res.Content != "ping" {
			b.Fatalf("CallMCPTool: %+v, %v", res, err)
		}
		activity = append(activity, time.Since(t0))
	}
	activity = activity[1:] // the first call starts the server

	direct := make([]time.Duration, 0, n)
	c, err := client.NewStdioMCPClient(server.Command, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(context.Background(), mcp.InitializeRequest{}); err != nil {
		b.Fatal(err)
	}
	for range n {
		t0 := time.Now()
		if _, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: args}}); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(t0))
	}

	b.StopTimer()
	mp, ma, md := median(platform), median(activity), median(direct)
	b.ReportMetric(ms(mp), "platform-median-ms")
	b.ReportMetric(ms(ma), "activity-median-ms")
	b.ReportMetric(ms(md), "direct-median-ms")
	b.ReportMetric(float64(mp)/float64(md), "ratio")
	b.ReportMetric(0, "ns/op")
	b.Logf("n=%d calls: platform median %.2f ms (p90 %.2f) | activity alone %.3f ms | direct mcp-go %.3f ms | platform/direct %.0fx",
		n, ms(mp), ms(pct(platform, 0.9)), ms(ma), ms(md), float64(mp)/float64(md))
}

// toolCallTimes pairs each agent_tool_call event with its agent_tool_result.
func toolCallTimes(b *testing.B, rec api.Record) []time.Duration {
	started := map[string]time.Time{}
	var out []time.Duration
	for _, e := range rec.Events {
		var d struct {
			CallID string `json:"call_id"`
		}
		switch e.Type {
		case "agent_tool_call":
			_ = json.Unmarshal(e.Data, &d)
			started[d.CallID] = e.At
		case "agent_tool_result":
			_ = json.Unmarshal(e.Data, &d)
			t0, ok := started[d.CallID]
			if !ok {
				b.Fatalf("result of call %s without its call", d.CallID)
			}
			out = append(out, e.At.Sub(t0))
		}
	}
	return out
}
