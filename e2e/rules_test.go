package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// rulesConfig is an agent with the three lines "allow this test command, ask for anything
// else, never rm -rf", in the shape the README shows (its `go test ./...` is not on the
// local sandbox's PATH, so the allowed command is `test -d x`).
func rulesConfig(baseURL string) string {
	return `llm:
  base_url: ` + baseURL + `
  model: fake-model
agents:
  - name: builder
    instructions: You run checks.
    sandbox: {type: local, dir: ./workspace}
    max_turns: 6
    permissions:
      mode: approve
      approve_when: [{capability: shell, args_regex: {command: '^test -d x$'}}]
      deny_when: [{capability: shell, args_regex: {command: '\brm\s+-[a-z]*(rf|fr)'}, reason: never rm -rf}]
`
}

// TestArgumentRulesDecideShellCalls: the allowed command runs without a human, rm -rf is
// refused with the rule's reason (x survives), and any other command waits for approval.
func TestArgumentRulesDecideShellCalls(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("test -d x && echo present")}}, // not the allowed command: && widens it
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("test -d x")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("rm -rf x")}},
		fakellm.Reply{Content: "Checked."},
	)
	p := newPlatform(t)
	p.writeConfig(rulesConfig(model.Start(t)))
	if err := os.MkdirAll(filepath.Join(p.dir, "workspace", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.start()

	id := strings.TrimSpace(p.ok("agent", "builder", "Check x."))
	rec := p.waitStatus(id, api.StatusSuspended)
	if n := countEvents(rec, "approval_requested"); n != 1 {
		t.Fatalf("approval_requested = %d, want 1 (the chained command)", n)
	}
	show := p.ok("show", id)
	if !strings.Contains(show, "tool call 1.1: shell (shell)") || !strings.Contains(show, "echo present") {
		t.Errorf("show does not list the pending chained command:\n%s", show)
	}
	r := p.starter("approve", id, "--wait")
	if out := r.stdout + r.stderr; r.code != 0 || !strings.Contains(out, "is done") {
		t.Fatalf("approve --wait:\n%s", out)
	}
	rec = p.record(id)
	if n := countEvents(rec, "approval_requested"); n != 1 {
		t.Errorf("approval_requested = %d, want 1: `test -d x` should run without a human", n)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "workspace", "x")); err != nil {
		t.Errorf("x is gone after the refused rm -rf: %v", err)
	}

	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model requests = %d, want 4", len(reqs))
	}
	toolResult := func(i int) string {
		msgs := reqs[i].Messages
		s, _ := msgs[len(msgs)-1]["content"].(string)
		return s
	}
	if r := toolResult(1); !strings.Contains(r, "present") {
		t.Errorf("the approved chained command's result = %q, want its output", r)
	}
	if r := toolResult(2); !strings.HasPrefix(r, "exit code 0") {
		t.Errorf("the allowed command's result = %q, want it run (exit 0)", r)
	}
	if r, want := toolResult(3), "permission denied: shell (rm -rf x) denied by deny_when[0]: never rm -rf"; !strings.Contains(r, want) {
		t.Errorf("the refused command's result = %q, want %q", r, want)
	}
}
