package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// A tool call Temporal retries (its worker died mid-call) tells the model so: the first
// attempt may have run partly, and the model should look before repeating it. The first
// attempt here fails as a killed worker's would; the second runs the real RunTool.
func TestRunToolRetryIsVisibleToTheModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	var suite testsuite.WorkflowTestSuite
	wenv := suite.NewTestWorkflowEnvironment()
	wenv.RegisterActivityWithOptions(func(ctx context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		if activity.GetInfo(ctx).Attempt == 1 {
			return api.RunToolResult{}, errors.New("worker lost")
		}
		return e.a.Tools.RunTool(ctx, req)
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	wenv.ExecuteWorkflow(func(ctx workflow.Context) ([]api.RunToolResult, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: 3}})
		var out []api.RunToolResult
		for _, cmd := range []string{"echo hi", "exit 3"} {
			var res api.RunToolResult
			err := workflow.ExecuteActivity(ctx, api.ActivityRunTool, api.RunToolRequest{RunID: testRun,
				Tool: agents.ToolShell, Args: argsJSON(t, map[string]any{"command": cmd})}).Get(ctx, &res)
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
		return out, nil
	})
	if err := wenv.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got []api.RunToolResult
	if err := wenv.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	const note = "note: this call is a retry (attempt 2): an earlier attempt may have run partly\n"
	for i, want := range []string{note + "exit code 0\n--- stdout ---\nhi", note + "exit code 3"} {
		if got[i].Content != want {
			t.Errorf("result %d = %q, want %q", i, got[i].Content, want)
		}
	}
	if !got[1].IsError || got[0].IsError {
		t.Errorf("IsError = %v, %v; want false, true (the note does not change the outcome)", got[0].IsError, got[1].IsError)
	}
	// A first attempt carries no note.
	if res := e.tool(t, agents.ToolShell, map[string]any{"command": "echo hi"}); strings.HasPrefix(res.Content, "note:") {
		t.Errorf("first attempt: %q, want no retry note", res.Content)
	}
}

// An MCP call Temporal retries tells the model so, as a built-in tool's does (hardening
// round two, item 13: a retried CallMCPTool result carried no note, though its first
// attempt may have reached the server).
func TestCallMCPToolRetryIsVisibleToTheModel(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	spec := stdioServer(t, "docs")
	var suite testsuite.WorkflowTestSuite
	wenv := suite.NewTestWorkflowEnvironment()
	wenv.RegisterActivityWithOptions(func(ctx context.Context, req api.CallMCPToolRequest) (api.RunToolResult, error) {
		if activity.GetInfo(ctx).Attempt == 1 {
			return api.RunToolResult{}, errors.New("worker lost")
		}
		return a.MCP.CallMCPTool(ctx, req)
	}, activity.RegisterOptions{Name: api.ActivityCallMCPTool})
	wenv.ExecuteWorkflow(func(ctx workflow.Context) (api.RunToolResult, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: 3}})
		var res api.RunToolResult
		err := workflow.ExecuteActivity(ctx, api.ActivityCallMCPTool, api.CallMCPToolRequest{RunID: mcpRun, CallID: "1.1",
			Server: spec, Tool: mcptest.ToolEcho, Args: json.RawMessage(`{"text":"hello"}`)}).Get(ctx, &res)
		return res, err
	})
	if err := wenv.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got api.RunToolResult
	if err := wenv.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	const note = "note: this call is a retry (attempt 2): an earlier attempt may have run partly\n"
	if got.Content != note+"hello" || got.IsError {
		t.Errorf("retried MCP call = %+v, want %q", got, note+"hello")
	}
	if first := mustCallMCP(t, a, mcpRun, spec, mcptest.ToolEcho, `{"text":"hi"}`); first != "hi" {
		t.Errorf("first attempt = %q, want no retry note", first)
	}
}
