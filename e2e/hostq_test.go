package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/fakellm"
)

// hostqConfig: an agent on a run-owned local (or virtual) sandbox that writes notes.md
// and one-letter .md files without asking and needs approval for anything else it changes
// (shell commands, gate.md).
func hostqConfig(modelURL, sandboxType string) string {
	return `llm:
  base_url: ` + modelURL + `
  model: fake-model
agents:
  - name: hopper
    instructions: You keep notes.
    permissions:
      mode: approve
      approve_when:
        - {capability: write, detail: "notes.md"}
        - {capability: write, detail: "?.md"}
    sandbox: {type: ` + sandboxType + `}
    max_turns: 8
`
}

// fleet is an embedded Temporal server with worker processes on it, each in its own
// directory (its own sandbox root, so its own host), sharing one artifact store.
type fleet struct {
	t       *testing.T
	server  *platform // the first worker; the starter runs from its directory
	workers []*platform
}

func newFleet(t *testing.T, cfg string, n int) *fleet {
	t.Helper()
	first := newPlatform(t)
	first.plain = true
	first.releasePorts()
	srv := startDevServer(t, devserver.Options{FrontendPort: first.frontend})
	t.Cleanup(func() { _ = srv.Stop() })
	f := &fleet{t: t, server: first}
	for i := 0; i < n; i++ {
		w := first
		if i > 0 {
			w = newPlatform(t)
			w.frontend, w.plain = first.frontend, true
		}
		w.extraEnv = append(w.extraEnv, "NEXO_ARTIFACTS_URL=file://"+first.artifactsDir(), "NEXO_SANDBOX_HOST_TIMEOUT=3s")
		w.writeConfig(cfg)
		f.workers = append(f.workers, w)
	}
	return f
}

// workspace is the per-run directory of run id on worker w.
func workspace(w *platform, id string) string {
	return filepath.Join(w.dir, ".nexo", "workspaces", id)
}

