package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// Span attribute keys of the GenAI semantic conventions (and nexo.* where they are silent).
const (
	attrOperation      = "gen_ai.operation.name"
	attrProvider       = "gen_ai.provider.name"
	attrAgentName      = "gen_ai.agent.name"
	attrRequestModel   = "gen_ai.request.model"
	attrResponseModel  = "gen_ai.response.model"
	attrInputTokens    = "gen_ai.usage.input_tokens"
	attrOutputTokens   = "gen_ai.usage.output_tokens"
	attrFinishReasons  = "gen_ai.response.finish_reasons"
	attrInputMessages  = "gen_ai.input.messages"
	attrOutputMessages = "gen_ai.output.messages"
	attrSystem         = "gen_ai.system_instructions"
	attrToolName       = "gen_ai.tool.name"
	attrToolCallID     = "gen_ai.tool.call.id"
	attrToolType       = "gen_ai.tool.type"
	attrToolArgs       = "gen_ai.tool.call.arguments"
	attrToolResult     = "gen_ai.tool.call.result"
	attrErrorType      = "error.type"
	attrOutcome        = "nexo.tool.outcome"
	attrMCPServer      = "nexo.mcp.server"
	attrModelCallID    = "nexo.model_call.id"
	attrWorkflowID     = "temporalWorkflowID" // as the Temporal interceptor names them
	attrRunID          = "temporalRunID"
)

// Tool call outcomes (the nexo.tool.outcome attribute and the outcome label).
const (
	outcomeOK     = "ok"     // the tool ran and succeeded
	outcomeError  = "error"  // the tool ran and failed: the model sees an error result
	outcomeFailed = "failed" // the activity failed (broken infrastructure); Temporal may retry it
)

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	t *Telemetry
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if len(in.Args) == 1 {
		switch req := in.Args[0].(type) {
		case api.CompleteChatRequest:
			return a.chat(ctx, in, req)
		case api.RunToolRequest:
			return a.tool(ctx, in, toolCall{name: req.Tool, callID: req.CallID, args: req.Args, runID: req.RunID})
		case api.CallMCPToolRequest:
			return a.tool(ctx, in, toolCall{name: req.Server.Name + api.MCPToolSeparator + req.Tool, callID: req.CallID, args: req.Args,
				runID: req.RunID, server: req.Server.Name})
		}
	}
	return a.Next.ExecuteActivity(ctx, in)
}

// chat wraps CompleteChat in a `chat <model>` span and counts the call and its tokens.
func (a *activityInbound) chat(ctx context.Context, in *interceptor.ExecuteActivityInput, req api.CompleteChatRequest) (any, error) {
	t := a.t
	agent := agentOf(ctx)
	model := req.Model
	if model == "" {
		model = t.opts.DefaultModel
	}
	attrs := []attribute.KeyValue{attribute.String(attrOperation, "chat"), attribute.String(attrProvider, "openai"),
		attribute.String(attrRequestModel, model), attribute.String(attrModelCallID, req.CallID)}
	if agent != "" {
		attrs = append(attrs, attribute.String(attrAgentName, agent))
	}
	attrs = append(attrs, runAttrs(ctx)...)
	if t.opts.CaptureContent {
		if len(req.Messages) > 0 {
			attrs = append(attrs, attribute.String(attrInputMessages, jsonString(req.Messages)))
		}
		if req.System != "" {
			attrs = append(attrs, attribute.String(attrSystem, req.System))
		}
	}
	ctx, sp := t.startSpan(ctx, "chat "+model, trace.SpanKindClient, attrs)
	ret, err := a.Next.ExecuteActivity(ctx, in)
	out, _ := ret.(api.CompleteChatResult)
	if err == nil {
		if out.Model != "" {
			sp.SetAttributes(attribute.String(attrResponseModel, out.Model))
		}
		sp.SetAttributes(attribute.Int(attrInputTokens, out.Usage.PromptTokens), attribute.Int(attrOutputTokens, out.Usage.CompletionTokens))
		if out.FinishReason != "" {
			sp.SetAttributes(attribute.StringSlice(attrFinishReasons, []string{out.FinishReason}))
		}
		if t.opts.CaptureContent {
			sp.SetAttributes(attribute.String(attrOutputMessages, jsonString(out.Message)))
		}
	}
	endSpan(sp, err)
	t.metrics.modelCall(agent, model, out, err)
	return ret, err
}

type toolCall struct {
	name, callID, runID, server string
	args                        json.RawMessage
}

// tool wraps RunTool and CallMCPTool in an `execute_tool <tool>` span, counts the call by
// outcome and times it.
func (a *activityInbound) tool(ctx context.Context, in *interceptor.ExecuteActivityInput, c toolCall) (any, error) {
	t := a.t
	agent := agentOf(ctx)
	typ := "function"
	if c.server != "" {
		typ = "extension"
	}
	attrs := []attribute.KeyValue{attribute.String(attrOperation, "execute_tool"), attribute.String(attrToolName, c.name),
		attribute.String(attrToolCallID, c.callID), attribute.String(attrToolType, typ)}
	if c.server != "" {
		attrs = append(attrs, attribute.String(attrMCPServer, c.server))
	}
	if agent != "" {
		attrs = append(attrs, attribute.String(attrAgentName, agent))
	}
	attrs = append(attrs, runAttrs(ctx)...)
	if t.opts.CaptureContent && len(c.args) > 0 {
		attrs = append(attrs, attribute.String(attrToolArgs, string(c.args)))
	}
	began := time.Now()
	ctx, sp := t.startSpan(ctx, "execute_tool "+c.name, trace.SpanKindInternal, attrs)
	ret, err := a.Next.ExecuteActivity(ctx, in)
	res, _ := ret.(api.RunToolResult)
	outcome := outcomeOK
	switch {
	case err != nil:
		outcome = outcomeFailed
	case res.IsError:
		outcome = outcomeError
		sp.SetStatus(codes.Error, "the tool reported an error")
	}
	sp.SetAttributes(attribute.String(attrOutcome, outcome))
	if err == nil && t.opts.CaptureContent {
		sp.SetAttributes(attribute.String(attrToolResult, res.Content))
	}
	endSpan(sp, err)
	t.metrics.toolCall(agent, c.name, outcome, time.Since(began))
	return ret, err
}

// runAttrs ties an activity's span to its run: workflow id and run id.
func runAttrs(ctx context.Context) []attribute.KeyValue {
	if !activity.IsActivity(ctx) {
		return nil
	}
	info := activity.GetInfo(ctx)
	return []attribute.KeyValue{attribute.String(attrWorkflowID, info.WorkflowExecution.ID),
		attribute.String(attrRunID, info.WorkflowExecution.RunID)}
}

func endSpan(sp trace.Span, err error) {
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
		sp.SetAttributes(attribute.String(attrErrorType, errorType(err)))
	}
	sp.End()
}

// errorType is the error.type of a failure: the Temporal application error type when
// there is one (api.ErrType*), else a generic name.
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) || errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return "_OTHER"
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
