package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/permissions"
	"github.com/nexo-temporal/nexo/runs"
)

// The long-run benchmarks of issue 13 (ARCHITECTURE §10): history that stays flat per
// turn, no payload near Temporal's limits, and model requests that fit the context. Each
// runs its scenario once per iteration; run them with -benchtime 1x. The platform carries
// External Storage, as the worker does; each bench counts the payloads it offloaded (the
// workflows themselves should write none that large) beside the largest one left inline.

// maxPayloadBytes is the size no payload in history may reach (External Storage's
// default threshold; Temporal refuses 2 MB).
const maxPayloadBytes = 256 << 10

// runHistory is one workflow run's history, measured.
type runHistory struct {
	events []*historypb.HistoryEvent
	sizes  []int // proto.Size of each event
	total  int
	// maxPayload is the largest single Payload in any event, and the event type holding it
	// (with the activity type of an ActivityTaskScheduled).
	maxPayload   int
	maxPayloadIn string
	// offloaded counts External Storage references: payloads over its threshold that the
	// bench's client and worker stored outside history (the workflows should leave none).
	offloaded int
}

// readHistory reads and measures the history of run runID of workflow id ("": the latest).
func readHistory(b *testing.B, tc client.Client, id, runID string) runHistory {
	b.Helper()
	var h runHistory
	it := tc.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatalf("history of %s/%s: %v", id, runID, err)
		}
		n := proto.Size(ev)
		h.events, h.sizes, h.total = append(h.events, ev), append(h.sizes, n), h.total+n
		err = proxy.VisitPayloads(context.Background(), ev, proxy.VisitPayloadsOptions{
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				for _, pl := range ps {
					if payloads.IsReference(pl) {
						h.offloaded++
					}
					if size := proto.Size(pl); size > h.maxPayload {
						h.maxPayload, h.maxPayloadIn = size, ev.GetEventType().String()
						if a := activityType(ev); a != "" {
							h.maxPayloadIn += " (" + a + ")"
						}
					}
				}
				return ps, nil
			},
		})
		if err != nil {
			b.Fatalf("payloads of %s/%s event %d: %v", id, runID, ev.GetEventId(), err)
		}
	}
	return h
}

func activityType(ev *historypb.HistoryEvent) string {
	return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
}

// turnBytes splits an agent run's history at each model call: turn k (1-based) holds the
// events from the scheduling of the k-th CompleteChat to the next one (the model call,
// the tool calls it asked for, a compaction before the next call, the workflow tasks in
// between; the last turn also the run's end); turn 0 is what came before the first call.
func turnBytes(h runHistory) []int {
	turns := []int{0}
	for i, ev := range h.events {
		if activityType(ev) == api.ActivityCompleteChat {
			turns = append(turns, 0)
		}
		turns[len(turns)-1] += h.sizes[i]
	}
	return turns
}

func countActivities(h runHistory, name string) int {
	n := 0
	for _, ev := range h.events {
		if activityType(ev) == name {
			n++
		}
	}
	return n
}

// writeFiles writes n files f1.txt … fn.txt of size bytes each into dir, each with its own
// content (so the content-addressed store keeps n blobs, not one).
func writeFiles(b *testing.B, dir string, n, size int) {
	b.Helper()
	for i := 1; i <= n; i++ {
		var sb strings.Builder
		for line := 1; sb.Len() < size; line++ {
			fmt.Fprintf(&sb, "file %d, line %d: the quick brown fox jumps over the lazy dog %08x\n", i, line, i*line)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte(sb.String()[:size]), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// swappableModel is one base URL for the platform whose fake model each iteration
// replaces, so every run starts its script (and its BySequence count) afresh.
func swappableModel(b *testing.B) (string, *atomic.Pointer[fakellm.Server]) {
	var cur atomic.Pointer[fakellm.Server]
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) }))
	b.Cleanup(ts.Close)
	return ts.URL + "/v1", &cur
}

// runAgent runs agent on prompt and waits for its result.
func runAgent(b *testing.B, tc client.Client, agent, prompt string) (string, api.AgentResult, time.Duration) {
	b.Helper()
	in, _ := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: prompt})
	t0 := time.Now()
	run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: benchTaskQueue}, api.WorkflowAgentRun, json.RawMessage(in))
	if err != nil {
		b.Fatal(err)
	}
	var res api.AgentResult
	if err := run.Get(context.Background(), &res); err != nil {
		b.Fatalf("agent %s: %v", agent, err)
	}
	return run.GetID(), res, time.Since(t0)
}

