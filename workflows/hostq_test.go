package workflows

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/stretchr/testify/mock"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

var mockAny = mock.Anything

// hostFakes stand in for the host routing activities: claims answer hosts in turn (the
// last one again when they run out), and every activity's task queue is recorded.
type hostFakes struct {
	mu        sync.Mutex
	hosts     []string
	claims    []api.ClaimHostRequest
	snapshots int
	restores  []string // task queue of each RestoreSandboxOnHost
	restored  []string // the manifest each RestoreSandboxOnHost was asked for
	lost      []string // what the fake restore says it could not bring back
	queues    map[string][]string
	parkEvery time.Duration
	quiet     bool // no activity listener (newEnv's default host)
}

func newHostFakes(hosts ...string) *hostFakes {
	return &hostFakes{hosts: hosts, queues: map[string][]string{}}
}

func (h *hostFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, req api.ClaimHostRequest) (api.SandboxHost, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.claims = append(h.claims, req)
		i := min(len(h.claims), len(h.hosts)) - 1
		return api.SandboxHost{Queue: "nexo@host-" + h.hosts[i], Host: h.hosts[i], ParkEvery: api.Duration(h.parkEvery), HostTimeout: api.Duration(5 * time.Second)}, nil
	}, activity.RegisterOptions{Name: api.ActivityClaimSandboxHost})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.ReleaseSandboxRequest) (api.SnapshotResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.snapshots++
		if req.Manifest == api.ManifestRequested {
			return api.SnapshotResult{Bytes: 100, Ref: &api.SnapshotRef{Manifest: fakeManifest("suspend"), Files: 1, Bytes: 100, AtUnixNano: time.Now().UnixNano()}}, nil
		}
		return api.SnapshotResult{Bytes: 100}, nil
	}, activity.RegisterOptions{Name: api.ActivitySnapshotSandbox})
	env.RegisterActivityWithOptions(func(ctx context.Context, req api.ReleaseSandboxRequest) (api.RestoreOnHostResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.restores = append(h.restores, activity.GetInfo(ctx).TaskQueue)
		h.restored = append(h.restored, req.Manifest)
		return api.RestoreOnHostResult{Found: true, Bytes: 100, RestoreManifestResult: api.RestoreManifestResult{Lost: h.lost}}, nil
	}, activity.RegisterOptions{Name: api.ActivityRestoreSandboxOnHost})
	env.RegisterActivityWithOptions(func(context.Context, api.RestoreArtifactsRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityRestoreArtifacts})
	if h.quiet {
		return
	}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.queues[info.ActivityType.Name] = append(h.queues[info.ActivityType.Name], info.TaskQueue)
	})
}

// registerHostFakes gives every test environment a host that answers (newEnv).
func registerHostFakes(env *testsuite.TestWorkflowEnvironment) {
	h := newHostFakes("a")
	h.quiet = true
	h.register(env)
}

func eventData(t *testing.T, rec api.Record, typ string) map[string]any {
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
	t.Fatalf("no %s event in %v", typ, hostEventTypes(rec))
	return nil
}

func hostEventTypes(rec api.Record) []string {
	var out []string
	for _, e := range rec.Events {
		out = append(out, e.Type)
	}
	return out
}

// The run claims a host once, on the shared queue, and every sandbox activity then goes to
// that host's queue, local tier included; waiting for a human snapshots the workspace.
func TestHostQueueClaimedOnceAndRoutesEverySandboxActivity(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a")
	h.register(env)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("read_file", `{"path":"brief.md"}`)),
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		toolReply(call("read_file", `{"path":"notes.md"}`)),
		text("Done."),
	}}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "2.1", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.claims) != 1 || !h.claims[0].Fresh {
		t.Errorf("claims = %+v, want one fresh claim", h.claims)
	}
	if q := h.queues[api.ActivityClaimSandboxHost]; len(q) != 1 || strings.Contains(q[0], "@host-") {
		t.Errorf("claim ran on %v, want the shared queue", q)
	}
	for _, typ := range []string{api.ActivityRunTool, api.ActivityReleaseSandbox, api.ActivitySnapshotSandbox} {
		q := h.queues[typ]
		if len(q) == 0 {
			t.Errorf("%s never ran", typ)
		}
		for _, got := range q {
			if got != "nexo@host-a" {
				t.Errorf("%s ran on %q, want the host queue nexo@host-a", typ, got)
			}
		}
	}
	if h.queues[api.ActivityCompleteChat][0] == "nexo@host-a" {
		t.Error("the model call went to the host queue; it belongs on the shared queue")
	}
	rec := queryRecord(t, env)
	if d := eventData(t, rec, "sandbox_snapshot"); d["reason"] != "suspend" || d["bytes"] != float64(100) || d["snapshot"] != fakeManifest("suspend") {
		t.Errorf("sandbox_snapshot = %v", d)
	}
	if h.snapshots != 1 {
		t.Errorf("%d snapshots, want 1 (the suspend)", h.snapshots)
	}
}

