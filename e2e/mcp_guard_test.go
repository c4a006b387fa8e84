package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// TestStdioMCPServerDiesWithTheWorker (hardening round two, item 13): a stdio MCP
// server's own children were not under the worker's process guard, so a SIGKILLed
// worker left them running (the server itself saw its stdin close and exited). Now the
// server runs in a guarded process group, and what it started dies with the worker.
func TestStdioMCPServerDiesWithTheWorker(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{mcpCall("local__pid", `{}`)}},
		fakellm.Reply{ToolCalls: []fakellm.Call{mcpCall("local__echo", `{"text":"wait for a human"}`)}},
		fakellm.Reply{Content: "done"},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: spawner
    permissions: {mode: approve, mcp_allow: [local__pid]}
    sandbox: {type: local, dir: ./workspace}
    mcp:
      - name: local
        transport: stdio
        command: /bin/sh
        args: ["-c", 'sleep 300 & echo $! > "$1"; exec "$2"', sh, ` + pidFile + `, ` + mcptest.BuildServer(t) + `]
`)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "spawner", "Start your server."))
	p.waitStatus(id, api.StatusSuspended) // the echo waits for approval: the server is up
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || processGone(child) {
		t.Fatalf("the server's child %q is not running before the kill (%v)", b, err)
	}
	t.Cleanup(func() {
		if p, err := os.FindProcess(child); err == nil {
			_ = p.Kill() // whatever this test finds, it leaves nothing behind
		}
	})
	p.kill()
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the stdio MCP server's child %d outlived the SIGKILLed worker by 10 s", child)
		}
		time.Sleep(20 * time.Millisecond) // polling a process's state, bounded by the deadline
	}
}

// processGone: no process pid, or only its zombie.
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}
