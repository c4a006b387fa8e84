package workflows

import (
	"encoding/json"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/api/searchattr"
	"github.com/nexo-temporal/nexo/permissions"
)

// Agents as tools (delegates): an agent's `delegates` are offered to it as tools
// agent_<name>. A call runs the named agent as a child AgentRun, a run of its own (its
// record, events, sandbox and approvals), linked both ways: the child's input and state
// name the parent run and call (api.ParentLink), the parent's delegate_started and
// delegate_done events name the child. The child's final answer is the call's result;
// a failed child is an error result the model sees. Why a child workflow and not an
// activity: the child may wait days for its own approvals, and a child is cancelled with
// its parent (ParentClosePolicy REQUEST_CANCEL) without any code of ours.

// delegateTools are the delegate tools of spec a run at depth may be offered: none at
// or beyond the agent's max_depth, and none its permissions could never allow.
func delegateTools(spec agents.Spec, depth int) []agents.Tool {
	if len(spec.Delegates) == 0 || depth >= spec.Depth() || permissions.NeverAllows(spec.Permissions, permissions.CapAgent) {
		return nil
	}
	var out []agents.Tool
	for _, name := range spec.Delegates {
		out = append(out, agents.DelegateTool(name))
	}
	return out
}

// delegateOf returns the agent a delegate tool runs, when tool is one of spec's.
func delegateOf(spec agents.Spec, tool string) (string, bool) {
	name, ok := strings.CutPrefix(tool, agents.DelegatePrefix)
	return name, ok && slices.Contains(spec.Delegates, name)
}

// delegateChildID is the child run's workflow id: the parent's and the call's, so a
// reader finds one from the other; a session's colons are replaced so the child is not
// taken for a session (api.ParseSessionID).
func delegateChildID(parent, callID string) string {
	if strings.HasPrefix(parent, api.SessionIDPrefix) {
		parent = strings.ReplaceAll(parent, ":", "-")
	}
	return parent + "-" + callID
}

// runDelegate runs an allowed delegate call: the agent as a child run, its answer as the
// result. Its usage is counted into this run's (under the delegating agent, so that
// agent's budget sees it); a budget already spent refuses the delegation.
//
// The answer follows the rule of every tool result: one over storeOver (a thread by
// reference; 0: none) goes by reference (ContentRef) with a preview, never inline into the
// thread and the events. An untyped child's long answer is its reply's blob already; a typed
// child's output (output_schema) is carried inline in its result, so over storeOver the
// result names the blob its final reply was stored as (the validated JSON as the child's
// model wrote it, api.TextInlineMax), and the model reads the whole of it from there. This
// changes the result's data only, not the commands: no change id.
func (rt *runtime) runDelegate(ctx workflow.Context, spec agents.Spec, agent string, call api.ToolCall, args map[string]any, storeOver int) (api.RunToolResult, error) {
	prompt, _ := args["prompt"].(string)
	if strings.TrimSpace(prompt) == "" {
		return errorResult(`%s needs {"prompt": "<the whole task>"}`, call.Name), nil
	}
	if workflow.GetVersion(ctx, ChangeDelegates, workflow.DefaultVersion, 1) < 1 {
		// Unreachable for recorded runs: no spec recorded before delegates offered one.
		return errorResult("%s is not available in this run", call.Name), nil
	}
	if !spec.Budget.IsZero() {
		if p, spent := rt.budgetReached(spec, loopStyle{}, api.Usage{}); spent {
			return errorResult("not delegating to %s: agent %s's budget is spent (%s)", agent, spec.Name, p.Spent()), nil
		}
	}
	// Recorded by a side effect: a replay runs under another workflow id (a replayer's
	// own), and the child's id in history must come out the same.
	var childID string
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return delegateChildID(rt.rec.ID, call.ID) }).Get(&childID); err != nil {
		return api.RunToolResult{}, wrap(err, "agent %s: record the id of the child run of call %s", spec.Name, call.ID)
	}
	in := api.AgentRunInput{Agent: agent, Prompt: prompt,
		Parent: &api.ParentLink{Run: rt.rec.ID, Call: call.ID, Agent: spec.Name, Depth: rt.depth + 1}}
	memo := map[string]any{}
	if p := api.PromptHead(prompt); p != "" {
		memo[api.MemoPrompt] = p
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            childID,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		TypedSearchAttributes: temporal.NewSearchAttributes(searchattr.Agent.ValueSet(agent)),
		Memo:                  memo,
	})
	fut := workflow.ExecuteChildWorkflow(cctx, api.WorkflowAgentRun, in)
	var exec workflow.Execution
	if err := fut.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		if ctx.Err() != nil {
			return api.RunToolResult{}, err
		}
		return errorResult("could not start agent %s: %s", agent, errorMessage(err)), nil
	}
	rt.emit(ctx, api.EventDelegateStarted, map[string]any{"call_id": call.ID, "agent": agent, "child": childID})
	var raw json.RawMessage
	err := fut.Get(ctx, &raw)
	if err != nil && ctx.Err() != nil {
		return api.RunToolResult{}, &wrapError{err: err} // the parent was cancelled: so was the child
	}
	if err != nil {
		rt.emit(ctx, api.EventDelegateDone, map[string]any{"call_id": call.ID, "agent": agent, "child": childID,
			"status": api.StatusFailed, "error": errorMessage(err)})
		return errorResult("agent %s (run %s) failed: %s", agent, childID, errorMessage(err)), nil
	}
	var res api.AgentResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return errorResult("agent %s (run %s) returned %s, not an agent result", agent, childID, clip(string(raw), maxReplyEcho)), nil
	}
	if rt.rec.Usage == nil {
		rt.rec.Usage = &api.RunUsage{}
	}
	rt.rec.Usage.Add(spec.Name, call.Name, res.Usage)
	rt.emit(ctx, api.EventDelegateDone, map[string]any{"call_id": call.ID, "agent": agent, "child": childID,
		"status": api.StatusDone, "turns": res.Turns, "total_tokens": res.Usage.TotalTokens, "cost": res.Usage.Cost})
	if res.Output != nil {
		out := string(res.Output)
		if storeOver > 0 && len(out) > storeOver && res.ContentRef != "" {
			return api.RunToolResult{Content: api.OutputPreview(out, res.ContentBytes), ContentRef: res.ContentRef, ContentBytes: res.ContentBytes}, nil
		}
		return api.RunToolResult{Content: out}, nil
	}
	return api.RunToolResult{Content: res.Content, ContentRef: res.ContentRef, ContentBytes: res.ContentBytes}, nil
}