// A host-queue activity no worker starts in time (ScheduleToStart) means the host is gone:
// the run claims another host, restores its last snapshot and artifacts there, says so in
// sandbox_host_lost and sandbox_restored (naming when the snapshot was taken), and runs the
// failed call there once more.
func TestHostLostMovesTheRunAndRestores(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a", "b")
	h.register(env)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("read_file", `{"path":"brief.md"}`)),
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Done."),
	}}
	f.register(env)
	var toolQueues []string
	env.OnActivity(api.ActivityRunTool, mockAny, mockAny).Return(
		func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
			q := activity.GetInfo(ctx).TaskQueue
			toolQueues = append(toolQueues, q)
			if q == "nexo@host-a" && req.Tool == "write_file" {
				return api.RunToolResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return api.RunToolResult{Content: req.Note + "ok"}, nil
		})
	var snapAt time.Time
	env.RegisterDelayedCallback(func() {
		snapAt = env.Now().UTC()
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "2.1", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(toolQueues, ",") != "nexo@host-a,nexo@host-a,nexo@host-b" {
		t.Errorf("tools ran on %v, want read and write on host a (lost), the write again on host b", toolQueues)
	}
	if len(h.claims) != 2 || !h.claims[0].Fresh || h.claims[1].Fresh {
		t.Errorf("claims = %+v, want a fresh claim then a move", h.claims)
	}
	if len(h.restores) != 1 || h.restores[0] != "nexo@host-b" {
		t.Errorf("restores ran on %v, want once on host b", h.restores)
	}
	if len(h.restored) != 1 || h.restored[0] != fakeManifest("suspend") {
		t.Errorf("restores asked for %v, want the snapshot taken at the suspend", h.restored)
	}
	rec := queryRecord(t, env)
	lost := eventData(t, rec, "sandbox_host_lost")
	if lost["from"] != "nexo@host-a" || lost["to"] != "nexo@host-b" {
		t.Errorf("sandbox_host_lost = %v", lost)
	}
	restored := eventData(t, rec, "sandbox_restored")
	at, _ := restored["parked_at"].(string)
	parked, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || parked.After(snapAt) || restored["archive_bytes"] != float64(100) {
		t.Errorf("sandbox_restored = %v, want parked_at at the suspend (before %v)", restored, snapAt)
	}
	if rel := h.queues[api.ActivityReleaseSandbox]; len(rel) != 1 || rel[0] != "nexo@host-b" {
		t.Errorf("release ran on %v, want the new host", rel)
	}
	// The write runs again on host b as a new activity (attempt 1): the model is still told
	// it is a retry that may have run partly; the read before the move is not.
	results := map[string]string{} // call id: the result the model got (threads by value repeat them)
	for _, r := range f.requests {
		for _, m := range r.Messages {
			if m.Role == api.RoleTool {
				results[m.ToolCallID] = m.Content
			}
		}
	}
	if len(results) != 2 || results["1.1"] != "ok" || results["2.1"] != movedNote+"ok" {
		t.Errorf("tool results the model got = %q, want the read's plain and the moved write's under the retry note", results)
	}
}

// A working run snapshots after every call that can change its workspace (write_file,
// shell), never after a read, and keeps the last snapshot's reference: each call names it
// as its base, the next move restores it, and no interval snapshot (park_every) is taken.
func TestEveryChangeIsSnapshotted(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a")
	h.parkEvery = 10 * time.Minute
	h.register(env)
	spec := approveSpec()
	spec.Permissions.Mode = permissions.ModeAuto
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"a.md","content":"1"}`)),
		toolReply(call("read_file", `{"path":"a.md"}`)),
		toolReply(call("shell", `{"command":"echo 2 >> a.md"}`)),
		text("Done."),
	}}
	f.register(env)
	var reqs []api.RunToolRequest
	n := 0
	env.OnActivity(api.ActivityRunTool, mockAny, mockAny).After(6 * time.Minute).Return(
		func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
			reqs = append(reqs, req)
			res := api.RunToolResult{Content: "ok"}
			if req.Snapshot {
				n++
				res.Snapshot = &api.SnapshotRef{Manifest: fakeManifest(req.CallID), Files: 1, AtUnixNano: int64(n)}
			}
			return res, nil
		})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 {
		t.Fatalf("%d tool calls, want 3", len(reqs))
	}
	if !reqs[0].Snapshot || reqs[1].Snapshot || !reqs[2].Snapshot {
		t.Errorf("snapshot asked for write, read, shell = %v %v %v, want true false true", reqs[0].Snapshot, reqs[1].Snapshot, reqs[2].Snapshot)
	}
	if reqs[0].Base != "" || reqs[1].Base != fakeManifest(reqs[0].CallID) || reqs[2].Base != fakeManifest(reqs[0].CallID) {
		t.Errorf("bases = %q %q %q, want none, then the write's snapshot twice", reqs[0].Base, reqs[1].Base, reqs[2].Base)
	}
	rec := queryRecord(t, env)
	if h.snapshots != 0 || countEvents(rec, "sandbox_snapshot") != 0 {
		t.Errorf("%d interval snapshots, events %v; want none (every change has its own)", h.snapshots, hostEventTypes(rec))
	}
	var snaps []string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			s, _ := d["snapshot"].(string)
			snaps = append(snaps, s)
		}
	}
	if strings.Join(snaps, ",") != fakeManifest(reqs[0].CallID)+",,"+fakeManifest(reqs[2].CallID) {
		t.Errorf("tool results' snapshots = %v, want the write's, none, the shell's", snaps)
	}
}

// A run whose host is lost restores the snapshot of its last completed call on the new
// host; what that restore could not bring back is told to the model, at the start of the
// result of the call that runs again there, and named in sandbox_restored.
func TestHostLostRestoresTheLastCallsSnapshotAndTellsTheModel(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a", "b")
	h.lost = []string{"old.md"}
	h.register(env)
	spec := approveSpec()
	spec.Permissions.Mode = permissions.ModeAuto
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"mine.txt","content":"v1"}`)),
		toolReply(call("read_file", `{"path":"mine.txt"}`)),
		text("Done."),
	}}
	f.register(env)
	var bases []string
	env.OnActivity(api.ActivityRunTool, mockAny, mockAny).Return(
		func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
			if activity.GetInfo(ctx).TaskQueue == "nexo@host-a" && req.Tool == "read_file" {
				return api.RunToolResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			bases = append(bases, req.Base)
			res := api.RunToolResult{Content: "v1"}
			if req.Snapshot {
				res.Snapshot = &api.SnapshotRef{Manifest: fakeManifest("write"), Files: 1, AtUnixNano: 1}
			}
			return res, nil
		})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.restored) != 1 || h.restored[0] != fakeManifest("write") {
		t.Fatalf("restores asked for %v, want the write's snapshot", h.restored)
	}
	rec := queryRecord(t, env)
	restored := eventData(t, rec, "sandbox_restored")
	if restored["snapshot"] != fakeManifest("write") || restored["snapshot_call"] != "1.1" || !reflect.DeepEqual(restored["lost"], []any{"old.md"}) {
		t.Errorf("sandbox_restored = %v, want the write's snapshot, its call 1.1, lost [old.md]", restored)
	}
	var readResult string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" && strings.Contains(string(e.Data), `"read_file"`) {
			readResult = string(e.Data)
		}
	}
	if !strings.Contains(readResult, "could not be") || !strings.Contains(readResult, "old.md") {
		t.Errorf("the re-run read's result = %s, want the note naming old.md", readResult)
	}
}

