package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/permissions"
)

// BenchmarkAgentTurns runs an agent for 50 turns (each a model call answered by the fake
// model with one glob tool call, then a final answer) on the embedded server and reports
// the loop's overhead per turn and the run's history size:
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench AgentTurns -benchtime 3x
func BenchmarkAgentTurns(b *testing.B) {
	const turns = 50
	script := make([]fakellm.Reply, 0, turns)
	for range turns - 1 {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "glob", Arguments: json.RawMessage(`{"pattern":"**/*.md"}`)}}})
	}
	script = append(script, fakellm.Reply{Content: "done"})

	spec := agents.Spec{Name: "globber", MaxTurns: turns, Permissions: permissions.Policy{Mode: permissions.ModeReadOnly}}
	// One fake model serves every run: it answers by the thread's length, not by order.
	llm := activities.NewLLM(activities.LLMConfig{BaseURL: fakellm.New(script...).Start(b), Model: "fake"})
	tc, _ := benchPlatform(b, activities.Deps{LLM: llm, Agents: []agents.Spec{spec}}, nil)
	var perTurn []time.Duration
	var histBytes, histEvents int
	for i := 0; i < b.N+1; i++ { // the first run warms up and is not counted
		in, _ := json.Marshal(api.AgentRunInput{Agent: "globber", Prompt: "list the notes"})
		t0 := time.Now()
		run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: benchTaskQueue}, api.WorkflowAgentRun, json.RawMessage(in))
		if err != nil {
			b.Fatal(err)
		}
		var res api.AgentResult
		if err := run.Get(context.Background(), &res); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(t0)
		if res.Turns != turns {
			b.Fatalf("turns = %d, want %d", res.Turns, turns)
		}
		if i == 0 {
			continue
		}
		perTurn = append(perTurn, elapsed/turns)
		histBytes, histEvents = 0, 0
		it := tc.GetWorkflowHistory(context.Background(), run.GetID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			histBytes += proto.Size(ev)
			histEvents++
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(median(perTurn)), "ms/turn")
	b.ReportMetric(float64(histBytes)/1024, "history-KiB")
	b.ReportMetric(float64(histEvents), "history-events")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d turns: median %.1f ms per turn (n=%d runs); history %d events, %.0f KiB", turns, ms(median(perTurn)), len(perTurn), histEvents, float64(histBytes)/1024)
}
