package e2e

import (
	"context"
	"encoding/json"
	"html"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// waitOutput polls what a background starter printed on stderr until it contains want,
// and returns it with how long it took; the test fails after a minute.
func waitOutput(t *testing.T, r *bgStarter, what, want string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		if s := r.Stderr(); strings.Contains(s, want) {
			return s, time.Since(start)
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: no %q after a minute; stderr:\n%s\nstdout:\n%s", what, want, r.Stderr(), r.Stdout())
		}
	}
}

// TestRetryingModelCallIsShown: with the model endpoint a closed port, the run's model
// call is retried for hours, and history says nothing meanwhile. The README's `agent
// --wait` says so within seconds, and again at the next attempt; its `show` and `logs -f`,
// `show --json`, the run resource, the run page and its event stream say it too, with the
// failure's message and never its stack.
func TestRetryingModelCallIsShown(t *testing.T) {
	t.Parallel()
	cmds := readmeBlockCommands(t, `bin/starter agent scribe "Say something." --wait`)
	if len(cmds) != 3 || cmds[0][0] != "agent" || cmds[1][0] != "show" || cmds[2][0] != "logs" {
		t.Fatalf("the README's block is %q, want agent --wait, show and logs -f", cmds)
	}
	p := newPlatform(t)
	p.writeConfig(agentConfig("http://127.0.0.1:1/v1")) // nothing listens on port 1
	p.start()
	g := gateway(t, p)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	wait := p.startStarter(ctx, cmds[0]...)
	defer func() { cancel(); _ = wait.Wait() }()
	out, took := waitOutput(t, wait, "agent --wait", "model call retrying (attempt 2, next in ")
	t.Logf("agent --wait said the model call retries %s after the start", took.Round(10*time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("agent --wait took %s to say the model call retries", took)
	}
	if !strings.Contains(out, "connection refused") {
		t.Errorf("the retry line does not say why:\n%s", out)
	}
	id := runID(t, result{stderr: out})
	if s := wait.Stdout(); strings.TrimSpace(s) != id && s != "" {
		t.Errorf("agent --wait wrote its progress to stdout (want only the run id): %q", s)
	}

	// The next attempt (2 s later, by the model call's backoff) is told too: the follow
	// re-reads the pending call while history stands still.
	waitOutput(t, wait, "agent --wait", "model call retrying (attempt 3, ")
	if n := strings.Count(wait.Stderr(), "(attempt 2,"); n != 1 {
		t.Errorf("attempt 2 printed %d times, want once:\n%s", n, wait.Stderr())
	}

	withID := func(args []string) []string {
		out := slices.Clone(args)
		for i, a := range out {
			out[i] = strings.ReplaceAll(a, "<id>", id)
		}
		return out
	}
	show := p.ok(withID(cmds[1])...)
	var row string
	for _, l := range strings.Split(show, "\n") {
		if strings.HasPrefix(l, "Retrying") {
			row = l
		}
	}
	if !strings.Contains(row, "model call retrying (attempt ") || !strings.Contains(row, "next in ") || !strings.Contains(row, "connection refused") {
		t.Errorf("show has no Retrying row saying what the run waits on:\n%s", show)
	}

	t.Logf("show: %s", row)
	rec := p.record(id)
	if rec.Status != api.StatusRunning || len(rec.Retrying) != 1 {
		t.Fatalf("show --json: status %s, retrying %+v", rec.Status, rec.Retrying)
	}
	r := rec.Retrying[0]
	if r.Activity != api.ActivityCompleteChat || r.Name != "model call" || r.Attempt < 2 || r.GivesUpAt == nil ||
		!strings.Contains(r.LastFailure, "connection refused") || len(r.LastFailure) > api.MaxRetryFailure {
		t.Errorf("show --json retrying %+v", r)
	}
	if strings.Contains(r.LastFailure, "goroutine") || strings.Contains(r.LastFailure, ".go:") {
		t.Errorf("the failure carries a stack: %q", r.LastFailure)
	}

	logs := p.startStarter(ctx, withID(cmds[2])...)
	defer func() { cancel(); _ = logs.Wait() }()
	waitOutput(t, logs, "logs -f", "model call retrying (attempt ")
	if strings.Contains(logs.Stdout(), "retrying") {
		t.Errorf("logs -f put the retry line among the events on stdout:\n%s", logs.Stdout())
	}

	var res struct {
		Retrying []api.PendingActivity `json:"retrying"`
	}
	if err := json.Unmarshal(g.must(200, "GET", "/v1/runs/"+id, nil), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Retrying) != 1 || res.Retrying[0].Activity != api.ActivityCompleteChat || res.Retrying[0].Attempt < 2 {
		t.Errorf("GET /v1/runs/%s retrying %+v", id, res.Retrying)
	}
	page := html.UnescapeString(string(g.must(200, "GET", "/runs/"+id, nil)))
	if !strings.Contains(page, "<li>model call retrying (attempt ") || !strings.Contains(page, "connection refused</li>") {
		t.Errorf("the run page does not say the model call retries:\n%s", page)
	}
	stream := g.stream(id, nil)
	m := stream.until("a retrying event", func(m sseMessage) bool { return m.event == "retrying" }, nil)
	var sr struct {
		ID       string                `json:"id"`
		Retrying []api.PendingActivity `json:"retrying"`
	}
	if err := json.Unmarshal([]byte(m.data), &sr); err != nil || sr.ID != id || len(sr.Retrying) != 1 || sr.Retrying[0].Attempt < 2 {
		t.Errorf("retrying event %s", m.data)
	}
	t.Logf("agent --wait printed on stderr:\n%s", wait.Stderr())
	t.Logf("everything said so %s after the start", time.Since(start).Round(10*time.Millisecond))
}
