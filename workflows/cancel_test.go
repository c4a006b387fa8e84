package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

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
