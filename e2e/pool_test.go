package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/cluster"
)

// poolConfig: the workflow worker's agents: gpu-scribe runs its tools on the hosts of pool
// gpu, idle-scribe on pool idle, which nobody serves.
func poolConfig(modelURL string) string {
	return `llm:
  base_url: ` + modelURL + `
  model: fake-model
agents:
  - name: gpu-scribe
    instructions: You write files.
    permissions: {mode: auto}
    sandbox: {type: local, pool: gpu}
    max_turns: 8
  - name: idle-scribe
    instructions: You write files.
    permissions: {mode: auto}
    sandbox: {type: local, pool: idle}
    max_turns: 8
`
}

// sandboxHostConfig is all a sandbox host's config needs: no model, no agents, no secrets.
const sandboxHostConfig = "log:\n  level: warn\n"

// hostQueueOf is the host queue a worker's ready lines name.
func hostQueueOf(t *testing.T, w *platform) string {
	t.Helper()
	line := hostLine(w.output())
	_, rest, ok := strings.Cut(line, "(host queue ")
	if !ok {
		t.Fatalf("no host queue in the worker's output:\n%s", w.output())
	}
	return strings.FieldsFunc(rest, func(r rune) bool { return r == ')' || r == ',' })[0]
}

// TestSandboxPoolHostInItsOwnNetworkMovesWithItsFiles: a workflow worker (the model, the
// agent loop) and two sandbox hosts of pool gpu (`worker --sandbox-host --pool gpu`, whose
// config has no model): the first in a network namespace of its own, reaching Temporal
// only through its link and listening on nothing. A run of an agent with `pool: gpu`
// writes mine.txt on that host (never on the workflow worker); the host is SIGKILLed; the
// run moves to the other host of the pool and reads its own write back. A run of an agent
// whose pool nobody serves is refused, naming the pool, and nothing starts.
func TestSandboxPoolHostInItsOwnNetworkMovesWithItsFiles(t *testing.T) {
	requireNetns(t)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("mine.txt", "written on the pool's first host")}},
		// Slow, so the host dies before the read is sent to it.
		fakellm.Reply{DelayMS: 4000, ToolCalls: []fakellm.Call{readCall("mine.txt")}},
		fakellm.Reply{Content: "All there."},
	)
	f := newFleet(t, poolConfig(model.Start(t)), 3)
	main, far, near := f.workers[0], f.workers[1], f.workers[2]
	for _, w := range f.workers {
		w.extraEnv = append(w.extraEnv, fastFailover...)
	}
	for _, h := range []*platform{far, near} {
		h.args = []string{"--sandbox-host", "--pool", "gpu"}
		h.writeConfig(sandboxHostConfig)
	}
	ns, err := cluster.NewNetns(main.frontend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { far.stop(); ns.Remove() }) // the host first, then its network
	far.wrap = ns.Wrap
	far.extraEnv = append(far.extraEnv, "NEXO_TEMPORAL_ADDRESS="+ns.HostIP()+":"+strconv.Itoa(main.frontend))

	main.start()
	// Refused before any host of the pool is up, and nothing started.
	r := main.starter("agent", "gpu-scribe", "write", "--id", "pool-too-early")
	if r.code != 1 || !strings.Contains(r.stderr, `sandbox pool "gpu", which no live host serves`) {
		t.Fatalf("starter agent with no host of the pool: exit %d, stderr %q; want exit 1 naming pool gpu", r.code, r.stderr)
	}
	assertNoRun(t, main, "pool-too-early")

	far.start()
	if out := far.output(); !strings.Contains(out, "pool gpu") || strings.Contains(out, "Agents:") {
		t.Fatalf("sandbox host's output:\n%s", out)
	}
	farQ := hostQueueOf(t, far)
	id := strings.TrimSpace(main.ok("agent", "gpu-scribe", "Write mine.txt, then read it."))
	rec := waitHostqEvent(t, main, id, "agent_tool_result") // the write is done and snapshotted
	if b, err := os.ReadFile(filepath.Join(workspace(far, id), "mine.txt")); err != nil || string(b) != "written on the pool's first host" {
		t.Fatalf("mine.txt on the pool's first host = %q, %v; events %s", b, err, eventList(rec))
	}
	if _, err := os.Stat(workspace(main, id)); err == nil {
		t.Fatal("the run's workspace is on the workflow worker, which is in no pool")
	}

	far.kill()
	near.start() // the second host of the pool
	nearQ := hostQueueOf(t, near)
	rec = waitStatusRetrying(t, main, id, api.StatusDone)
	reads := 0
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" && strings.Contains(string(e.Data), `"read_file"`) {
			reads++
			if !strings.Contains(string(e.Data), "written on the pool's first host") {
				t.Errorf("the read after the move: %s", e.Data)
			}
		}
	}
	lost := eventOf(t, rec, "sandbox_host_lost")
	if reads != 1 || lost["from"] != farQ || lost["to"] != nearQ {
		t.Errorf("%d reads, sandbox_host_lost = %v; want 1 read and a move from %s to %s", reads, lost, farQ, nearQ)
	}
	if d := eventOf(t, rec, "sandbox_restored"); d["snapshot"] == nil || d["host"] != nearQ {
		t.Errorf("sandbox_restored = %v, want the write's snapshot on %s", d, nearQ)
	}
	if _, err := os.Stat(workspace(main, id)); err == nil {
		t.Error("the moved run's workspace is on the workflow worker")
	}

	// A pool nobody serves: refused with its name, nothing started.
	r = main.starter("agent", "idle-scribe", "write", "--id", "pool-unserved")
	if r.code != 1 || !strings.Contains(r.stderr, `sandbox pool "idle"`) || !strings.Contains(r.stderr, "worker --sandbox-host --pool idle") {
		t.Errorf("starter agent on an unserved pool: exit %d, stderr %q; want exit 1 naming pool idle", r.code, r.stderr)
	}
	assertNoRun(t, main, "pool-unserved")
}

