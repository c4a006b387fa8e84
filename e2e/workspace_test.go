package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

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
func callIDs(t testing.TB, rec api.Record) []string {
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
	t.Parallel()
	hostDiesBetweenWriteAndRead(t, "local")
}

// TestWorkspaceDockerHostDies: the same on the Docker tier. The new host makes a new
// container and restores the snapshot into it; the killed host's container stays until
// its host comes back (the test removes it).
func TestWorkspaceDockerHostDies(t *testing.T) {
	// Serial: the Docker engine and its reapers are shared with the other Docker tests.
	requireSandboxImage(t)
	hostDiesBetweenWriteAndRead(t, "docker")
}

func hostDiesBetweenWriteAndRead(t *testing.T, tier string) {
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
	f := newFleet(t, autoConfig(model.Start(t), tier), 3)
	for _, w := range f.workers {
		w.extraEnv = append(w.extraEnv, fastFailover...)
	}
	a := f.workers[0]
	a.start() // alone, so every run claims a's host
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = strings.TrimSpace(f.server.ok("agent", "scribe", fmt.Sprintf("task-%d", i+1)))
	}
	if tier == "docker" {
		t.Cleanup(func() {
			for _, id := range ids {
				for _, c := range runContainers(t, id) {
					_ = exec.Command("docker", "rm", "-f", "-v", c).Run()
				}
			}
		})
	}
	for _, id := range ids {
		waitHostqEvent(t, f.server, id, "agent_tool_result") // the write is done and snapshotted
	}
	a.kill()
	f.workers[1].start()
	f.workers[2].start()
	for i, id := range ids {
		task := fmt.Sprintf("task-%d", i+1)
		rec := waitStatusRetrying(t, f.server, id, api.StatusDone)
		reads := 0
		for _, e := range rec.Events {
			var d struct{ Name, Content string }
			if e.Type == "agent_tool_result" && json.Unmarshal(e.Data, &d) == nil && d.Name == "read_file" {
				reads++
				// A read that went to the dead host runs again on the new one under the retry
				// note of a call whose host was lost; after it, the run's own write, whole.
				got := d.Content
				if strings.HasPrefix(got, "note: this call is a retry (its host was lost") {
					_, got, _ = strings.Cut(got, "\n")
				}
				if got != "written by "+task {
					t.Errorf("run %s (%s): its read after the move = %q, want its own write", id, task, d.Content)
				}
			}
		}
		if reads != 1 || countEvents(rec, "sandbox_host_lost") != 1 {
			t.Errorf("run %s: %d reads, %d moves; want 1 and 1: %s", id, reads, countEvents(rec, "sandbox_host_lost"), eventList(rec))
		}
		restored := eventOf(t, rec, "sandbox_restored")
		if restored["snapshot"] == nil || restored["lost"] != nil {
			t.Errorf("run %s: sandbox_restored = %v, want the write's snapshot, nothing lost", id, restored)
		}
	}
}

// waitStatusRetrying waits for run id to reach want, while queries may fail for a while
// (the run's workflow task was sticky on a killed worker until Temporal hands it on).
func waitStatusRetrying(t *testing.T, p *platform, id string, want api.Status) api.Record {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := p.starter("show", id, "--json")
		var rec api.Record
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &rec) == nil && rec.Status == want {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: not %s after 90s: exit %d, %s %s", id, want, r.code, r.stderr, eventList(rec))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWorkspaceFilesAtEveryCall: a run writes a.txt = v1, then v2, then appends a line
// with shell. `sandbox cat --at` shows each call's view (as the call found it), the end
// state has both lines, `files` lists it, `diff` shows the change, and bad input is a
// clear error.
func TestWorkspaceFilesAtEveryCall(t *testing.T) {
	t.Parallel()
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

	// Fork at the shell call: the thread before the model asked for it, the workspace it
	// found (v2); the model asked again appends exactly once. The source is untouched.
	sourceEvents := len(rec.Events)
	fid := strings.TrimSpace(p.ok("fork", id, "--at", calls[2]))
	frec := p.waitStatus(fid, api.StatusDone)
	if got := p.ok("sandbox", "cat", fid, "a.txt"); got != "v2\nappended\n" {
		t.Errorf("the fork's a.txt = %q, want v2 with one appended line", got)
	}
	if d := eventOf(t, frec, "forked_from"); d["run"] != id || d["call"] != calls[2] {
		t.Errorf("forked_from = %v, want run %s call %s", d, id, calls[2])
	}
	if n := len(callIDs(t, frec)); n != 1 {
		t.Errorf("the fork ran %d tool calls, want 1 (the shell, asked again): %s", n, eventList(frec))
	}
	if got := p.ok("sandbox", "cat", id, "a.txt"); got != "v2\nappended\n" || len(p.record(id).Events) != sourceEvents {
		t.Errorf("the source changed: a.txt %q, %d events (was %d)", got, len(p.record(id).Events), sourceEvents)
	}
	// Fork with the call re-issued, edited: no model call for it, the edited command runs.
	// With --wait, stdout is the new id alone and the rest stderr (issue 29 item 9).
	fw := p.starter("fork", id, "--at", calls[2], "--id", "edited-fork", "--args", `{"command":"echo edited >> a.txt"}`, "--wait")
	eid := strings.TrimSpace(fw.stdout)
	if fw.code != 0 || fw.stdout != "edited-fork\n" || !strings.Contains(fw.stderr, "run edited-fork is done") {
		t.Errorf("fork --id edited-fork --wait: exit %d, stdout %q (want the id alone), stderr %s", fw.code, fw.stdout, fw.stderr)
	}
	p.waitStatus(eid, api.StatusDone)
	if got := p.ok("sandbox", "cat", eid, "a.txt"); got != "v2\nedited\n" {
		t.Errorf("the edited fork's a.txt = %q, want v2 then the edited line", got)
	}
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"fork", id, "--at", "7.1"}, 1, "has no tool call 7.1"},
		{[]string{"fork", "no-such-run", "--at", "1.1"}, 1, "no-such-run"},
		{[]string{"fork", id}, 2, "--at"},
		{[]string{"fork", id, "--at", calls[2], "--id", "edited-fork"}, 1, "edited-fork"},
		{[]string{"fork", id, "--at", calls[2], "--args", "[1]"}, 1, "not a JSON object"},
	} {
		r := p.starter(bad.args...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("starter %v: exit %d, stderr %q; want exit %d naming %q", bad.args, r.code, r.stderr, bad.code, bad.want)
		}
	}
}

// recordWorkspaceFork: a run writes a.txt twice and appends with shell (a snapshot after
// each), then two forks at the shell call: asked again, and re-issued with edited args.
func recordWorkspaceFork(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("a.txt", "v1\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("a.txt", "v2\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("echo appended >> a.txt")}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	p.writeConfig(autoConfig(model.Start(t), "local"))
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Write a.txt."))
	p.waitStatus(id, api.StatusDone)
	fid := strings.TrimSpace(p.ok("fork", id, "--at", "3.1"))
	p.waitStatus(fid, api.StatusDone)
	eid := strings.TrimSpace(p.ok("fork", id, "--at", "3.1", "--args", `{"command":"echo edited >> a.txt"}`))
	p.waitStatus(eid, api.StatusDone)
	if got := p.ok("sandbox", "cat", eid, "a.txt"); got != "v2\nedited\n" {
		t.Fatalf("the edited fork's a.txt = %q", got)
	}
	r.save(c, "agent_write_shell.json", id, "")
	r.save(c, "agent_forked.json", fid, "")
	r.save(c, "agent_forked_edited.json", eid, "")
}
