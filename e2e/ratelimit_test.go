package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/fakellm"
)

// rateLimitConfig: the default endpoint is one fake model (no limit); the endpoint
// "small" is another, with a request limit, and the agent "paced" calls it.
func rateLimitConfig(defaultURL, smallURL string, rpm int) string {
	return fmt.Sprintf(`llm:
  base_url: %s
  model: big-model
  endpoints:
    small:
      base_url: %s
      model: small-model
      limits: {requests_per_minute: %d}
agents:
  - name: paced
    llm: small
    sandbox: {type: virtual}
  - name: plain
    sandbox: {type: virtual}
`, defaultURL, smallURL, rpm)
}

// rateLimitScale is one shape of the fleet rate-limit measurement.
type rateLimitScale struct {
	runs, calls int           // agent runs, model calls each (calls-1 tool calls, then an answer)
	rpm         int           // limits.requests_per_minute of the endpoint
	window      time.Duration // the fake provider's sliding window; it allows rpm per minute
}

// TestFleetRateLimit: agent runs on two workers share one endpoint's request limit. The
// fake provider answers 429 (with Retry-After) to any request over its limit in a sliding
// window; the endpoint's limit equals the provider's, and every run completes with no
// failed model call and no 429 at all. By default the provider allows 1200 requests a
// minute, counted over 15 s (300 per 15 s), and 20 runs make 16 calls each (320 calls,
// more than one window holds: unpaced they would arrive within a few seconds).
// NEXO_RATELIMIT_FULL=1 runs the README's measurement instead: 60 requests a minute counted
// over a minute, 20 runs of 4 calls (80 calls, about 90 s).
//
// NEXO_RATELIMIT_UNPACED=1 is the control: the same load with no limit on the endpoint.
// The provider then answers 429s, each waited out for its Retry-After, and the runs still
// complete with no failed model call, only later.
func TestFleetRateLimit(t *testing.T) {
	slowTest(t, "NEXO_RATELIMIT_FULL")
	sc := rateLimitScale{runs: 20, calls: 16, rpm: 1200, window: 15 * time.Second}
	if os.Getenv("NEXO_RATELIMIT_FULL") == "1" {
		sc = rateLimitScale{runs: 20, calls: 4, rpm: 60, window: time.Minute}
	}
	paced := os.Getenv("NEXO_RATELIMIT_UNPACED") != "1"
	perWindow := int(float64(sc.rpm) * sc.window.Seconds() / 60)

	var script []fakellm.Reply
	for i := 1; i < sc.calls; i++ {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*")}})
	}
	script = append(script, fakellm.Reply{Content: "Nothing here."})
	small := fakellm.New(script...)
	small.SizesOnly = true
	small.LimitRate(perWindow, sc.window)
	big := fakellm.New(fakellm.Reply{Content: "From the default endpoint."})

	// One server, two worker processes sharing the blob store: a fleet.
	p1 := newPlatform(t)
	p1.plain = true
	srv := startDevServer(t, devserver.Options{FrontendPort: p1.frontend})
	t.Cleanup(func() { _ = srv.Stop() })
	shared := "NEXO_ARTIFACTS_URL=file://" + filepath.Join(t.TempDir(), "artifacts")
	limit := sc.rpm
	if !paced {
		limit = 0
	}
	cfg := rateLimitConfig(big.Start(t), small.Start(t), limit)
	p2 := newPlatform(t)
	p2.plain, p2.frontend = true, p1.frontend
	for _, p := range []*platform{p1, p2} {
		p.extraEnv = append(p.extraEnv, shared)
		p.writeConfig(cfg)
		p.start()
		if out := p.output(); paced && !strings.Contains(out, "Model endpoint small: at most "+fmt.Sprint(sc.rpm)+" requests/minute") {
			t.Fatalf("worker did not announce the endpoint's limit:\n%s", out)
		}
	}

	// An agent without llm: reaches the default endpoint only.
	plain := strings.TrimSpace(p1.ok("agent", "plain", "Say hello."))
	if rec := p1.waitStatus(plain, api.StatusDone); !strings.Contains(string(rec.Result), "From the default endpoint.") {
		t.Fatalf("plain agent's result = %s", rec.Result)
	}
	if len(small.Sizes()) != 0 || len(big.Requests()) != 1 {
		t.Fatalf("plain agent: small got %d requests, default %d; want 0 and 1", len(small.Sizes()), len(big.Requests()))
	}

	c := p1.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := runAgentFleet(t, ctx, c, "paced", "paced", sc.runs, sc.calls, func(i int) string { return fmt.Sprintf("Task %d: look around.", i) })
	if q := api.ModelTaskQueue(api.DefaultTaskQueue, "small"); paced && (len(f.queues) != 1 || f.queues[q] == 0) {
		t.Errorf("model calls scheduled on %v, want all on %q", f.queues, q)
	}
	wall, attempts, retried, extra, failed, workers := f.wall, f.attempts, f.retried, f.extra, f.failed, f.workers
	st := small.RateStats()
	span := st.Last.Sub(st.First)
	t.Logf("fleet rate limit (paced %v): %d runs × %d model calls on 2 workers, endpoint limit %d/min, provider %d per %s: wall %s, %d requests (%d accepted, %d answered 429), %d model calls retried (%d extra attempts), %d failed, peak %d requests in one %s window, %.1f requests/minute over %s; calls per worker %v",
		paced, sc.runs, sc.calls, limit, perWindow, sc.window, wall.Round(100*time.Millisecond), st.Accepted+st.Rejected, st.Accepted, st.Rejected,
		retried, extra, failed, st.Peak, sc.window, float64(st.Accepted+st.Rejected)/span.Minutes(), span.Round(100*time.Millisecond), workers)
	if want := sc.runs * sc.calls; attempts != want || st.Accepted != want {
		t.Errorf("model calls: %d started, provider accepted %d; want %d calls", attempts, st.Accepted, want)
	}
	if failed != 0 {
		t.Errorf("%d model calls failed, want none", failed)
	}
	// Retries would hide a pacing that does not work (every 429 is waited out), so the
	// provider must have had no reason to refuse anything.
	if !paced {
		if st.Rejected == 0 || retried == 0 {
			t.Errorf("unpaced: the provider answered %d requests 429 and %d calls were retried; want some of both", st.Rejected, retried)
		}
		return
	}
	if st.Rejected != 0 || st.Peak > perWindow {
		t.Errorf("the provider answered %d requests 429 and saw %d in one %s window; want none over its %d", st.Rejected, st.Peak, sc.window, perWindow)
	}
	if len(workers) < 2 {
		t.Errorf("model calls ran on %d worker(s) %v, want both: the limit must hold for the fleet", len(workers), workers)
	}
	if len(big.Requests()) != 1 {
		t.Errorf("the default endpoint got %d requests, want only the plain agent's", len(big.Requests()))
	}
}

