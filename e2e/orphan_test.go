package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// A worker SIGKILLed in the middle of a shell command takes the command with it, and the
// call Temporal retries on the restarted worker tells the model it is a retry.
func TestShellDiesWithKilledWorkerAndRetryIsNoted(t *testing.T) {
	t.Parallel()
	// The first attempt records its shell's pid and sleeps; the retry finds the pid file.
	cmd := `if [ -e sh.pid ]; then echo retried; else echo $$ > sh.pid; sleep 30; touch marker; fi`
	args, _ := json.Marshal(map[string]string{"command": cmd})
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "shell", Arguments: args}}},
		fakellm.Reply{Content: "done"},
	)
	p := newPlatform(t)
	p.extraEnv = append(p.extraEnv, fastFailover...) // the retry comes ~1 s after the kill
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: runner
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
`)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "runner", "Run it."))

	pidFile := filepath.Join(p.dir, "workspace", "sh.pid")
	var pid int
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 0 {
			pid = n
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never started\n%s", p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	p.kill()
	deadline = time.Now().Add(10 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's shell %d still runs 10s after its worker was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}

	p.start()
	p.waitStatus(id, api.StatusDone)
	reqs := model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	got, _ := msgs[len(msgs)-1]["content"].(string)
	// Temporal's retry on the restarted worker says "(attempt 2)"; when the restart takes
	// longer than the host timeout (a loaded machine), the run moves to the restarted
	// worker's host and the call is a new activity there, which says its host was lost.
	if !strings.HasPrefix(got, "note: this call is a retry (") || !strings.Contains(got, "retried") {
		t.Errorf("the model got %q, want the retry's output under a retry note", got)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "workspace", "marker")); err == nil {
		t.Error("the first attempt's command ran on after its worker died")
	}
}
