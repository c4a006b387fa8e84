package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
// prompt round trip, the median time from sending a prompt to its `text` event (the whole
// reply, recorded once; live text is BenchmarkSessionLiveText's), the history bytes per turn, and the largest run history the session reached:
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
		b.ReportMetric(ms(median(firstText)), "ms-to-text-event")
	}
	b.ReportMetric(float64(sumBytes)/float64(b.N)/1024, "history-KiB/turn")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d prompts in %v: median %.1f ms per prompt (p90 %.1f), median prompt-to-text-event %.1f ms (n=%d); %d runs, largest history %d events / %.0f KiB, %.1f KiB history per turn",
		b.N, total.Round(time.Millisecond), ms(median(round)), ms(pct(round, 0.9)), ms(median(firstText)), len(firstText),
		len(resp.GetExecutions()), maxEvents, float64(maxBytes)/1024, float64(sumBytes)/float64(b.N)/1024)
}

// BenchmarkSessionLiveText measures how soon a viewer sees a reply being written: b.N
// prompts whose replies the fake model streams over about 600 ms (a word every 20 ms), each
// followed by FollowSessionLive (what `session watch` and the gateway's stream use). It
// reports the median time from sending the prompt to the first live text, and to the
// durable text event. Live text is read from the model call's heartbeat (throttled to
// 200 ms on the worker) by polling the pending activity, so it trades some latency for
// history that holds no chunks:
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench SessionLiveText -benchtime 20x
func BenchmarkSessionLiveText(b *testing.B) {
	words := strings.Repeat("word ", 30)
	script := make([]fakellm.Reply, b.N+1)
	for i := range script {
		script[i] = fakellm.Reply{Content: words, ChunkDelayMS: 20}
	}
	llm := activities.NewLLM(activities.LLMConfig{BaseURL: fakellm.New(script...).Start(b), Model: "fake"})
	spec := agents.Spec{Name: "assistant", Instructions: "Be brief.", Sandbox: api.SandboxSpec{Type: api.SandboxVirtual}}
	tc, _ := benchPlatform(b, activities.Deps{LLM: llm, Agents: []agents.Spec{spec}}, nil)
	rc := runs.New(tc, api.DefaultNamespace, benchTaskQueue)
	ctx := context.Background()
	if _, err := rc.Prompt(ctx, "assistant", "live", "warm up", runs.PromptOptions{}); err != nil {
		b.Fatal(err)
	}
	var firstLive, durable []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fctx, cancel := context.WithCancel(ctx)
		var mu sync.Mutex
		var t0, live time.Time
		turn := i + 2
		done := make(chan error, 1)
		go func() {
			done <- rc.FollowSessionLive(fctx, "assistant", "live", func(rec api.Record) bool {
				for _, e := range rec.Events {
					if e.Type == api.StreamText && strings.HasPrefix(string(e.Data), `{"call":"`+strconv.Itoa(turn)+`.`) {
						mu.Lock()
						durable = append(durable, time.Since(t0))
						mu.Unlock()
						return true
					}
				}
				return false
			}, func(api.LiveText) {
				mu.Lock()
				if live.IsZero() {
					live = time.Now()
				}
				mu.Unlock()
			})
		}()
		mu.Lock()
		t0 = time.Now()
		mu.Unlock()
		if _, err := rc.Prompt(ctx, "assistant", "live", fmt.Sprintf("Say something %d.", i), runs.PromptOptions{}); err != nil {
			b.Fatalf("prompt %d: %v", i, err)
		}
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("follow: %v", err)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("prompt %d: no durable text event for turn %d", i, turn)
		}
		cancel()
		mu.Lock()
		if !live.IsZero() {
			firstLive = append(firstLive, live.Sub(t0))
		}
		mu.Unlock()
	}
	b.StopTimer()
	if len(firstLive) == 0 || len(durable) == 0 {
		b.Fatalf("of %d prompts, %d showed live text and %d a text event; want every one to", b.N, len(firstLive), len(durable))
	}
	b.ReportMetric(ms(median(firstLive)), "ms-to-first-live-text")
	b.ReportMetric(ms(median(durable)), "ms-to-text-event")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d prompts: first live text after a median %.0f ms (p90 %.0f; %d of %d prompts showed live text), the durable text event after %.0f ms (the model writes for about 600 ms, its first word 20 ms after the call starts)",
		b.N, ms(median(firstLive)), ms(pct(firstLive, 0.9)), len(firstLive), b.N, ms(median(durable)))
}
