package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// harnessExample is a platform (not started) set up as the README's "A harness in place
// of the model" says: examples/harness-loop/nexo.yaml as its config and the example's
// harness built to bin/harness-loop beside it, as `go build -o
// examples/harness-loop/bin/harness-loop ./examples/harness-loop` puts it beside the
// example's config.
func harnessExample(t *testing.T) *platform {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "harness-loop", "nexo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	p.writeConfig(string(cfg))
	build := exec.Command("go", "build", "-o", filepath.Join(p.dir, "bin", "harness-loop"), "./examples/harness-loop")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example harness: %v\n%s", err, out)
	}
	return p
}

// TestHarnessLoopExampleAsWritten runs the README's harness commands as printed: the
// harness asks for write_file h.txt, the run waits for its approval, `approve` lets the
// write happen, and the harness answers from the transcript holding the tool's result.
func TestHarnessLoopExampleAsWritten(t *testing.T) {
	t.Parallel()
	want := []string{
		`bin/starter agent harnessed "write hello to h.txt" --wait`,
		`bin/starter approve <id> --wait`,
		`bin/starter logs <id>`,
	}
	cmds := readmeStarterCommands(t, "### A harness in place of the model", "## Sessions")
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("the README's harness commands changed; update this test with them:\n%s", strings.Join(cmds, "\n"))
	}
	p := harnessExample(t)
	p.start()
	id := ""
	run := func(i int) result {
		t.Helper()
		r := p.starter(shellArgs(strings.ReplaceAll(cmds[i], "<id>", id))...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s\nworker:\n%s", cmds[i], r.code, r.stdout, r.stderr, p.output())
		}
		if k := strings.Index(r.stdout+r.stderr, "started agent harnessed run "); k >= 0 {
			id = strings.Fields((r.stdout + r.stderr)[k+len("started agent harnessed run "):])[0]
		}
		return r
	}
	if r := run(0); !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 1.1)") {
		t.Fatalf("the run is not waiting for the write's approval:\n%s\n%s\nworker:\n%s", r.stdout, r.stderr, p.output())
	}
	if _, err := os.Stat(filepath.Join(p.dir, "workspace", "h.txt")); err == nil {
		t.Fatal("h.txt was written before the approval")
	}
	if r := run(1); !strings.Contains(r.stderr, "is done") || !strings.Contains(r.stdout, "Done: the file is written.") {
		t.Errorf("approve --wait:\n%s\n%s", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(p.dir, "workspace", "h.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("workspace/h.txt = %q, %v; want hello", b, err)
	}
	logs := run(2).stdout
	for _, w := range []string{"agent_thinking", "agent_plan", "write h.txt", "agent_text", "I will write hello to h.txt.",
		"agent_tool_call", "approval_requested", "approval_decided", "agent_tool_result", "agent_done"} {
		if !strings.Contains(logs, w) {
			t.Errorf("logs lack %q:\n%s", w, logs)
		}
	}
	rec := p.record(id)
	if rec.Status != api.StatusDone || countEvents(rec, "agent_tool_call") != 1 || countEvents(rec, "agent_usage") != 2 {
		t.Errorf("record: %s, %d tool calls, %d steps paid: %s", rec.Status, countEvents(rec, "agent_tool_call"), countEvents(rec, "agent_usage"), eventList(rec))
	}
	for _, d := range eventsOfType(t, rec, "approval_decided") {
		if d["tool"] != "write_file" || d["approved"] != true {
			t.Errorf("approval_decided = %v, want write_file approved", d)
		}
	}
}

// crashHarness writes a harness (sh) that asks for one shell call appending to
// ran.log, and, once the transcript holds that call's result, records that it started
// (starts.log, outside the workspace) and waits for the file release before it answers:
// the step a test kills the worker in. Each start appends a line to starts.log.
func crashHarness(t *testing.T, dir string) (script, starts, release string) {
	t.Helper()
	starts, release = filepath.Join(dir, "starts.log"), filepath.Join(dir, "release")
	script = filepath.Join(dir, "crash-harness.sh")
	body := `#!/bin/sh
in=$(cat)
case "$in" in
*'"role":"tool"'*)
  echo answer >> ` + starts + `
  while [ ! -e ` + release + ` ]; do sleep 0.05; done
  echo '{"type":"final","text":"appended once"}' ;;
*)
  echo ask >> ` + starts + `
  echo '{"type":"tool_use","id":"a","name":"shell","arguments":{"command":"echo ran >> ran.log"}}' ;;
esac
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, starts, release
}

// TestHarnessLoopSurvivesWorkerKilledMidStep: the worker is killed (SIGKILL) while the
// harness's second step runs; the restarted worker retries the step, the harness starts
// afresh with the transcript (which holds the completed shell call's result), the run
// completes, and the shell call ran once.
func TestHarnessLoopSurvivesWorkerKilledMidStep(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	script, starts, release := crashHarness(t, t.TempDir())
	p.extraEnv = append(p.extraEnv, fastFailover...) // the retry comes ~1 s after the kill
	p.writeConfig(`agents:
  - name: crasher
    loop: {type: harness, command: [` + script + `], timeout: 2m}
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
    max_turns: 4
`)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "crasher", "append a line"))
	waitLines(t, starts, []string{"ask", "answer"}) // the tool ran; the second step is in flight
	p.kill()
	p.start()
	waitLines(t, starts, []string{"ask", "answer", "answer"}) // the retry started the harness afresh
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := waitStatusRetrying(t, p, id, api.StatusDone)
	var res api.AgentResult
	_ = json.Unmarshal(rec.Result, &res)
	if res.Content != "appended once" {
		t.Errorf("result = %s", rec.Result)
	}
	if b, err := os.ReadFile(filepath.Join(p.dir, "workspace", "ran.log")); err != nil || string(b) != "ran\n" {
		t.Errorf("ran.log = %q, %v; want the shell call's one line", b, err)
	}
	if n := countEvents(rec, "agent_tool_call"); n != 1 {
		t.Errorf("agent_tool_call events = %d, want 1: %s", n, eventList(rec))
	}
	// The first step ran once, the second twice (killed, then retried): nothing more.
	waitLines(t, starts, []string{"ask", "answer", "answer"})
}

// waitLines waits until file holds exactly want, one per line.
func waitLines(t *testing.T, file string, want []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		got := strings.Fields(string(b))
		if reflect.DeepEqual(got, want) {
			return
		}
		if len(got) > len(want) || time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q", file, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventsOfType returns the data of rec's events of type typ.
func eventsOfType(t *testing.T, rec api.Record, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range rec.Events {
		if e.Type != typ {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %s: %v", typ, err)
		}
		out = append(out, d)
	}
	return out
}

// recordHarnessLoop: the example's harnessed agent (version 1 of "harness-loop"): its
// step asks for write_file h.txt, approved, then its final answer from the transcript.
func recordHarnessLoop(t *testing.T, r *recorder) {
	p := harnessExample(t)
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "harnessed", "write hello to h.txt"))
	wantPending(t, p, id, "1.1")
	p.ok("approve", id, "--by", "ada")
	p.waitStatus(id, api.StatusDone)
	r.save(c, "agent_harness_approved.json", id, "")
}
