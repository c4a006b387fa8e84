package workflows

import (
	"context"
	"errors"
	"strings"
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

// TestEveryActivityHasAHeartbeatTimeout: each activity the shipped workflows schedule has
// a heartbeat timeout, so one in flight on a killed worker is retried within seconds
// instead of waiting out its start-to-close timeout (FetchMetric waited 5 minutes).
func TestEveryActivityHasAHeartbeatTimeout(t *testing.T) {
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
	t.Run("DocumentApproval", func(t *testing.T) {
		run(t, func(env *testsuite.TestWorkflowEnvironment) { (&fakeActs{}).register(env) },
			DocumentApprovalName, DocumentApprovalInput{DocID: "1", Approved: true})
	})
	t.Run("BuildDashboard", func(t *testing.T) {
		run(t, func(env *testsuite.TestWorkflowEnvironment) { (&fakeActs{}).register(env) },
			BuildDashboardName, BuildDashboardInput{Title: "Q4"})
	})
	t.Run("AgentRun", func(t *testing.T) {
		f := &agentFakes{spec: agents.Spec{Name: "scribe", Permissions: permissions.Policy{Mode: permissions.ModeAuto}, Produces: []string{"notes.md"}},
			script:  []api.ChatMessage{toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)), text("done")},
			outputs: []string{"notes.md"}}
		run(t, f.register, api.WorkflowAgentRun, api.AgentRunInput{Agent: "scribe", Prompt: "write notes.md"})
	})
}

// TestFailureMessageIsBounded: a run that fails with an error quoting a huge input (an
// unknown metric named with 3 MB) fails with a bounded message: a failure message is
// never offloaded, and an oversized one would wedge the closing workflow task.
func TestFailureMessageIsBounded(t *testing.T) {
	env := newEnv(t)
	(&fakeActs{}).register(env)
	huge := strings.Repeat("m", 3<<20)
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (api.Metric, error) {
		return api.Metric{}, temporal.NewNonRetryableApplicationError("unknown metric "+name, api.ErrTypeNotFound, nil)
	}, activity.RegisterOptions{Name: api.ActivityFetchMetric})
	env.ExecuteWorkflow(BuildDashboardName, payload(t, BuildDashboardInput{Metrics: []string{huge}}))
	err := env.GetWorkflowError()
	if err == nil {
		t.Fatal("the run did not fail")
	}
	if size := len(err.Error()); size > api.MaxFailureMessage+1024 {
		t.Errorf("the run fails with a message of %d bytes, want at most about %d", size, api.MaxFailureMessage)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusFailed || rec.Error == nil || len(*rec.Error) > api.MaxFailureMessage+100 {
		t.Errorf("record: status %s, error of %d bytes", rec.Status, len(deref(rec.Error)))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
