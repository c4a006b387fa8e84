package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// agentConfig is the nexo.yaml of the agent tests: one agent under approve, acting in
// ./workspace, talking to the fake model.
func agentConfig(baseURL string) string {
	return `llm:
  base_url: ` + baseURL + `
  model: fake-model
  api_key_env: NEXO_TEST_LLM_KEY
agents:
  - name: scribe
    instructions: You write files when asked.
    permissions: {mode: approve}
    sandbox: {type: local, dir: ./workspace}
    produces: ["notes.md"]
    max_turns: 5
`
}

func (p *platform) writeConfig(yaml string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "nexo.yaml"), []byte(yaml), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func writeNotes(content string) fakellm.Call {
	args, _ := json.Marshal(map[string]string{"path": "notes.md", "content": content})
	return fakellm.Call{Name: "write_file", Arguments: args}
}

func TestAgentApprovalLetsTheWriteHappen(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("hello from the agent")}},
		fakellm.Reply{Content: "I wrote notes.md."},
	)
	p := newPlatform(t)
	p.writeConfig(agentConfig(model.Start(t)))
	p.extraEnv = []string{"NEXO_TEST_LLM_KEY=sk-test-secret"}
	p.start()

	r := p.starter("agent", "scribe", "Write a note.", "--wait")
	if r.code != 0 || !strings.Contains(r.stderr, "suspended: approval of write_file (call 1.1)") {
		t.Fatalf("agent --wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	if strings.TrimSpace(r.stdout) != id {
		t.Errorf("agent --wait stdout = %q, want the run id alone (the rest on stderr)", r.stdout)
	}
	show := p.ok("show", id)
	if !strings.Contains(show, "tool call 1.1: write_file (write)") || !strings.Contains(show, "hello from the agent") {
		t.Errorf("show does not list the pending call with its arguments:\n%s", show)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "workspace", "notes.md")); err == nil {
		t.Fatal("the file was written before the approval")
	}

	ar := p.starter("approve", id, "--wait")
	if ar.code != 0 || !strings.Contains(ar.stderr, "approved tool call 1.1 (write_file)") || !strings.Contains(ar.stderr, "is done") ||
		!strings.HasPrefix(ar.stdout, "{") || strings.Count(ar.stdout, "\n") != 1 {
		t.Errorf("approve --wait: exit %d, want the result alone on stdout\nstdout: %s\nstderr: %s", ar.code, ar.stdout, ar.stderr)
	}
	b, err := os.ReadFile(filepath.Join(p.dir, "workspace", "notes.md"))
	if err != nil || string(b) != "hello from the agent" {
		t.Fatalf("notes.md = %q, %v", b, err)
	}
	rec := p.record(id)
	var res api.AgentResult
	_ = json.Unmarshal(rec.Result, &res)
	if rec.Status != api.StatusDone || res.Content != "I wrote notes.md." || res.Turns != 2 {
		t.Errorf("status %s result %s", rec.Status, rec.Result)
	}
	for _, ev := range []string{"agent_tool_call", "approval_requested", "approval_decided", "agent_tool_result", "agent_done"} {
		if countEvents(rec, ev) != 1 {
			t.Errorf("%s events = %d, want 1", ev, countEvents(rec, ev))
		}
	}
	if a, ok := rec.FindArtifact("notes.md"); !ok || a.Content == nil || *a.Content != "hello from the agent" {
		t.Errorf("produces notes.md not recorded as an artifact: %+v", rec.Artifacts)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || reqs[0].Auth != "Bearer sk-test-secret" || reqs[0].Model != "fake-model" {
		t.Fatalf("model requests = %d (auth %q)", len(reqs), reqs[0].Auth)
	}
	// The key is the worker's alone: not in history, events, or logs.
	if strings.Contains(p.output(), "sk-test-secret") || strings.Contains(p.ok("show", id, "--json"), "sk-test-secret") {
		t.Error("the API key leaked into the worker's output or the run record")
	}
}

func TestAgentDenialReachesTheModel(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("x")}},
		fakellm.Reply{Content: "Understood; I did not write it."},
	)
	p := newPlatform(t)
	p.writeConfig(agentConfig(model.Start(t)))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Write a note."))
	p.waitStatus(id, api.StatusSuspended)
	p.ok("deny", id, "--reason", "not in production hours")
	rec := p.waitStatus(id, api.StatusDone)
	if _, err := os.Stat(filepath.Join(p.dir, "workspace", "notes.md")); err == nil {
		t.Error("the denied write happened")
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	toolMsg, _ := last[len(last)-1]["content"].(string)
	if !strings.Contains(toolMsg, "not in production hours") {
		t.Errorf("the model got %q, want the denial reason", toolMsg)
	}
	if countEvents(rec, "approval_decided") != 1 {
		t.Errorf("approval_decided events = %d", countEvents(rec, "approval_decided"))
	}
}

// TestAgentSurvivesWorkerKilledMidModelCall: the worker dies while the model is
// answering; the restarted worker retries the call (heartbeat timeout) and the run ends.
func TestAgentSurvivesWorkerKilledMidModelCall(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: "a slow answer", DelayMS: 60_000},
	)
	p := newPlatform(t)
	p.extraEnv = append(p.extraEnv, fastFailover...) // the retry comes ~1 s after the kill
	p.writeConfig(agentConfig(model.Start(t)))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Think slowly."))
	deadline := time.Now().Add(30 * time.Second)
	for len(model.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the model never got a request\n%s", p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()
	p.start()
	rec := p.waitStatus(id, api.StatusDone)
	var res api.AgentResult
	_ = json.Unmarshal(rec.Result, &res)
	if res.Content != "a slow answer" {
		t.Errorf("result = %s", rec.Result)
	}
	if n := len(model.Requests()); n < 2 {
		t.Errorf("model requests = %d, want the interrupted one and its retry", n)
	}
	if countEvents(rec, "agent_usage") != 1 {
		t.Errorf("agent_usage events = %d, want 1 (one model call paid for)", countEvents(rec, "agent_usage"))
	}
	// The worker's worker.activity_heartbeat_timeout reached the model call Temporal retried.
	if got := heartbeatTimeouts(t, p, id, api.ActivityCompleteChat); len(got) == 0 || got[0] != time.Second {
		t.Errorf("heartbeat timeouts of %s = %v, want 1s (NEXO_WORKER_ACTIVITY_HEARTBEAT_TIMEOUT)", api.ActivityCompleteChat, got)
	}
}
