package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// SpanTracer records spans that live in workflow time: an agent's loop (invoke_agent)
// and an approval wait (requested → decided). The worker's telemetry interceptor puts one
// in the workflow context (WithSpanTracer); without it (no OTEL_* endpoint and no
// metrics.addr on this worker) no span is recorded.
//
// The contract that keeps it replay-safe: StartSpan and the end function issue no
// commands, so the command sequence is the same on every worker whatever its telemetry
// (no workflow.GetVersion needed); span ids are derived from the run and the order spans
// are started in, so a replay computes the same ids; and a span is exported by the end
// function only when it runs live (not replaying), once, with the workflow times of its
// start and end. The returned context carries the span, so activities scheduled under it
// are its children.
type SpanTracer interface {
	StartSpan(ctx workflow.Context, s SpanStart) (workflow.Context, func(SpanEnd))
}

// SpanStart names a workflow span and its first attributes (values: string, int, bool).
type SpanStart struct {
	// Name is the span's name, as the GenAI conventions spell it ("invoke_agent coder").
	Name string
	// Kind is SpanAgent or SpanApproval.
	Kind  string
	Attrs map[string]any
}

// SpanEnd is what a workflow span learns at its end.
type SpanEnd struct {
	Attrs map[string]any
	Err   error
}

// Kinds of workflow spans.
const (
	SpanAgent    = "agent"
	SpanApproval = "approval"
)

// Attribute keys of the workflow spans (OpenTelemetry GenAI semantic conventions where
// they name the thing, nexo.* otherwise).
const (
	AttrOperation      = "gen_ai.operation.name"
	AttrAgentName      = "gen_ai.agent.name"
	AttrRequestModel   = "gen_ai.request.model"
	AttrInputTokens    = "gen_ai.usage.input_tokens"
	AttrOutputTokens   = "gen_ai.usage.output_tokens"
	AttrToolName       = "gen_ai.tool.name"
	AttrToolCallID     = "gen_ai.tool.call.id"
	AttrTurns          = "nexo.agent.turns"
	AttrCapability     = "nexo.approval.capability"
	AttrApprovalAction = "nexo.approval.action"
	AttrApprovalBy     = "nexo.approval.decided_by"
	AttrApprovalAlways = "nexo.approval.always"
)

type spanTracerKey struct{}

// WithSpanTracer returns ctx carrying t, for the telemetry interceptor.
func WithSpanTracer(ctx workflow.Context, t SpanTracer) workflow.Context {
	return workflow.WithValue(ctx, spanTracerKey{}, t)
}

// StartSpan starts a workflow span through the SpanTracer in ctx (a no-op without one)
// and returns the context to run its work in and the function that ends it. A user's
// workflow may use it too; it issues no commands.
func StartSpan(ctx workflow.Context, s SpanStart) (workflow.Context, func(SpanEnd)) {
	t, _ := ctx.Value(spanTracerKey{}).(SpanTracer)
	if t == nil {
		return ctx, func(SpanEnd) {}
	}
	return t.StartSpan(ctx, s)
}

// tracedAgentLoop is agentLoop inside an invoke_agent span: model and tool calls are its
// children, and its end carries the tokens the loop used.
func (rt *runtime) tracedAgentLoop(ctx workflow.Context, spec agents.Spec, tools toolset, skills []string, conv *conversation, style loopStyle) (api.AgentResult, error) {
	ctx, end := StartSpan(ctx, SpanStart{Name: "invoke_agent " + spec.Name, Kind: SpanAgent, Attrs: map[string]any{
		AttrOperation: "invoke_agent", AttrAgentName: spec.Name, AttrRequestModel: spec.Model}})
	res, err := rt.agentLoop(ctx, spec, tools, skills, conv, style)
	end(SpanEnd{Err: err, Attrs: map[string]any{AttrInputTokens: res.Usage.PromptTokens,
		AttrOutputTokens: res.Usage.CompletionTokens, AttrTurns: res.Turns}})
	return res, err
}

// tracedApproval is awaitApproval inside an approval span, from the request to the
// decision: who decided and what, never the call's arguments.
func (rt *runtime) tracedApproval(ctx workflow.Context, call api.ToolCall, pc permissions.Call, dl permissions.Deadline) (api.DecideRequest, error) {
	ctx, end := StartSpan(ctx, SpanStart{Name: "await_approval " + pc.Tool, Kind: SpanApproval, Attrs: map[string]any{
		AttrOperation: "await_approval", AttrToolName: pc.Tool, AttrToolCallID: call.ID, AttrCapability: string(pc.Capability)}})
	d, err := rt.awaitApproval(ctx, call, pc, dl)
	end(SpanEnd{Err: err, Attrs: map[string]any{AttrApprovalAction: d.Action, AttrApprovalBy: d.By, AttrApprovalAlways: d.Always}})
	return d, err
}
