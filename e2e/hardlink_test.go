package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestAgentDirRefusesAHardLink: a hard link planted in an agent's own dir: to a file
// outside it is refused by read_file through the real worker (issue 30, item 9): the model
// gets an error naming the file and why, never the outside file's bytes.
func TestAgentDirRefusesAHardLink(t *testing.T) {
	t.Parallel()
	const secret = "outside-secret-7c1e"
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("hardlink_secret")}},
		fakellm.Reply{Content: "I could not read it."},
	)
	p := newPlatform(t)
	ws := filepath.Join(p.dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(p.dir, "secret.txt")
	if err := os.WriteFile(outside, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(ws, "hardlink_secret")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake-model}
agents:
  - name: reader
    permissions: {mode: read_only}
    sandbox: {type: local, dir: ./workspace}
    max_turns: 3
`)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "reader", "Read hardlink_secret."))
	rec := p.waitStatus(id, api.StatusDone)
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	raw, _ := json.Marshal(reqs[1].Messages)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the model saw the outside file through the hard link: %s", raw)
	}
	if !strings.Contains(string(raw), `read \"hardlink_secret\": file has more than one hard link (2 names)`) {
		t.Errorf("the model's tool result does not name the refusal: %s", raw)
	}
	if out, _ := json.Marshal(rec); strings.Contains(string(out), secret) {
		t.Error("the run record carries the outside file")
	}
}