func hostqToolResults(rec api.Record) string {
	var b strings.Builder
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			b.Write(e.Data)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func eventOf(t *testing.T, rec api.Record, typ string) map[string]any {
	t.Helper()
	for _, e := range rec.Events {
		if e.Type == typ {
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no %s event: %s", typ, eventList(rec))
	return nil
}

func eventList(rec api.Record) string {
	var out []string
	for _, e := range rec.Events {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

// TestHostQueueTwoWorkersKeepEachRunsFiles: two workers share the load; runs on the
// default local sandbox alternate write_file and read_file and each reads back exactly its
// own files, whichever worker picked up its model calls, and every run's directory lives
// on one host only.
func TestHostQueueTwoWorkersKeepEachRunsFiles(t *testing.T) {
	t.Parallel()
	const runs = 6
	var script []fakellm.Reply
	for i := 1; i <= runs; i++ {
		task := fmt.Sprintf("task-%d", i)
		script = append(script,
			fakellm.Reply{Prompt: task, ToolCalls: []fakellm.Call{writeCall("a.md", "alpha of "+task)}},
			fakellm.Reply{Prompt: task, ToolCalls: []fakellm.Call{readCall("a.md"), writeCall("b.md", "beta of "+task)}},
			fakellm.Reply{Prompt: task, ToolCalls: []fakellm.Call{readCall("b.md"), readCall("a.md")}},
			fakellm.Reply{Prompt: task, Content: "done " + task})
	}
	model := fakellm.New(script...)
	f := newFleet(t, hostqConfig(model.Start(t), "local"), 2)
	for _, w := range f.workers {
		w.start()
	}
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = strings.TrimSpace(f.server.ok("agent", "hopper", fmt.Sprintf("task-%d", i+1)))
	}
	hosts := map[int]int{}
	for i, id := range ids {
		task := fmt.Sprintf("task-%d", i+1)
		rec := f.server.waitStatus(id, api.StatusDone)
		res := hostqToolResults(rec)
		if strings.Count(res, "alpha of "+task) < 2 || !strings.Contains(res, "beta of "+task) {
			t.Errorf("run %s (%s) read back:\n%s", id, task, res)
		}
		for j := 1; j <= runs; j++ {
			if other := fmt.Sprintf("of task-%d", j); j != i+1 && strings.Contains(res, other) {
				t.Errorf("run %s read another run's file (%s)", id, other)
			}
		}
		if lost := countEvents(rec, "sandbox_host_lost"); lost != 0 {
			t.Errorf("run %s moved %d times with both workers up", id, lost)
		}
		for k, w := range f.workers {
			if _, err := os.Stat(workspace(w, id)); err == nil {
				t.Errorf("run %s left its directory on worker %d", id, k)
			}
		}
		var memoHost string
		desc, err := f.server.dial().DescribeWorkflowExecution(t.Context(), id, "")
		if err == nil {
			if p, ok := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[api.MemoSandboxHost]; ok {
				_ = json.Unmarshal(p.GetData(), &memoHost)
			}
		}
		for k, w := range f.workers {
			if strings.Contains(w.output(), "host queue "+memoHost) && memoHost != "" {
				hosts[k]++
			}
		}
	}
	t.Logf("runs per host: %v", hosts)
	if len(hosts) != 2 && runs > 1 {
		// Both workers poll the shared queue; with six runs both claim some (not a hard
		// guarantee of Temporal's matching, so logged, not failed).
		t.Logf("every run claimed the same host")
	}
}

// TestHostQueueKilledWorkerRunMovesAndIsReaped: a run suspended for approval whose
// worker is SIGKILLed finishes on the other worker with its files restored from the
// snapshot taken at the suspend (sandbox_restored names parked_at); when the killed
// worker comes back, its leftover directory of the moved run is reaped while the run is
// still open.
func TestHostQueueKilledWorkerRunMovesAndIsReaped(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "written on the first host")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("cat notes.md")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("gate.md", "second wait")}},
		fakellm.Reply{Content: "All there."},
	)
	f := newFleet(t, hostqConfig(model.Start(t), "local"), 2)
	a, b := f.workers[0], f.workers[1]
	for _, w := range f.workers {
		w.extraEnv = append(w.extraEnv, fastFailover...)
	}
	a.start() // alone, so the run claims a's host
	id := strings.TrimSpace(f.server.ok("agent", "hopper", "Keep notes."))
	rec := waitHostqEvent(t, f.server, id, "sandbox_snapshot") // taken as the wait starts
	if d := eventOf(t, rec, "sandbox_snapshot"); d["reason"] != "suspend" {
		t.Fatalf("sandbox_snapshot = %v", d)
	}
	if b, err := os.ReadFile(filepath.Join(workspace(a, id), "notes.md")); err != nil || string(b) != "written on the first host" {
		t.Fatalf("notes.md on the first host = %q, %v", b, err)
	}
	a.kill()
	b.start()
	// The run's workflow task was sticky on the killed worker: the first queries can time
	// out until Temporal hands the run to b.
	approveRetrying(t, f.server, id)
	rec = waitPendingCall(t, f.server, id, "3.1") // the gate.md write waits, on b
	lost := eventOf(t, rec, "sandbox_host_lost")
	restored := eventOf(t, rec, "sandbox_restored")
	if lost["from"] == lost["to"] || restored["parked_at"] == nil || restored["archive_bytes"].(float64) <= 0 {
		t.Errorf("sandbox_host_lost = %v, sandbox_restored = %v", lost, restored)
	}
	if res := hostqToolResults(rec); !strings.Contains(res, "written on the first host") {
		t.Errorf("cat notes.md on the new host:\n%s", res)
	}
	if _, err := os.Stat(filepath.Join(workspace(b, id), "notes.md")); err != nil {
		t.Errorf("notes.md not restored on the new host: %v", err)
	}

	// The first worker comes back (same directory, same host id): its copy of the moved,
	// still open run goes.
	a.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(workspace(a, id)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the moved run's directory on the old host was not reaped:\n%s", a.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(workspace(b, id), "notes.md")); err != nil {
		t.Errorf("the new host's copy went too: %v", err)
	}
	f.server.ok("approve", id)
	rec = f.server.waitStatus(id, api.StatusDone)
	if countEvents(rec, "sandbox_host_lost") != 1 {
		t.Errorf("events: %s", eventList(rec))
	}
}

// TestHostQueueVirtualSandboxSurvivesRestart: a virtual sandbox (in the worker's memory)
// comes back after its worker restarts: the restarted worker keeps its host id and fills
// the sandbox from the snapshot taken when the run suspended.
func TestHostQueueVirtualSandboxSurvivesRestart(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "kept in memory")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("gate.md", "wait here")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("notes.md")}},
		fakellm.Reply{Content: "Still there."},
	)
	f := newFleet(t, hostqConfig(model.Start(t), "virtual"), 1)
	w := f.workers[0]
	w.start()
	id := strings.TrimSpace(f.server.ok("agent", "hopper", "Keep notes."))
	waitHostqEvent(t, f.server, id, "sandbox_snapshot")
	before := hostLine(w.output())
	w.stop()
	w.start()
	if after := hostLine(w.output()); after != before || before == "" {
		t.Errorf("host after restart %q, before %q: want the same", after, before)
	}
	f.server.ok("approve", id)
	rec := f.server.waitStatus(id, api.StatusDone)
	if res := hostqToolResults(rec); !strings.Contains(res, "kept in memory") {
		t.Errorf("read after the restart:\n%s", res)
	}
	if countEvents(rec, "sandbox_host_lost") != 0 {
		t.Errorf("a restart on the same host moved the run: %s", eventList(rec))
	}
}

