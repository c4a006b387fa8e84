package workflows

import (
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// The outbound A2A tool: an agent's `a2a:` remotes are offered to it as tools
// a2a_<name>. Their cards are read once per toolset by DescribeA2AAgents (recorded, so
// the description the model saw and the endpoint its calls go to replay as they were),
// and each allowed call is one CallA2AAgent on the worker, whose result is the remote's
// answer. Why an activity and not a child run: the remote keeps its own task; Nexo only
// waits for its answer, within the remote's timeout.

// a2aTools describes the remotes of spec its permissions can ever allow: the tools and,
// by tool name, where each one's calls go. Asked (ChangeA2ATools) only for a spec with
// remotes, which no spec recorded before them had.
func (rt *runtime) a2aTools(ctx workflow.Context, spec agents.Spec) ([]agents.Tool, map[string]api.A2AAgent, error) {
	if len(spec.A2A) == 0 || permissions.NeverAllows(spec.Permissions, permissions.CapA2A) {
		return nil, nil, nil
	}
	if workflow.GetVersion(ctx, ChangeA2ATools, workflow.DefaultVersion, 1) < 1 {
		return nil, nil, nil // unreachable for recorded runs: none had remotes
	}
	var res api.DescribeA2AAgentsResult
	dctx := workflow.WithActivityOptions(ctx, mcpCallOptions())
	if err := workflow.ExecuteActivity(dctx, api.ActivityDescribeA2AAgents, api.DescribeA2AAgentsRequest{RunID: rt.rec.ID, Remotes: spec.A2A}).Get(ctx, &res); err != nil {
		return nil, nil, wrap(err, "agent %s: read the A2A agent cards", spec.Name)
	}
	var tools []agents.Tool
	byTool := map[string]api.A2AAgent{}
	offered := map[string]string{}
	for _, ag := range res.Agents {
		if _, ok := spec.A2ARemoteOf(agents.A2AToolName(ag.Remote)); !ok {
			continue // an answer for a remote the spec does not declare
		}
		if ag.Error != "" {
			rt.emit(ctx, api.EventA2ACardError, map[string]string{"remote": ag.Remote, "error": ag.Error})
		}
		t := agents.A2ATool(ag.Remote, ag.Description)
		tools = append(tools, t)
		byTool[t.Name] = ag
		offered[ag.Remote] = ag.Endpoint
	}
	rt.emit(ctx, api.EventA2AAgents, offered)
	return tools, byTool, nil
}

// a2aCallOptions: the remote's timeout bounds the call inside CallA2AAgent, so an
// attempt may take that long and a minute more to connect and cancel. A remote that
// cannot be reached, or answers 5xx, is retried a few times; then the model gets an error
// result naming the remote and the run goes on. 401, 403 and 404 are not retried.
func a2aCallOptions(r api.A2ARemote) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: r.CallTimeout() + time.Minute,
		HeartbeatTimeout:    ActivityHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{api.ErrTypeBadInput, api.ErrTypeNotFound},
		},
	}
}

// callA2A runs an allowed call of a remote A2A agent.
func (rt *runtime) callA2A(ctx workflow.Context, r api.A2ARemote, ag api.A2AAgent, call api.ToolCall, args map[string]any, storeOver int, note string) (api.RunToolResult, error) {
	msg, _ := args["message"].(string)
	if strings.TrimSpace(msg) == "" {
		return errorResult(`%s needs {"message": "<the whole request>"}`, call.Name), nil
	}
	contextID, _ := args["context_id"].(string)
	taskID, _ := args["task_id"].(string)
	req := api.CallA2AAgentRequest{RunID: rt.rec.ID, CallID: call.ID, Remote: r, Endpoint: ag.Endpoint,
		Message: msg, ContextID: contextID, TaskID: taskID, StoreOver: storeOver, Note: note}
	var res api.RunToolResult
	actx := workflow.WithActivityOptions(ctx, a2aCallOptions(r))
	if err := workflow.ExecuteActivity(actx, api.ActivityCallA2AAgent, req).Get(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return api.RunToolResult{}, &wrapError{err: err}
		}
		return errorResult("remote A2A agent %s: %s", r.Name, errorMessage(err)), nil
	}
	return res, nil
}
