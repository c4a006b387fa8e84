package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// requireBubblewrap skips where bwrap is missing, except under CI (.ci/run installs it).
func requireBubblewrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bwrap is missing under CI (.ci/run installs bubblewrap): %v", err)
		}
		t.Skipf("bubblewrap not installed: %v", err)
	}
}

// TestBubblewrapAgentCannotEscape: an agent on a bubblewrap sandbox, in auto mode, whose
// shell tries to read the worker's config file, another user's files, the worker's
// environment through /proc, to reach a loopback listener of the host and to write
// outside its workspace. Each attempt fails (a command prints ESCAPED only if it got
// through), no secret of the worker reaches a tool result, CapEff is 0, and a file the
// shell wrote in the workspace is there for the file tools and the snapshot.
func TestBubblewrapAgentCannotEscape(t *testing.T) {
	requireBubblewrap(t)
	const secret = "sk-e2e-bubblewrap-3f9a"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	p := newPlatform(t)
	p.extraEnv = append(p.extraEnv, "NEXO_E2E_WORKER_SECRET="+secret)
	if err := os.WriteFile(filepath.Join(p.dir, "secret.txt"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(p.dir, "escaped.txt")
	attempts := []string{
		"cat " + filepath.Join(p.dir, "nexo.yaml") + " && echo ESCAPED",
		"cat " + filepath.Join(p.dir, "secret.txt") + " && echo ESCAPED",
		"cat /etc/shadow && echo ESCAPED",
		"ls /root && echo ESCAPED",
		"cat /proc/1/environ | tr '\\0' '\\n' | grep NEXO_E2E_WORKER_SECRET && echo ESCAPED",
		"cat /proc/[0-9]*/environ | tr '\\0' '\\n' | grep NEXO_E2E_WORKER_SECRET && echo ESCAPED",
		"bash -c 'echo hi > /dev/tcp/127.0.0.1/" + port + "' && echo ESCAPED",
		"echo x > " + outside + " && test -e " + outside + " && ls " + p.dir + " | grep -q nexo.yaml && echo ESCAPED",
		"touch /usr/escaped && echo ESCAPED",
	}
	var script []fakellm.Reply
	for _, a := range attempts {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{shellCall(a)}})
	}
	script = append(script,
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("echo kept > inside.txt; grep CapEff /proc/self/status; env | grep -c . ")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("inside.txt")}},
		fakellm.Reply{Content: "Done."})
	model := fakellm.New(script...)
	cfg := strings.Replace(autoConfig(model.Start(t), "bubblewrap"), "max_turns: 8", "max_turns: 16", 1)
	p.writeConfig(cfg)
	p.start()
	if out := p.output(); !strings.Contains(out, "Bubblewrap sandboxes: enabled") {
		t.Errorf("worker output does not announce bubblewrap:\n%s", out)
	}
	id := strings.TrimSpace(p.ok("agent", "scribe", "Try to get out."))
	rec := p.waitStatus(id, api.StatusDone)

	var results []map[string]any
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			results = append(results, d)
		}
	}
	if len(results) != len(attempts)+2 {
		t.Fatalf("%d tool results, want %d: %s", len(results), len(attempts)+2, eventList(rec))
	}
	for i, a := range attempts {
		c, _ := results[i]["content"].(string)
		if strings.Contains(c, "ESCAPED") || strings.Contains(c, "exit code 0\n") {
			t.Errorf("attempt %q got through: %q", a, c)
		}
	}
	whole, _ := json.Marshal(rec)
	if strings.Contains(string(whole), secret) {
		t.Errorf("the worker's secret is in the run record")
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("a command wrote %s outside its workspace (stat: %v)", outside, err)
	}
	if n := len(accepted); n != 0 {
		t.Errorf("the host's loopback listener accepted %d connections from the sandbox", n)
	}
	c, _ := results[len(attempts)]["content"].(string)
	if !strings.Contains(c, "CapEff:\t0000000000000000") {
		t.Errorf("CapEff in the sandbox: %q, want 0000000000000000", c)
	}
	if c, _ := results[len(attempts)+1]["content"].(string); c != "kept\n" {
		t.Errorf("read_file inside.txt after the shell wrote it = %q, want kept", c)
	}
	if got := p.ok("sandbox", "cat", id, "inside.txt"); got != "kept\n" {
		t.Errorf("sandbox cat inside.txt (the snapshot) = %q, want kept", got)
	}
}

// TestBubblewrapWorkspaceSurvivesHostKill: a bubblewrap run's workspace moves to another
// host when its worker is SIGKILLed between a write and a read, as the other tiers' do.
func TestBubblewrapWorkspaceSurvivesHostKill(t *testing.T) {
	requireBubblewrap(t)
	hostDiesBetweenWriteAndRead(t, "bubblewrap")
}

// TestBubblewrapMissingRefusesStart: with no bwrap on PATH, a worker whose config has a
// bubblewrap agent refuses to start, naming the agent, the field and how to install it.
func TestBubblewrapMissingRefusesStart(t *testing.T) {
	p := newPlatform(t)
	p.writeConfig(autoConfig("http://127.0.0.1:1/v1", "bubblewrap"))
	p.extraEnv = append(p.extraEnv, "PATH="+t.TempDir())
	r := p.runBin(bins.worker, "--dev")
	if r.code == 0 || !strings.Contains(r.stderr, "agents[scribe].sandbox: type bubblewrap") ||
		!strings.Contains(r.stderr, "apt-get install bubblewrap") {
		t.Errorf("worker without bwrap: exit %d, stderr %q; want a refusal naming agents[scribe].sandbox and the package", r.code, r.stderr)
	}
}