// recordAgentPaced: the agent "paced" on the rate-limited endpoint "small" (version 1 of
// "model-endpoint-queue"): a tool call and an answer, both model calls on the endpoint's
// task queue; then a session of it, idle after two prompts.
func recordAgentPaced(t *testing.T, r *recorder) {
	small := fakellm.New(fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*")}}, fakellm.Reply{Content: "Nothing here."},
		fakellm.Reply{Content: "Still nothing."})
	big := fakellm.New(fakellm.Reply{Content: "unused"})
	p := newPlatform(t)
	p.writeConfig(rateLimitConfig(big.Start(t), small.Start(t), 600))
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "paced", "Look around."))
	p.waitStatus(id, api.StatusDone)
	if n := len(small.Requests()); n != 2 {
		t.Fatalf("the endpoint got %d requests, want 2", n)
	}
	r.save(c, "agent_paced.json", id, "")
	// A session on the same endpoint, idle after two prompts.
	p.ok("session", "prompt", "paced", "desk", "Look around.")
	p.ok("session", "prompt", "paced", "desk", "And now?")
	session := "session:paced:desk"
	waitQuiet(t, c, session, "")
	r.save(c, "session_paced_idle.json", session, "")
}

// TestSessionOnARateLimitedEndpoint: a session of an agent on a rate-limited endpoint
// answers from that endpoint, its model calls on the endpoint's task queue.
func TestSessionOnARateLimitedEndpoint(t *testing.T) {
	t.Parallel()
	small := fakellm.New(fakellm.Reply{Content: "Hello from the small model."}, fakellm.Reply{Content: "Still small."})
	big := fakellm.New(fakellm.Reply{Content: "unused"})
	p := newPlatform(t)
	p.writeConfig(rateLimitConfig(big.Start(t), small.Start(t), 600))
	p.start()
	if out := strings.TrimSpace(p.ok("session", "prompt", "paced", "desk", "Hi.")); out != "Hello from the small model." {
		t.Fatalf("first reply = %q", out)
	}
	if out := strings.TrimSpace(p.ok("session", "prompt", "paced", "desk", "Again.")); out != "Still small." {
		t.Fatalf("second reply = %q", out)
	}
	if len(small.Requests()) != 2 || len(big.Requests()) != 0 {
		t.Fatalf("small got %d requests, default %d; want 2 and 0", len(small.Requests()), len(big.Requests()))
	}
	c := p.dial()
	it := c.GetWorkflowHistory(context.Background(), "session:paced:desk", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	calls := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == api.ActivityCompleteChat {
			calls++
			if q := a.GetTaskQueue().GetName(); q != api.ModelTaskQueue(api.DefaultTaskQueue, "small") {
				t.Errorf("session model call on task queue %q", q)
			}
		}
	}
	if calls != 2 {
		t.Errorf("session scheduled %d model calls, want 2", calls)
	}
	p.ok("session", "close", "paced", "desk")
}