func kib(n int) float64 { return float64(n) / 1024 }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// BenchmarkWallCase is the run that used to hit the payload wall at model call 19: an
// auto agent on a local sandbox whose model reads 100 KB files one after another, 60
// model calls (59 read_file, then the answer). It reports the run's total history, the
// largest single payload in it, and the history bytes of turn 10 and turn 60:
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench WallCase -benchtime 1x -timeout 20m
func BenchmarkWallCase(b *testing.B) {
	const calls, fileBytes = 60, 100 << 10
	ws := b.TempDir()
	writeFiles(b, ws, calls-1, fileBytes)
	url, model := swappableModel(b)
	spec := agents.Spec{Name: "reader", MaxTurns: calls, Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		Sandbox: api.SandboxSpec{Type: api.SandboxLocal, Dir: ws}}
	tc, _ := benchPlatform(b, activities.Deps{LLM: activities.NewLLM(activities.LLMConfig{BaseURL: url, Model: "fake"}), Agents: []agents.Spec{spec}}, nil)
	for range b.N {
		fake := fakellm.New(
			fakellm.Reply{ToolCalls: []fakellm.Call{{Name: agents.ToolReadFile, Arguments: json.RawMessage(`{"path":"f{n}.txt"}`)}}, Repeat: calls - 1},
			fakellm.Reply{Content: "I read all 59 files."},
		)
		fake.SizesOnly = true // the last request alone is 6 MB
		model.Store(fake)
		id, res, took := runAgent(b, tc, "reader", "read f1.txt to f59.txt, one after the other")
		if res.Turns != calls {
			b.Fatalf("turns = %d, want %d", res.Turns, calls)
		}
		h := readHistory(b, tc, id, "")
		turns := turnBytes(h)
		if len(turns) != calls+1 {
			b.Fatalf("history has %d model calls, want %d", len(turns)-1, calls)
		}
		agentMax, _ := fake.MaxTokens()
		ratio := float64(turns[60]) / float64(turns[10])
		b.ReportMetric(kib(h.total), "history-KiB")
		b.ReportMetric(kib(h.maxPayload), "max-payload-KiB")
		b.ReportMetric(float64(turns[10]), "turn10-B")
		b.ReportMetric(float64(turns[60]), "turn60-B")
		b.ReportMetric(ratio, "turn60/turn10")
		b.ReportMetric(0, "ns/op")
		b.Logf("%d model calls in %v; largest model request %d tokens (%.1f MB of content): every file reached the model", calls, took.Round(time.Millisecond), agentMax, float64(agentMax)*4/1e6)
		b.Logf("history: %d events, %.0f KiB in all (target < 1.5 MB: %s); largest payload %.1f KiB in %s (target < 256 KiB: %s); offloaded by External Storage: %d",
			len(h.events), kib(h.total), verdict(h.total < 1_500_000), kib(h.maxPayload), h.maxPayloadIn, verdict(h.maxPayload < maxPayloadBytes), h.offloaded)
		b.Logf("history per turn: turn 10 %d B, turn 59 %d B, turn 60 (the answer and the run's end) %d B; turn 60 / turn 10 = %.2f (target ≤ 1.5: %s); turn 59 / turn 10 = %.2f",
			turns[10], turns[59], turns[60], ratio, verdict(ratio <= 1.5), float64(turns[59])/float64(turns[10]))
	}
}