// hostLine is the last "Sandbox host:" line a worker printed.
func hostLine(out string) string {
	last := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Sandbox host: ") {
			last = l
		}
	}
	return last
}

// waitPendingCall waits until run id waits for the approval of callID.
func waitPendingCall(t *testing.T, p *platform, id, callID string) api.Record {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		rec := p.record(id)
		if a, ok := rec.Approval(); ok && a.CallID == callID && rec.Status == api.StatusSuspended {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s does not wait for call %s: status %s, events %s", id, callID, rec.Status, eventList(rec))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitHostqEvent waits until run id's record holds an event of type typ.
func waitHostqEvent(t *testing.T, p *platform, id, typ string) api.Record {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec := p.record(id)
		if countEvents(rec, typ) > 0 {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s has no %s event after 60s: %s", id, typ, eventList(rec))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// approveRetrying approves run id's pending call, retrying while no worker answers yet.
func approveRetrying(t *testing.T, p *platform, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := p.starter("approve", id)
		if r.code == 0 {
			return
		}
		if time.Now().After(deadline) || !strings.Contains(r.stderr, "no worker answered") {
			t.Fatalf("starter approve %s: exit %d: %s", id, r.code, r.stderr)
		}
	}
}

// recordHostqLocal: the hopper agent on its own local sandbox writes notes.md, waits for
// approval of a shell command (its workspace snapshotted as the wait starts), then reads
// the file back.
func recordHostqLocal(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "on my host")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("cat notes.md")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("notes.md")}},
		fakellm.Reply{Content: "Read it back."},
	)
	p := newPlatform(t)
	p.writeConfig(hostqConfig(model.Start(t), "local"))
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "hopper", "Keep notes."))
	waitHostqEvent(t, p, id, "sandbox_snapshot")
	p.ok("approve", id, "--by", "ada")
	rec := p.waitStatus(id, api.StatusDone)
	if res := hostqToolResults(rec); strings.Count(res, "on my host") < 2 {
		t.Fatalf("tool results:\n%s", res)
	}
	r.save(c, "agent_local_write_read.json", id, "")
}

// TestHostQueueDockerKilledWorkerMoves: the Docker tier on two workers of one engine: a
// run whose worker is SIGKILLed while it waits gets a fresh container on the other worker
// with its workspace from the suspend's snapshot; when it ends no container of it is left,
// including the killed worker's.
func TestHostQueueDockerKilledWorkerMoves(t *testing.T) {
	// Serial: the Docker engine and its reapers are shared with the other Docker tests.
	requireSandboxImage(t)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "written in the first container")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("cat notes.md")}},
		fakellm.Reply{Content: "All there."},
	)
	f := newFleet(t, hostqConfig(model.Start(t), "docker"), 2)
	a, b := f.workers[0], f.workers[1]
	for _, w := range f.workers {
		w.extraEnv = append(w.extraEnv, fastFailover...)
	}
	a.start()
	id := strings.TrimSpace(f.server.ok("agent", "hopper", "Keep notes."))
	waitHostqEvent(t, f.server, id, "sandbox_snapshot")
	first := runContainers(t, id)
	if len(first) != 1 {
		t.Fatalf("containers of the run before the kill: %v", first)
	}
	a.kill()
	b.start()
	approveRetrying(t, f.server, id)
	// A query may still go to the killed worker's sticky queue and fail until Temporal
	// hands the run's task on (once: "no worker answered the nexo.run query").
	rec := waitStatusRetrying(t, f.server, id, api.StatusDone)
	restored := eventOf(t, rec, "sandbox_restored")
	if countEvents(rec, "sandbox_host_lost") != 1 || restored["parked_at"] == nil {
		t.Errorf("events: %s; sandbox_restored = %v", eventList(rec), restored)
	}
	if res := hostqToolResults(rec); !strings.Contains(res, "written in the first container") {
		t.Errorf("cat notes.md in the new container:\n%s", res)
	}
	if left := runContainers(t, id); len(left) != 0 {
		t.Errorf("containers left after the run ended: %v", left)
	}
}
