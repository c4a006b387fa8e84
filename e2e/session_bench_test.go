package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/runs"
)

// BenchmarkSessionPrompts sends b.N prompts, one after another, to one session on the
// embedded server (the fake model streams its reply word by word) and reports the median
// prompt round trip, the median time from sending a prompt to its first streamed `text`
// update, the history bytes per turn, and the largest run history the session reached:
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench SessionPrompts -benchtime 1000x -timeout 60m
func BenchmarkSessionPrompts(b *testing.B) {
	// Every reply is the same; the fake answers by thread length, so give it enough.
	script := make([]fakellm.Reply, b.N+1)
	for i := range script {
		script[i] = fakellm.Reply{Content: fmt.Sprintf("Noted, reply number %d.", i+1)}
	}
	llm := activities.NewLLM(activities.LLMConfig{BaseURL: fakellm.New(script...).Start(b), Model: "fake"})
	spec := agents.Spec{Name: "assistant", Instructions: "Be brief.", Sandbox: api.SandboxSpec{Type: api.SandboxVirtual}}
	tc, _ := benchPlatform(b, activities.Deps{LLM: llm, Agents: []agents.Spec{spec}}, nil)
	rc := runs.New(tc, api.DefaultNamespace, benchTaskQueue)
	ctx := context.Background()
	id := api.SessionID("assistant", "bench")

	var round, firstText []time.Duration
	b.ResetTimer()
	began := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rep, err := rc.Prompt(ctx, "assistant", "bench", fmt.Sprintf("Remember item %d.", i), runs.PromptOptions{})
		if err != nil {
			b.Fatalf("prompt %d: %v", i, err)
		}
		round = append(round, time.Since(t0))
		if i%10 == 0 { // sample: reading the record costs a query
			rec, err := rc.Get(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range rec.Events {
				if e.Type == api.StreamUserInput {
					var d map[string]any
					_ = json.Unmarshal(e.Data, &d)
					if int(d["turn"].(float64)) == rep.Turn {
						for _, e2 := range rec.Events {
							if e2.Seq > e.Seq && e2.Type == api.StreamText {
								firstText = append(firstText, e2.At.Sub(t0))
								break
							}
						}
					}
				}
			}
		}
	}
	total := time.Since(began)
	b.StopTimer()

	// Every run the session had (continue-as-new): events and bytes of each.
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: api.DefaultNamespace,
		PageSize: 1000, Query: fmt.Sprintf("WorkflowId = '%s'", id)})
	if err != nil {
		b.Fatal(err)
	}
	var sumBytes, maxBytes, maxEvents int
	for _, ex := range resp.GetExecutions() {
		it := tc.GetWorkflowHistory(ctx, id, ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		bytes, events := 0, 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			bytes += proto.Size(ev)
			events++
		}
		sumBytes += bytes
		maxBytes = max(maxBytes, bytes)
		maxEvents = max(maxEvents, events)
	}
	b.ReportMetric(ms(median(round)), "ms/prompt")
	if len(firstText) > 0 {
		b.ReportMetric(ms(median(firstText)), "ms-to-first-text")
	}
	b.ReportMetric(float64(sumBytes)/float64(b.N)/1024, "history-KiB/turn")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d prompts in %v: median %.1f ms per prompt (p90 %.1f), median prompt-to-first-text %.1f ms (n=%d); %d runs, largest history %d events / %.0f KiB, %.1f KiB history per turn",
		b.N, total.Round(time.Millisecond), ms(median(round)), ms(pct(round, 0.9)), ms(median(firstText)), len(firstText),
		len(resp.GetExecutions()), maxEvents, float64(maxBytes)/1024, float64(sumBytes)/float64(b.N)/1024)
}