// fleetTally is what a fleet of agent runs did with their model calls, read from their
// histories: calls started (history records a call's last attempt only, so attempts counts
// calls and extra the attempts beyond the first), calls retried, calls failed, calls per
// worker, and the task queues the calls were scheduled on.
type fleetTally struct {
	wall                             time.Duration
	attempts, retried, extra, failed int
	workers, queues                  map[string]int
}

// runAgentFleet starts n runs of agent at once (ids prefix-01...), each with prompt(i),
// waits for all of them, checks each took turns model calls, and tallies their model calls.
func runAgentFleet(t *testing.T, ctx context.Context, c client.Client, prefix, agent string, n, turns int, prompt func(i int) string) fleetTally {
	t.Helper()
	began := time.Now()
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%02d", prefix, i+1), TaskQueue: api.DefaultTaskQueue},
			api.WorkflowAgentRun, api.AgentRunInput{Agent: agent, Prompt: prompt(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = run
	}
	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res api.AgentResult
			errs[i] = run.Get(ctx, &res)
			if errs[i] == nil && res.Turns != turns {
				errs[i] = fmt.Errorf("%d turns, want %d", res.Turns, turns)
			}
		}()
	}
	wg.Wait()
	tally := fleetTally{wall: time.Since(began), workers: map[string]int{}, queues: map[string]int{}}
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %s: %v", runs[i].GetID(), err)
		}
	}
	for _, run := range runs {
		it := c.GetWorkflowHistory(ctx, run.GetID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		scheduled := map[int64]bool{}
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				a := ev.GetActivityTaskScheduledEventAttributes()
				if a.GetActivityType().GetName() == api.ActivityCompleteChat {
					scheduled[ev.GetEventId()] = true
					tally.queues[a.GetTaskQueue().GetName()]++
				}
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				a := ev.GetActivityTaskStartedEventAttributes()
				if scheduled[a.GetScheduledEventId()] {
					tally.attempts++
					if a.GetAttempt() > 1 {
						tally.retried++
						tally.extra += int(a.GetAttempt()) - 1
					}
					tally.workers[a.GetIdentity()]++
				}
			case ev.GetActivityTaskFailedEventAttributes() != nil, ev.GetActivityTaskTimedOutEventAttributes() != nil:
				tally.failed++
			}
		}
	}
	return tally
}