// BenchmarkCompactedRun is an agent that makes 500 tool calls with 200 KB outputs each
// (read_file on 500 distinct files), with context.max_tokens 128,000 (keep_recent 4): the
// thread passes the budget every few calls and is compacted. It reports the compactions,
// the largest model request the fake model received (tokens estimated as the fake does:
// content bytes / 4) against max_tokens, and the history:
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench CompactedRun -benchtime 1x -timeout 30m
func BenchmarkCompactedRun(b *testing.B) {
	const calls, fileBytes, maxTokens = 500, 200 << 10, 128_000
	ws := b.TempDir()
	writeFiles(b, ws, calls, fileBytes)
	url, model := swappableModel(b)
	spec := agents.Spec{Name: "digger", MaxTurns: calls + 1, Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		Sandbox: api.SandboxSpec{Type: api.SandboxLocal, Dir: ws}, Context: api.ContextPolicy{MaxTokens: maxTokens, KeepRecent: 4}}
	if err := spec.Validate(); err != nil {
		b.Fatal(err)
	}
	tc, _ := benchPlatform(b, activities.Deps{LLM: activities.NewLLM(activities.LLMConfig{BaseURL: url, Model: "fake"}), Agents: []agents.Spec{spec}}, nil)
	for range b.N {
		fake := fakellm.New(
			fakellm.Reply{ToolCalls: []fakellm.Call{{Name: agents.ToolReadFile, Arguments: json.RawMessage(`{"path":"f{n}.txt"}`)}}, Repeat: calls},
			fakellm.Reply{Content: "I read all 500 files."},
		)
		fake.Index, fake.SizesOnly = fakellm.BySequence, true // the thread shrinks when compacted
		model.Store(fake)
		id, res, took := runAgent(b, tc, "digger", "read f1.txt to f500.txt, one after the other")
		if res.Turns != calls+1 {
			b.Fatalf("turns = %d, want %d", res.Turns, calls+1)
		}
		h := readHistory(b, tc, id, "")
		turns := turnBytes(h)
		compactions := countActivities(h, api.ActivityCompactThread)
		events := -1
		if rec, err := runs.New(tc, api.DefaultNamespace, benchTaskQueue).Get(context.Background(), id); err == nil {
			events = countEvents(rec, "context_compacted")
		} else {
			b.Logf("read the run record: %v", err)
		}
		agentMax, compactMax := fake.MaxTokens()
		sizes := fake.Sizes()
		over := 0
		for _, z := range sizes {
			if z.Tokens >= maxTokens {
				over++
			}
		}
		b.ReportMetric(float64(compactions), "compactions")
		b.ReportMetric(float64(agentMax), "max-request-tokens")
		b.ReportMetric(kib(h.total), "history-KiB")
		b.ReportMetric(kib(h.maxPayload), "max-payload-KiB")
		b.ReportMetric(0, "ns/op")
		b.Logf("%d model calls (%d tool calls of %d KiB each) in %v; %d CompactThread activities, %d context_compacted events",
			res.Turns, calls, fileBytes>>10, took.Round(time.Millisecond), compactions, events)
		b.Logf("model requests: %d in all (%d compactions); largest agent request %d tokens, largest compaction request %d tokens, max_tokens %d; requests at or over max_tokens: %d (target 0: %s)",
			len(sizes), compactions, agentMax, compactMax, maxTokens, over, verdict(over == 0))
		b.Logf("history: %d events, %.0f KiB (%.1f KiB per model call); largest payload %.1f KiB in %s (< 256 KiB: %s), %d offloaded; turn 10 %d B, turn 100 %d B, turn 500 %d B",
			len(h.events), kib(h.total), kib(h.total)/float64(res.Turns), kib(h.maxPayload), h.maxPayloadIn, verdict(h.maxPayload < maxPayloadBytes),
			h.offloaded, turns[10], turns[100], turns[500])
	}
}

