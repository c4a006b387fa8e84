package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// runID is the run id the starter names on stderr ("run <id> ...").
func runID(t *testing.T, r result) string {
	t.Helper()
	i := strings.Index(r.stderr, "run ")
	if i < 0 {
		t.Fatalf("no run id on stderr:\n%s\n%s", r.stdout, r.stderr)
	}
	return strings.Fields(r.stderr[i+4:])[0]
}

// TestAgentOutlastsARateLimitedModel: a provider answering 429 (Retry-After: 1) eight times
// in a row, more than the six attempts a model call used to get, does not fail the run on
// a real server: the call is retried within its budget, after the provider's delay, not
// the policy's backoff (2s, 4s, ... would take over a minute for six retries alone).
func TestAgentOutlastsARateLimitedModel(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "Done at last.", Status: 429, Error: "rate limited: slow down",
		FailTimes: 8, RetryAfter: "1"})
	p := newPlatform(t)
	p.writeConfig(agentConfig(model.Start(t)))
	p.start()

	start := time.Now()
	r := p.starter("agent", "scribe", "Say something.", "--wait")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("agent --wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rec := p.record(runID(t, r))
	if rec.Status != api.StatusDone || !strings.Contains(string(rec.Result), "Done at last.") {
		t.Fatalf("status %s result %s error %v", rec.Status, rec.Result, rec.Error)
	}
	if n := len(model.Requests()); n != 9 {
		t.Errorf("model requests = %d, want 9 (8 answered 429, then the reply)", n)
	}
	if took > 45*time.Second {
		t.Errorf("the run took %s: the provider's Retry-After of 1s was not the delay", took)
	}
	t.Logf("8 rate-limited attempts and the answer in %s", took.Round(100*time.Millisecond))
}

// TestAgentFailsAtOnceOnABadRequest: a 400 is not retried: one request, and the run fails
// with the provider's message and the non-retryable type.
func TestAgentFailsAtOnceOnABadRequest(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Status: 400, Error: "unknown parameter: temperature_x"})
	p := newPlatform(t)
	p.writeConfig(agentConfig(model.Start(t)))
	p.start()

	r := p.starter("agent", "scribe", "Say something.", "--wait")
	if r.code == 0 {
		t.Fatalf("agent --wait succeeded on a 400:\n%s", r.stdout)
	}
	rec := p.record(runID(t, r))
	const want = "agent scribe: model call 1: CompleteChat: model fake-model: HTTP 400: unknown parameter: temperature_x"
	if rec.Status != api.StatusFailed || rec.Error == nil || *rec.Error != want {
		got := "<none>"
		if rec.Error != nil {
			got = *rec.Error
		}
		t.Fatalf("record: status %s error %q, want failed %q", rec.Status, got, want)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("model requests = %d, want 1", n)
	}
	if !strings.Contains(r.stderr, "HTTP 400: unknown parameter") {
		t.Errorf("the starter does not say why:\n%s", r.stderr)
	}
}