// assertNoRun fails unless Temporal has no workflow with id.
func assertNoRun(t *testing.T, p *platform, id string) {
	t.Helper()
	_, err := p.dial().DescribeWorkflowExecution(t.Context(), id, "")
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		t.Errorf("run %s: describe = %v, want not found (nothing started)", id, err)
	}
}

// TestWorkerJoinsAPoolWithPool: a worker that also runs workflows serves a pool with
// --pool: a pool agent's run starts (its pool has a live host), claims this worker's host
// on the pool's queue and reads its write back.
func TestWorkerJoinsAPoolWithPool(t *testing.T) {
	poolRunOnAJoinedWorker(t)
}

// recordPoolRun records the run of TestWorkerJoinsAPoolWithPool.
func recordPoolRun(t *testing.T, r *recorder) {
	c, id := poolRunOnAJoinedWorker(t)
	r.save(c, "agent_pool_write_read.json", id, "")
}

// poolRunOnAJoinedWorker: a worker that runs workflows and joined pool gpu (`worker --dev
// --pool gpu`) takes the run of gpu-scribe, whose claim goes to the pool's queue; the run
// writes and reads mine.txt there. It returns the client and the run's id.
func poolRunOnAJoinedWorker(t *testing.T) (client.Client, string) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("mine.txt", "on the pool")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("mine.txt")}},
		fakellm.Reply{Content: "Read it back."},
	)
	p := newPlatform(t)
	p.args = []string{"--pool", "gpu"}
	p.writeConfig(poolConfig(model.Start(t)))
	p.start()
	if !strings.Contains(p.output(), "pool gpu (claim queue nexo@pool-gpu)") {
		t.Fatalf("the worker does not say it joined pool gpu:\n%s", p.output())
	}
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "gpu-scribe", "Write mine.txt, then read it."))
	rec := p.waitStatus(id, api.StatusDone)
	if res := hostqToolResults(rec); strings.Count(res, "on the pool") < 1 {
		t.Fatalf("tool results:\n%s", res)
	}
	hist := c.GetWorkflowHistory(t.Context(), id, "", false, 0)
	claimed := ""
	for hist.HasNext() {
		e, err := hist.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == api.ActivityClaimSandboxHost {
			claimed = a.GetTaskQueue().GetName()
		}
	}
	if claimed != api.PoolQueueName("nexo", "gpu") {
		t.Fatalf("the claim was scheduled on %q, want the pool's queue", claimed)
	}
	return c, id
}

// TestSandboxPoolDockerHostKilledRunMoves: the Docker tier on a pool: two sandbox hosts of
// pool dock (`worker --sandbox-host --pool dock`) beside a workflow worker that is in no
// pool. A run of an agent with `sandbox: {type: docker, pool: dock}` writes in a container
// of the first host; that host is SIGKILLed; the run gets a container on the other host of
// the pool, with its workspace from the write's snapshot, and cat reads the write back.
func TestSandboxPoolDockerHostKilledRunMoves(t *testing.T) {
	requireSandboxImage(t)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "written in the pool's first container")}},
		fakellm.Reply{DelayMS: 4000, ToolCalls: []fakellm.Call{shellCall("cat notes.md")}},
		fakellm.Reply{Content: "All there."},
	)
	cfg := `llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: docker-scribe
    instructions: You write files.
    permissions: {mode: auto}
    sandbox: {type: docker, pool: dock}
    max_turns: 8
`
	f := newFleet(t, cfg, 3)
	main, first, second := f.workers[0], f.workers[1], f.workers[2]
	for _, w := range f.workers {
		w.extraEnv = append(w.extraEnv, fastFailover...)
	}
	for _, h := range []*platform{first, second} {
		h.args = []string{"--sandbox-host", "--pool", "dock"}
		h.writeConfig(sandboxHostConfig)
	}
	main.start()
	first.start()
	id := strings.TrimSpace(main.ok("agent", "docker-scribe", "Write notes.md, then cat it."))
	t.Cleanup(func() {
		for _, c := range runContainers(t, id) {
			_ = exec.Command("docker", "rm", "-f", c).Run()
		}
	})
	waitHostqEvent(t, main, id, "agent_tool_result")
	if got := runContainers(t, id); len(got) != 1 {
		t.Fatalf("containers of the run before the kill: %v", got)
	}
	first.kill()
	second.start()
	rec := waitStatusRetrying(t, main, id, api.StatusDone)
	if res := hostqToolResults(rec); !strings.Contains(res, "written in the pool's first container") {
		t.Errorf("cat notes.md on the pool's second host:\n%s", res)
	}
	lost := eventOf(t, rec, "sandbox_host_lost")
	if lost["from"] != hostQueueOf(t, first) || lost["to"] != hostQueueOf(t, second) {
		t.Errorf("sandbox_host_lost = %v, want a move from the first host of the pool to the second", lost)
	}
}
