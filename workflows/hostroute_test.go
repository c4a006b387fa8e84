package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// TestDockerRunParksAndRestoresThroughSessions: a docker-sandboxed agent's tool calls run
// in a worker session; waiting for a human longer than the idle timeout parks the
// workspace and leaves the worker; the next tool call first restores the workspace.
func TestDockerRunParksAndRestoresThroughSessions(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.SetWorkerOptions(worker.Options{EnableSessionWorker: true})
	// Runs recorded before host queues (hostq.go) keep this path.
	env.OnGetVersion(ChangeHostQueue, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	spec := agents.Spec{Name: "boxed", Permissions: permissions.Policy{Mode: permissions.ModeApprove},
		Sandbox: api.SandboxSpec{Type: api.SandboxDocker, IdleTimeout: api.Duration(time.Minute)}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("read_file", `{"path":"a"}`), call("shell", `{"command":"make"}`)),
		text("done"),
	}}
	f.register(env)
	var order []string
	registerParkRestore(env, &order)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.2", Approved: true})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "boxed"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.tools {
		order = append(order, r.Tool)
	}
	// Parked once during the wait, restored once before the approved call; both tools ran.
	if got := strings.Join(order, ","); got != "park,restore,read_file,shell" {
		t.Errorf("activities = %s", got)
	}
	rec := queryRecord(t, env)
	for _, ev := range []string{"sandbox_parked", "sandbox_restored"} {
		if countEvents(rec, ev) != 1 {
			t.Errorf("%s events = %d, want 1", ev, countEvents(rec, ev))
		}
	}
}

// registerParkRestore registers fake park and restore activities that note "park" and
// "restore" in order and report a 10-byte workspace.
func registerParkRestore(env *testsuite.TestWorkflowEnvironment, order *[]string) {
	for name, note := range map[string]string{api.ActivityParkSandbox: "park", api.ActivityRestoreSandbox: "restore"} {
		env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) (int64, error) {
			*order = append(*order, note)
			return 10, nil
		}, activity.RegisterOptions{Name: name})
	}
}