// fakeManifest is a manifest name for tests: 64 hex digits derived from s.
func fakeManifest(s string) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 64)
	for i := range out {
		out[i] = hex[(int(s[i%len(s)])+i)%16]
	}
	return string(out)
}

// A session hands its host to the run it continues as, and that run sends its sandbox
// activities there without claiming again.
func TestSessionCarriesItsHostAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	in := continuedAfterOneTurn(t, "hosted")
	if in.Carry.Host == nil || in.Carry.Host.Queue != "nexo@host-a" {
		t.Fatalf("carry host = %+v, want nexo@host-a", in.Carry.Host)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("z")
	h.register(env)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	in.ContinueAfterTurns = 0
	prompt(env, time.Minute, "again", &out)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, in))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.claims) != 0 {
		t.Errorf("continued session claimed %+v, want its carried host", h.claims)
	}
	if q := h.queues[api.ActivityReleaseSandbox]; len(q) != 1 || q[0] != "nexo@host-a" {
		t.Errorf("release ran on %v, want the carried host nexo@host-a", q)
	}
}

// A docker workspace parked while the run waited (its container removed) is restored on
// the run's own host before the next call, with no new claim.
func TestHostDockerParkRestoresOnTheSameHost(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a")
	h.register(env)
	spec := agents.Spec{Name: "boxed", Permissions: permissions.Policy{Mode: permissions.ModeApprove},
		Sandbox: api.SandboxSpec{Type: api.SandboxDocker, IdleTimeout: api.Duration(time.Minute)}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("read_file", `{"path":"a"}`)),
		toolReply(call("shell", `{"command":"make"}`)),
		text("done"),
	}}
	f.register(env)
	var order []string
	registerParkRestore(env, &order)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "2.1", Approved: true})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "boxed"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.claims) != 1 || len(h.restores) != 1 || h.restores[0] != "nexo@host-a" || h.snapshots != 1 {
		t.Errorf("claims %+v, restores on %v, %d snapshots; want one claim, one snapshot, one restore on host a", h.claims, h.restores, h.snapshots)
	}
	if strings.Join(order, ",") != "park" {
		t.Errorf("old-path activities = %v, want the idle park only", order)
	}
	rec := queryRecord(t, env)
	if d := eventData(t, rec, "sandbox_restored"); d["parked_at"] == nil {
		t.Errorf("sandbox_restored = %v, want parked_at", d)
	}
}

