package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/fakellm"
)

// tokenLimitConfig: the default endpoint is one fake model (no limit); the endpoint
// "small" is another, with a token limit (none when tpm is 0), and the agent "paced" calls it.
func tokenLimitConfig(defaultURL, smallURL string, tpm int) string {
	limits := ""
	if tpm > 0 {
		limits = fmt.Sprintf("\n      limits: {tokens_per_minute: %d}", tpm)
	}
	return fmt.Sprintf(`llm:
  base_url: %s
  model: big-model
  endpoints:
    small:
      base_url: %s
      model: small-model%s
agents:
  - name: paced
    llm: small
    sandbox: {type: virtual}
`, defaultURL, smallURL, limits)
}

// tokenLimitScale is one shape of the fleet token-limit measurement.
type tokenLimitScale struct {
	runs, calls int // agent runs, model calls each (calls-1 tool calls, then an answer)
	tpm         int // limits.tokens_per_minute of the endpoint, and the fake provider's limit
	padding     int // bytes of each run's prompt (a bigger prompt, more tokens a call)
}

// TestFleetTokenLimit: agent runs on two workers share one endpoint's token limit. The
// fake provider answers 429 (with Retry-After) to any request whose usage would pass its
// limit in a sliding minute; the endpoint's limit equals the provider's, and every run
// completes with no failed model call and no 429 at all, although the runs' calls together
// need more than a minute's tokens. NEXO_TOKENLIMIT_FULL=1 runs the README's larger
// measurement; NEXO_TOKENLIMIT_UNPACED=1 is the control, the same load with no limit on
// the endpoint (the provider then answers 429s, each waited out for its Retry-After).
func TestFleetTokenLimit(t *testing.T) {
	slowTest(t, "NEXO_TOKENLIMIT_FULL")
	sc := tokenLimitScale{runs: 20, calls: 2, tpm: 20000, padding: 2000}
	if os.Getenv("NEXO_TOKENLIMIT_FULL") == "1" {
		sc = tokenLimitScale{runs: 20, calls: 4, tpm: 20000, padding: 2000}
	}
	paced := os.Getenv("NEXO_TOKENLIMIT_UNPACED") != "1"

	var script []fakellm.Reply
	for i := 1; i < sc.calls; i++ {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*")}})
	}
	script = append(script, fakellm.Reply{Content: "Nothing here."})
	small := fakellm.New(script...)
	small.SizesOnly = true
	small.LimitTokens(sc.tpm, time.Minute)
	big := fakellm.New(fakellm.Reply{Content: "unused"})

	// One server, two worker processes sharing the blob store: a fleet.
	p1 := newPlatform(t)
	p1.plain = true
	srv := startDevServer(t, devserver.Options{FrontendPort: p1.frontend})
	t.Cleanup(func() { _ = srv.Stop() })
	shared := "NEXO_ARTIFACTS_URL=file://" + filepath.Join(t.TempDir(), "artifacts")
	limit := sc.tpm
	if !paced {
		limit = 0
	}
	cfg := tokenLimitConfig(big.Start(t), small.Start(t), limit)
	p2 := newPlatform(t)
	p2.plain, p2.frontend = true, p1.frontend
	for _, p := range []*platform{p1, p2} {
		p.extraEnv = append(p.extraEnv, shared)
		p.writeConfig(cfg)
		p.start()
		if out := p.output(); paced && !strings.Contains(out, fmt.Sprintf("Model endpoint small: at most %d tokens/minute for the whole fleet", sc.tpm)) {
			t.Fatalf("worker did not announce the endpoint's token limit:\n%s", out)
		}
	}

	c := p1.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	pad := strings.Repeat("Look closely at everything here. ", sc.padding/33+1)[:sc.padding]
	f := runAgentFleet(t, ctx, c, "tokens", "paced", sc.runs, sc.calls, func(i int) string { return fmt.Sprintf("Task %d: look around. %s", i, pad) })
	wall, attempts, retried, extra, failed, workers := f.wall, f.attempts, f.retried, f.extra, f.failed, f.workers
	st := small.TokenStats()
	span := st.Last.Sub(st.First)
	t.Logf("fleet token limit (paced %v): %d runs × %d model calls on 2 workers, endpoint limit %d tokens/min (booked at 90%%), provider %d per minute: wall %s, %d requests (%d accepted, %d answered 429), %d tokens served (%.0f a call), peak %d tokens in one minute, %.0f tokens/minute over %s, %d model calls retried (%d extra attempts), %d failed; calls per worker %v",
		paced, sc.runs, sc.calls, limit, sc.tpm, wall.Round(100*time.Millisecond), st.Accepted+st.Rejected, st.Accepted, st.Rejected,
		st.Tokens, float64(st.Tokens)/float64(max(st.Accepted, 1)), st.Peak, float64(st.Tokens)/span.Minutes(), span.Round(100*time.Millisecond), retried, extra, failed, workers)
	if want := sc.runs * sc.calls; attempts != want || st.Accepted != want {
		t.Errorf("model calls: %d started, provider accepted %d; want %d calls", attempts, st.Accepted, want)
	}
	if failed != 0 {
		t.Errorf("%d model calls failed, want none", failed)
	}
	// The load must need more than a minute's tokens, or the limit was never tested.
	if st.Tokens <= sc.tpm {
		t.Errorf("the runs used %d tokens, not more than the %d a minute allows: the load does not test the limit", st.Tokens, sc.tpm)
	}
	if !paced {
		if st.Rejected == 0 || retried == 0 {
			t.Errorf("unpaced: the provider answered %d requests 429 and %d calls were retried; want some of both", st.Rejected, retried)
		}
		return
	}
	// Retries would hide a limiter that does not work (every 429 is waited out), so the
	// provider must have had no reason to refuse anything.
	if st.Rejected != 0 || st.Peak > sc.tpm {
		t.Errorf("the provider answered %d requests 429 and served %d tokens in one minute; want none over its %d", st.Rejected, st.Peak, sc.tpm)
	}
	if len(workers) < 2 {
		t.Errorf("model calls ran on %d worker(s) %v, want both: the limit must hold for the fleet", len(workers), workers)
	}
	// One limiter for the endpoint, a platform workflow that `starter list` leaves out.
	id := api.TokenLimiterID(api.DefaultTaskQueue, "small")
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatalf("describe the token limiter %s: %v", id, err)
	}
	if typ := desc.GetWorkflowExecutionInfo().GetType().GetName(); typ != api.WorkflowTokenLimiter ||
		desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("%s is a %s workflow, %s; want a running %s", id, typ, desc.GetWorkflowExecutionInfo().GetStatus(), api.WorkflowTokenLimiter)
	}
	// What the limiter's history holds: every reservation (a call's first, then its asks
	// while it waits) and every settle.
	reserves, settles := 0, 0
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			reserves++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			settles++
		}
	}
	t.Logf("the limiter's current execution: %d reservations, %d settles, %d events", reserves, settles, desc.GetWorkflowExecutionInfo().GetHistoryLength())
	// Without a continue-as-new in between (2000 operations), one execution holds them all.
	if info := desc.GetWorkflowExecutionInfo(); info.GetFirstRunId() == info.GetExecution().GetRunId() &&
		(settles != sc.runs*sc.calls || reserves < sc.runs*sc.calls) {
		t.Errorf("the limiter holds %d reservations and %d settles, want a settle and at least one reservation per call (%d)", reserves, settles, sc.runs*sc.calls)
	}
	if out := p1.ok("list"); strings.Contains(out, api.TokenLimiterIDPrefix) || !strings.Contains(out, "tokens-01") {
		t.Errorf("starter list shows the token limiter or misses the runs:\n%s", out)
	}
	if len(big.Requests()) != 0 {
		t.Errorf("the default endpoint got %d requests, want none", len(big.Requests()))
	}
}