// BenchmarkLongSession sends NEXO_BENCH_PROMPTS prompts (default 10,000), one after
// another, to one session on the embedded server. The agent has context.max_tokens 2,000,
// so its thread is compacted every couple of hundred prompts, and the session continues as new
// as its history grows. It reports the history bytes of prompts 100, 1,000 and 10,000,
// the largest history of the session's runs, and the prompt round trip (median, p90):
//
//	NEXO_BENCH_PROMPTS=10000 GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench LongSession -benchtime 1x -timeout 60m
func BenchmarkLongSession(b *testing.B) {
	prompts := 10_000
	if v := os.Getenv("NEXO_BENCH_PROMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("NEXO_BENCH_PROMPTS=%q: want a positive number", v)
		}
		prompts = n
	}
	const maxTokens = 2_000
	url, model := swappableModel(b)
	spec := agents.Spec{Name: "assistant", Instructions: "Be brief.", Sandbox: api.SandboxSpec{Type: api.SandboxVirtual},
		Context: api.ContextPolicy{MaxTokens: maxTokens}}
	tc, _ := benchPlatform(b, activities.Deps{LLM: activities.NewLLM(activities.LLMConfig{BaseURL: url, Model: "fake"}), Agents: []agents.Spec{spec}}, nil)
	rc := runs.New(tc, api.DefaultNamespace, benchTaskQueue)
	ctx := context.Background()
	for iter := range b.N {
		fake := fakellm.New(fakellm.Reply{Content: "Noted, reply number {n}.", Repeat: prompts})
		fake.Index, fake.SizesOnly = fakellm.BySequence, true
		model.Store(fake)
		instance := fmt.Sprintf("long-%d", iter)
		id := api.SessionID("assistant", instance)

		round := make([]time.Duration, 0, prompts)
		began := time.Now()
		for i := 1; i <= prompts; i++ {
			t0 := time.Now()
			rep, err := rc.Prompt(ctx, "assistant", instance, fmt.Sprintf("Remember item %d.", i), runs.PromptOptions{})
			if err != nil {
				b.Fatalf("prompt %d: %v", i, err)
			}
			round = append(round, time.Since(t0))
			if want := fmt.Sprintf("Noted, reply number %d.", i); rep.Reply != want {
				b.Fatalf("prompt %d: reply %q, want %q", i, rep.Reply, want)
			}
			if i%1000 == 0 { // progress on stderr: a benchmark's log keeps ten lines
				fmt.Fprintf(os.Stderr, "BenchmarkLongSession: %d prompts, %v\n", i, time.Since(began).Round(time.Second))
			}
		}
		total := time.Since(began)

		// Every run the session had: its history, and the bytes of each prompt in it (from
		// the prompt's update being accepted to the next one's).
		var execs []*workflowservice.ListWorkflowExecutionsResponse
		var token []byte
		for {
			resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: api.DefaultNamespace,
				PageSize: 1000, NextPageToken: token, Query: fmt.Sprintf("WorkflowId = '%s'", id)})
			if err != nil {
				b.Fatal(err)
			}
			execs = append(execs, resp)
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
		perPrompt := make([]int, prompts+1)
		var sum, maxRun, maxRunEvents, maxPayload, compactions, nruns, offloaded int
		maxPayloadIn := ""
		for _, resp := range execs {
			for _, ex := range resp.GetExecutions() {
				nruns++
				h := readHistory(b, tc, id, ex.GetExecution().GetRunId())
				sum += h.total
				if h.total > maxRun {
					maxRun, maxRunEvents = h.total, len(h.events)
				}
				if h.maxPayload > maxPayload {
					maxPayload, maxPayloadIn = h.maxPayload, h.maxPayloadIn
				}
				compactions += countActivities(h, api.ActivityCompactThread)
				offloaded += h.offloaded
				cur := 0
				for j, ev := range h.events {
					if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
						if p := a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads(); len(p) > 0 {
							var req api.PromptRequest
							_ = json.Unmarshal(p[0].GetData(), &req)
							if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(req.Text, "Remember item "), ".")); err == nil && n <= prompts {
								cur = n
							}
						}
					}
					perPrompt[cur] += h.sizes[j] // prompt 0: a run's start before its first prompt
				}
			}
		}
		mean := func(from, to int) float64 {
			s := 0
			for k := from; k <= to; k++ {
				s += perPrompt[k]
			}
			return float64(s) / float64(to-from+1)
		}
		sorted := slices.Clone(round)
		slices.Sort(sorted)
		b.ReportMetric(ms(median(round)), "ms/prompt")
		b.ReportMetric(ms(pct(round, 0.9)), "p90-ms/prompt")
		b.ReportMetric(kib(maxRun), "max-run-history-KiB")
		b.ReportMetric(float64(sum)/float64(prompts), "history-B/prompt")
		b.ReportMetric(0, "ns/op")
		agentMax, _ := fake.MaxTokens()
		b.Logf("%d prompts in %v (context.max_tokens %d): median %.1f ms per prompt, p90 %.1f, p99 %.1f, max %.1f; %d compactions; largest model request %d tokens",
			prompts, total.Round(time.Millisecond), maxTokens, ms(median(round)), ms(pct(round, 0.9)), ms(pct(round, 0.99)), ms(sorted[len(sorted)-1]),
			compactions, agentMax)
		b.Logf("%d runs (continue-as-new); largest history %d events / %.0f KiB (target < 10 MB: %s); largest payload %.1f KiB in %s, %d offloaded; %.0f B of history per prompt over the session (%.0f KiB in all)",
			nruns, maxRunEvents, kib(maxRun), verdict(maxRun < 10_000_000), kib(maxPayload), maxPayloadIn, offloaded, float64(sum)/float64(prompts), kib(sum))
		for _, k := range []int{10, 100, 1_000, 10_000, 100_000} {
			if k <= prompts {
				b.Logf("history of prompt %d: %d B (mean of prompts %d-%d: %.0f B)", k, perPrompt[k], max(1, k-9), k, mean(max(1, k-9), k))
			}
		}
	}
}
