package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// typedPlatform starts a worker whose invoicer (the definition of docs/agents.md's Typed
// results, its schema in schemas/invoice.json beside the config) talks to model.
func typedPlatform(t *testing.T, model *fakellm.Server) *platform {
	p := newPlatform(t)
	p.writeConfig("llm:\n  base_url: " + model.Start(t) + "\n  model: fake-model\n" + readmeBlock(t, "yaml", "name: invoicer"))
	if err := os.MkdirAll(filepath.Join(p.dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := readmeBlock(t, "json", `"vendor": {"type": "string"}`)
	if err := os.WriteFile(filepath.Join(p.dir, "schemas", "invoice.json"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	p.start()
	return p
}

// TestAgentTypedResultAfterARetry: the model's first reply is not JSON; the run sends it
// back with the error, the second validates, and the run's result is the object itself,
// in `starter agent --wait` and in `starter show --json`: docs/agents.md's example as
// written.
func TestAgentTypedResultAfterARetry(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: "The vendor is ACME and the total is 12.50."},
		fakellm.Reply{Content: `{"vendor": "ACME", "total": 12.5}`},
	)
	p := typedPlatform(t, model)

	cmds := readmeBlockCommands(t, `bin/starter agent invoicer "Read the invoice." --wait`)
	if len(cmds) != 1 {
		t.Fatalf("docs/agents.md's typed results block has %d commands, want 1", len(cmds))
	}
	r := p.starter(cmds[0]...)
	if r.code != 0 || !strings.Contains(r.stderr, "is done") || !strings.Contains(r.stderr, `result: {"vendor":"ACME","total":12.5}`) {
		t.Fatalf("agent --wait: exit %d, want done with the object as its result\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, api.EventOutputInvalid) || !strings.Contains(r.stderr, "is not JSON") {
		t.Errorf("agent --wait does not show the rejected reply:\n%s", r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	rec := p.record(id)
	var result map[string]any
	if err := json.Unmarshal(rec.Result, &result); err != nil || result["vendor"] != "ACME" || result["total"] != 12.5 || len(result) != 2 {
		t.Errorf("record result = %s (%v), want {vendor, total} alone", rec.Result, err)
	}
	if n := countEvents(rec, api.EventOutputInvalid); n != 1 {
		t.Errorf("%d output_invalid events, want 1", n)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	sys, _ := reqs[0].Messages[0]["content"].(string)
	if !strings.Contains(sys, `"vendor":{"type":"string"}`) {
		t.Errorf("the system prompt does not carry the schema:\n%s", sys)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if content, _ := last["content"].(string); last["role"] != "user" || !strings.Contains(content, "The vendor is ACME") || !strings.Contains(content, "is not JSON") {
		t.Errorf("the retry ends with %v, want a user message with the reply and the error", last)
	}
}

// TestAgentTypedResultRetriesExhausted: two replies that do not validate (output_retries
// 1) fail the run with the validation failure named, on the starter's stderr too.
func TestAgentTypedResultRetriesExhausted(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: `{"vendor": "ACME"}`},
		fakellm.Reply{Content: `{"vendor": "ACME", "total": -3}`},
	)
	p := typedPlatform(t, model)
	r := p.starter("agent", "invoicer", "Read the invoice.", "--wait")
	if r.code == 0 || !strings.Contains(r.stderr, "final reply does not match output_schema after 1 retries") || !strings.Contains(r.stderr, "minimum") {
		t.Fatalf("agent --wait: exit %d, want failed naming the validation failure\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	rec := p.record(strings.TrimSpace(r.stdout))
	if rec.Status != api.StatusFailed || countEvents(rec, api.EventOutputInvalid) != 2 {
		t.Errorf("status %s, %d output_invalid events; want failed and 2", rec.Status, countEvents(rec, api.EventOutputInvalid))
	}
}

// recordAgentTypedRetried records TestAgentTypedResultAfterARetry's run for the replay
// fixtures (e2e/histories_test.go).
func recordAgentTypedRetried(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{Content: "The vendor is ACME and the total is 12.50."},
		fakellm.Reply{Content: `{"vendor": "ACME", "total": 12.5}`},
	)
	p := typedPlatform(t, model)
	id := strings.TrimSpace(p.ok("agent", "invoicer", "Read the invoice."))
	rec := p.waitStatus(id, api.StatusDone)
	var result bytes.Buffer
	if err := json.Compact(&result, rec.Result); err != nil || result.String() != `{"vendor":"ACME","total":12.5}` || countEvents(rec, api.EventOutputInvalid) != 1 {
		t.Fatalf("result %s with %d output_invalid events, want the object after one retry", rec.Result, countEvents(rec, api.EventOutputInvalid))
	}
	r.save(p.dial(), "agent_output_retried.json", id, "")
}