// Tool calls of one reply that run concurrently (tool_concurrency) and are the run's first
// sandbox use claim one host between them, and all run there; when that host is lost under
// them, the run moves once.
func TestConcurrentToolCallsClaimAndMoveOnce(t *testing.T) {
	t.Parallel()
	for _, lose := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		RegisterAll(env)
		h := newHostFakes("a", "b")
		h.register(env)
		spec := approveSpec()
		spec.ToolConcurrency = 3
		f := &agentFakes{spec: spec, script: []api.ChatMessage{
			toolReply(call("read_file", `{"path":"a.md"}`), call("read_file", `{"path":"b.md"}`), call("read_file", `{"path":"c.md"}`)),
			text("Done."),
		}}
		f.register(env)
		var mu sync.Mutex
		var toolQueues []string
		env.OnActivity(api.ActivityRunTool, mockAny, mockAny).Return(
			func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
				q := activity.GetInfo(ctx).TaskQueue
				mu.Lock()
				toolQueues = append(toolQueues, q)
				mu.Unlock()
				if lose && q == "nexo@host-a" {
					return api.RunToolResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
				}
				return api.RunToolResult{Content: "ok"}, nil
			})
		env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		wantClaims, final := 1, "nexo@host-a"
		if lose {
			wantClaims, final = 2, "nexo@host-b"
		}
		if len(h.claims) != wantClaims {
			t.Errorf("lose=%v: %d claims %+v, want %d", lose, len(h.claims), h.claims, wantClaims)
		}
		if len(h.restores) != wantClaims-1 {
			t.Errorf("lose=%v: restores on %v, want %d", lose, h.restores, wantClaims-1)
		}
		// The three calls run at once, so the order in which the lost host's attempts and the
		// new host's attempts are seen is not fixed: count them per host instead.
		perHost := map[string]int{}
		for _, q := range toolQueues {
			perHost[q]++
		}
		want := map[string]int{final: 3}
		if lose {
			want["nexo@host-a"] = 3
		}
		if !reflect.DeepEqual(perHost, want) {
			t.Errorf("lose=%v: tool calls ran on %v, want %v per host", lose, toolQueues, want)
		}
	}
}
