package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// TestCancelAgentInAToolEndsCanceled: cancelling an agent run while its tool call never
// returns closes it canceled, like any other cancel, not failed.
func TestCancelAgentInAToolEndsCanceled(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: agents.Spec{Name: "scribe", Permissions: permissions.Policy{Mode: permissions.ModeAuto}},
		script: []api.ChatMessage{toolReply(call("read_file", `{"path":"notes.md"}`)), text("done")}}
	f.register(env)
	env.RegisterActivityWithOptions(func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		select { // a tool that never returns (bounded so a broken test cannot hang)
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return api.RunToolResult{}, ctx.Err()
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.RegisterDelayedCallback(env.CancelWorkflow, 200*time.Millisecond)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want a cancellation (Temporal closes the run canceled)", err)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusCanceled {
		t.Errorf("record status = %s, want canceled", rec.Status)
	}
}

// TestEveryActivityHasAHeartbeatTimeout: each activity AgentRun schedules has
// a heartbeat timeout, so one in flight on a killed worker is retried within seconds
// instead of waiting out its start-to-close timeout (FetchMetric waited 5 minutes). The
// demo workflows have theirs in examples/demo.
func TestEveryActivityHasAHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, setup func(env *testsuite.TestWorkflowEnvironment), workflow string, in any) {
		env := newEnv(t)
		setup(env)
		seen := map[string]bool{}
		env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			seen[info.ActivityType.Name] = true
			if info.HeartbeatTimeout <= 0 || info.HeartbeatTimeout > 30*time.Second {
				t.Errorf("%s runs with heartbeat timeout %v, want one of at most 30s", info.ActivityType.Name, info.HeartbeatTimeout)
			}
		})
		env.ExecuteWorkflow(workflow, payload(t, in))
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 {
			t.Fatal("no activity ran")
		}
	}
	t.Run("AgentRun", func(t *testing.T) {
		f := &agentFakes{spec: agents.Spec{Name: "scribe", Permissions: permissions.Policy{Mode: permissions.ModeAuto}, Produces: []string{"notes.md"}},
			script:  []api.ChatMessage{toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)), text("done")},
			outputs: []string{"notes.md"}}
		run(t, f.register, api.WorkflowAgentRun, api.AgentRunInput{Agent: "scribe", Prompt: "write notes.md"})
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
