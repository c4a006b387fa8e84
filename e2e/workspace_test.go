package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// autoConfig: an agent that writes and runs commands without asking, on a run-owned
// sandbox of the given type.
func autoConfig(modelURL, sandboxType string) string {
	return `llm:
  base_url: ` + modelURL + `
  model: fake-model
agents:
  - name: scribe
    instructions: You write files.
    permissions: {mode: auto}
    sandbox: {type: ` + sandboxType + `}
    max_turns: 8
`
}

// callIDs are the run's tool call ids in the order the calls started.
func callIDs(t *testing.T, rec api.Record) []string {
	t.Helper()
	var ids []string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_call" {
			var d struct {
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, d.CallID)
		}
	}
	return ids
}

// TestWorkspaceNothingWrittenIsLostWhenAHostDies: three workers, each with its own disk
// (its own sandbox root), runs in auto mode that write mine.txt and then read it back with
// no suspend in between (so no snapshot at a wait saves them, as before). The worker that
// holds the runs is SIGKILLed between the write and the read: each run moves to another
// host, restores the snapshot its write left, and its read sees its own write.
func TestWorkspaceNothingWrittenIsLostWhenAHostDies(t *testing.T) {
	const runs = 2
	var script []fakellm.Reply
	for i := 1; i <= runs; i++ {
		task := fmt.Sprintf("task-%d", i)
		script = append(script,
			fakellm.Reply{Prompt: task, ToolCalls: []fakellm.Call{writeCall("mine.txt", "written by "+task)}},
			// Slow, so the holder of the runs dies while this call is in flight.
			fakellm.Reply{Prompt: task, DelayMS: 4000, ToolCalls: []fakellm.Call{readCall("mine.txt")}},
			fakellm.Reply{Prompt: task, Content: "done " + task})
	}
	model := fakellm.New(script...)
	f := newFleet(t, autoConfig(model.Start(t), "local"), 3)
	a := f.workers[0]
	a.start() // alone, so every run claims a's host
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = strings.TrimSpace(f.server.ok("agent", "scribe", fmt.Sprintf("task-%d", i+1)))
	}
	for _, id := range ids {
		waitHostqEvent(t, f.server, id, "agent_tool_result") // the write is done and snapshotted
	}
	a.kill()
	f.workers[1].start()
	f.workers[2].start()
	for i, id := range ids {
		task := fmt.Sprintf("task-%d", i+1)
		rec := f.server.waitStatus(id, api.StatusDone)
		res := hostqToolResults(rec)
		if !strings.Contains(res, `"name":"read_file","ok":true`) || strings.Count(res, "written by "+task) < 1 {
			t.Errorf("run %s (%s): its read after the move did not see its own write:\n%s", id, task, res)
		}
		if strings.Contains(res, "no such file") || strings.Contains(res, "not found") {
			t.Errorf("run %s: a read missed its file:\n%s", id, res)
		}
		restored := eventOf(t, rec, "sandbox_restored")
		if restored["snapshot"] == nil || restored["lost"] != nil {
			t.Errorf("run %s: sandbox_restored = %v, want the write's snapshot, nothing lost", id, restored)
		}
	}
}

// TestWorkspaceFilesAtEveryCall: a run writes a.txt = v1, then v2, then appends a line
// with shell. `sandbox cat --at` shows each call's view (as the call found it), the end
// state has both lines, `files` lists it, `diff` shows the change, and bad input is a
// clear error.
func TestWorkspaceFilesAtEveryCall(t *testing.T) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("a.txt", "v1\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("a.txt", "v2\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("echo appended >> a.txt")}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	p.writeConfig(autoConfig(model.Start(t), "local"))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Write a.txt."))
	rec := p.waitStatus(id, api.StatusDone)
	calls := callIDs(t, rec)
	if len(calls) != 3 {
		t.Fatalf("calls %v, want 3: %s", calls, eventList(rec))
	}
	for _, c := range []struct{ at, want string }{{calls[0], ""}, {calls[1], "v1\n"}, {calls[2], "v2\n"}, {"", "v2\nappended\n"}} {
		args := []string{"sandbox", "cat", id, "a.txt"}
		if c.at != "" {
			args = append(args, "--at", c.at)
		}
		r := p.starter(args...)
		if c.want == "" {
			if r.code != 1 || !strings.Contains(r.stderr, "no file a.txt") {
				t.Errorf("cat a.txt --at %s (before any write): exit %d, stdout %q, stderr %q; want exit 1, no file", c.at, r.code, r.stdout, r.stderr)
			}
			continue
		}
		if r.code != 0 || r.stdout != c.want {
			t.Errorf("sandbox cat %s a.txt --at %q: exit %d, %q (stderr %s), want %q", id, c.at, r.code, r.stdout, r.stderr, c.want)
		}
	}
	files := p.ok("sandbox", "files", id)
	if !strings.Contains(files, "a.txt") || !strings.Contains(files, "15") {
		t.Errorf("sandbox files:\n%s\nwant a.txt of 15 bytes", files)
	}
	diff := p.ok("sandbox", "diff", id, "--from", calls[1], "--to", calls[2])
	if !strings.Contains(diff, "modified a.txt") || !strings.Contains(diff, "-v1") || !strings.Contains(diff, "+v2") {
		t.Errorf("sandbox diff --from %s --to %s:\n%s", calls[1], calls[2], diff)
	}
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sandbox", "cat", id, "a.txt", "--at", "9.9"}, 1, "has no tool call 9.9"},
		{[]string{"sandbox", "cat", id, "../etc/passwd"}, 2, "leads outside the workspace"},
		{[]string{"sandbox", "cat", id, "/etc/passwd"}, 2, "outside the workspace"},
		{[]string{"sandbox", "files", "no-such-run"}, 1, "no-such-run"},
		{[]string{"sandbox", "diff", id}, 2, "--from"},
	} {
		r := p.starter(bad.args...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("starter %v: exit %d, stderr %q; want exit %d naming %q", bad.args, r.code, r.stderr, bad.code, bad.want)
		}
	}
}
