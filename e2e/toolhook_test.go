package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// hookWorker is the binary of e2e/testdata/hookworker, a custom worker built on package
// platform that registers the tool hooks guard and stamp.
var hookWorker struct {
	once sync.Once
	path string
	err  error
}

func hookWorkerBin(t *testing.T) string {
	t.Helper()
	hookWorker.once.Do(func() {
		hookWorker.path = filepath.Join(bins.dir, "hookworker")
		cmd := exec.Command("go", "build", "-o", hookWorker.path, "./e2e/testdata/hookworker")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			hookWorker.err = &exec.Error{Name: "go build ./e2e/testdata/hookworker: " + string(out), Err: err}
		}
	})
	if hookWorker.err != nil {
		t.Fatal(hookWorker.err)
	}
	return hookWorker.path
}

// TestToolHooksThroughCustomWorker: an agent naming the tool hooks guard and stamp runs on
// a custom worker that registers them. Its write_file under secrets/ is refused by guard
// (nothing is written, a tool_hook event records the denial with its reason, the model
// reads the reason as the tool's error) and its read_file result is decorated by stamp
// (the model reads the stamped text). The shipped worker, which registers no hook,
// refuses the same config at start, naming the agent and the hook.
func TestToolHooksThroughCustomWorker(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{
			mcpCall("write_file", `{"path":"secrets/key.txt","content":"sk-123"}`),
			mcpCall("read_file", `{"path":"notes.md"}`),
		}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: keeper
    instructions: You keep notes.
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
    tool_hooks: [guard, stamp]
    max_turns: 3
`)
	ws := filepath.Join(p.dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("buy milk"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The shipped worker has no hooks: it stops at start and says which are missing.
	refused := p.runBin(bins.worker, "--dev")
	if refused.code == 0 || !strings.Contains(refused.stderr, `agents[keeper].tool_hooks[0]: no tool hook "guard" is registered on this worker (registered: none)`) ||
		!strings.Contains(refused.stderr, `agents[keeper].tool_hooks[1]: no tool hook "stamp"`) {
		t.Fatalf("shipped worker with tool_hooks: exit %d, stderr:\n%s", refused.code, refused.stderr)
	}

	p.bin = hookWorkerBin(t)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "keeper", "Store the key and read the notes."))
	rec := p.waitStatus(id, api.StatusDone)

	const reason = "files under secrets/ are written by people, not agents"
	const wantDenied = "error: write_file was denied by tool hook guard: " + reason
	const wantRead = "buy milk\n[read through the stamp hook]"
	if _, err := os.Stat(filepath.Join(ws, "secrets", "key.txt")); !os.IsNotExist(err) {
		t.Errorf("secrets/key.txt: stat err = %v, want it never written", err)
	}
	res := toolResults(t, rec)
	if !strings.HasPrefix(res["write_file"], wantDenied) {
		t.Errorf("agent_tool_result of write_file = %q, want it to start %q", res["write_file"], wantDenied)
	}
	if res["read_file"] != wantRead {
		t.Errorf("agent_tool_result of read_file = %q, want %q", res["read_file"], wantRead)
	}

	var hooked []map[string]any
	for _, e := range rec.Events {
		if e.Type != api.EventToolHook {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		delete(d, "call_id")
		hooked = append(hooked, d)
	}
	want := map[string]map[string]any{
		"write_file": {"tool": "write_file", "hook": "guard", "action": "denied", "reason": reason},
		"read_file":  {"tool": "read_file", "hook": "stamp", "action": "result"},
	}
	if len(hooked) != len(want) {
		t.Fatalf("tool_hook events = %v, want one denial and one rewritten result", hooked)
	}
	for _, d := range hooked {
		w := want[d["tool"].(string)]
		if len(d) != len(w) {
			t.Errorf("tool_hook event = %v, want %v", d, w)
			continue
		}
		for k, v := range w {
			if d[k] != v {
				t.Errorf("tool_hook event = %v, want %v", d, w)
				break
			}
		}
	}

	// What the model read next.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	var denied, stamped bool
	for _, m := range reqs[1].Messages {
		if m["role"] != "tool" {
			continue
		}
		c, _ := m["content"].(string)
		denied = denied || strings.HasPrefix(c, wantDenied)
		stamped = stamped || c == wantRead
	}
	if !denied || !stamped {
		t.Errorf("the model's next request = %s, want the denial and the stamped read", fmtRequests(reqs[1:]))
	}
}
