package workflows

import (
	"context"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// A run whose agent names a pool claims its host on the pool's claim queue, never on the
// shared one, and when that host is lost its new claim goes to the pool's queue again: the
// run moves to another host of the pool, with its last snapshot restored there.
func TestPoolRunClaimsAndMovesOnThePoolQueue(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a", "b")
	h.register(env)
	spec := approveSpec()
	spec.Permissions.Mode = permissions.ModeAuto
	spec.Sandbox = api.SandboxSpec{Type: api.SandboxLocal, Pool: "gpu"}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"mine.txt","content":"v1"}`)),
		toolReply(call("read_file", `{"path":"mine.txt"}`)),
		text("Done."),
	}}
	f.register(env)
	var toolQueues []string
	env.OnActivity(api.ActivityRunTool, mockAny, mockAny).Return(
		func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
			q := activity.GetInfo(ctx).TaskQueue
			toolQueues = append(toolQueues, q)
			if q == "nexo@host-a" && req.Tool == "read_file" {
				return api.RunToolResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			res := api.RunToolResult{Content: "ok"}
			if req.Snapshot {
				res.Snapshot = &api.SnapshotRef{Manifest: fakeManifest(req.CallID), Files: 1, AtUnixNano: 1}
			}
			return res, nil
		})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	shared := h.queues[api.ActivityCompleteChat][0]
	want := api.PoolQueueName(shared, "gpu")
	if claims := h.queues[api.ActivityClaimSandboxHost]; len(claims) != 2 || claims[0] != want || claims[1] != want {
		t.Errorf("claims ran on %v, want both (the first and the move) on the pool's queue %s", claims, want)
	}
	if strings.Join(toolQueues, ",") != "nexo@host-a,nexo@host-a,nexo@host-b" {
		t.Errorf("tools ran on %v, want the write and the read on host a (lost), the read again on host b", toolQueues)
	}
	if len(h.restores) != 1 || h.restores[0] != "nexo@host-b" || h.restored[0] != fakeManifest("1.1") {
		t.Errorf("restores on %v of %v, want one on host b of the write's snapshot", h.restores, h.restored)
	}
	if lost := eventData(t, queryRecord(t, env), "sandbox_host_lost"); lost["from"] != "nexo@host-a" || lost["to"] != "nexo@host-b" {
		t.Errorf("sandbox_host_lost = %v", lost)
	}
}

// A run whose agent names no pool claims on the shared task queue, as before pools.
func TestNoPoolClaimsOnTheSharedQueue(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	h := newHostFakes("a")
	h.register(env)
	spec := approveSpec()
	spec.Permissions.Mode = permissions.ModeAuto
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"mine.txt","content":"v1"}`)),
		text("Done."),
	}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	shared := h.queues[api.ActivityCompleteChat][0]
	if claims := h.queues[api.ActivityClaimSandboxHost]; len(claims) != 1 || claims[0] != shared {
		t.Errorf("claim ran on %v, want the shared queue %s", claims, shared)
	}
}