// recordTokenLimiter: the agent "paced" on an endpoint with tokens_per_minute makes a tool
// call and answers; each of its two model calls booked its tokens with the endpoint's
// limiter (update nexo.tokens.reserve, which started it) and settled them (signal
// nexo.tokens.settle). The limiter is recorded open, idle after them, and the run done.
func recordTokenLimiter(t *testing.T, r *recorder) {
	small := fakellm.New(fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*")}}, fakellm.Reply{Content: "Nothing here."})
	big := fakellm.New(fakellm.Reply{Content: "unused"})
	p := newPlatform(t)
	p.writeConfig(tokenLimitConfig(big.Start(t), small.Start(t), 100000))
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "paced", "Look around."))
	p.waitStatus(id, api.StatusDone)
	limiter := api.TokenLimiterID(api.DefaultTaskQueue, "small")
	waitQuiet(t, c, limiter, "")
	updates, settles := 0, 0
	it := c.GetWorkflowHistory(context.Background(), limiter, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			updates++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			settles++
		}
	}
	if updates != 2 || settles != 2 {
		t.Fatalf("the limiter's history holds %d reservations and %d settles, want 2 and 2", updates, settles)
	}
	r.save(c, "limiter_open.json", limiter, "")
	r.save(c, "agent_done.json", id, "")
}
