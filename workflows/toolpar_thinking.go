package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// emitThinking records the reasoning of model call callTag, when it has any: a session's
// `thinking` update ({"content", "call"}), a run's `agent_thinking` event ({"content",
// "turn"}); reasoning stored by reference adds "bytes" and "content_ref", and content is
// then its preview. It is recorded once, when the call returns; viewers saw it live before
// that, from the call's heartbeat (api.LiveText.Thinking), which is not history.
func (rt *runtime) emitThinking(ctx workflow.Context, out api.CompleteChatResult, callTag string, turn int, session bool) {
	if out.Reasoning == "" {
		return
	}
	if workflow.GetVersion(ctx, ChangeThinkingEvents, workflow.DefaultVersion, 1) < 1 {
		return
	}
	data := map[string]any{"content": out.Reasoning}
	if out.ReasoningRef != "" {
		data["bytes"], data["content_ref"] = out.ReasoningBytes, out.ReasoningRef
	}
	if session {
		data["call"] = callTag
		rt.emit(ctx, api.StreamThinking, data)
		return
	}
	data["turn"] = turn
	rt.emit(ctx, "agent_thinking", data)
}

// updatePlan runs the update_plan tool: the plan is checked, recorded as an event (a
// session's `plan` update, a run's `agent_plan`, both {"steps": [...], "call_id"}) and
// acknowledged. A malformed plan is an error result the model reads.
func (rt *runtime) updatePlan(ctx workflow.Context, call api.ToolCall) api.RunToolResult {
	if workflow.GetVersion(ctx, ChangePlanTool, workflow.DefaultVersion, 1) < 1 {
		// Not reachable from a recorded history (update_plan was never offered before);
		// what the tool said then: no such tool.
		return errorResult("unknown tool %q", call.Name)
	}
	steps, err := agents.ParsePlan(orEmptyObject(call.Arguments))
	if err != nil {
		return errorResult("update_plan: %v", err)
	}
	rt.emitPlan(ctx, call.ID, steps)
	return api.RunToolResult{Content: agents.PlanSummary(steps)}
}

// emitPlan records a plan: a session's `plan` update, a run's `agent_plan`, both
// {"steps": [...], "call_id"}; call is the update_plan call, or the loop step that
// reported the plan.
func (rt *runtime) emitPlan(ctx workflow.Context, call string, steps any) {
	kind := "agent_plan"
	if rt.rec.Workflow == api.WorkflowSession {
		kind = api.StreamPlan
	}
	rt.emit(ctx, kind, map[string]any{"call_id": call, "steps": steps})
}
