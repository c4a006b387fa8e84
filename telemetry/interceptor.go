package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/workflows"
)

// agentHeader is the Temporal header an activity scheduled inside an agent's loop carries
// the agent's name in, so the worker that runs it labels its metrics and spans by agent.
const agentHeader = "nexo-agent"

// nexoInterceptor sits inside the Temporal tracing interceptor (it sees the spans that
// one starts): it gives workflow code a SpanTracer, marks the RunWorkflow and HandleUpdate
// spans done when they return live, tells activities their agent, and wraps the model and
// tool activities in GenAI spans and metrics.
type nexoInterceptor struct {
	interceptor.InterceptorBase
	t *Telemetry
}

func (n *nexoInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowInbound{t: n.t, info: workflow.GetInfo(ctx)}
	i.Next = next
	return i
}

func (n *nexoInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityInbound{t: n.t}
	i.Next = next
	return i
}

// workflowInbound lives as long as one execution of a run in a worker's cache; a replay
// makes a new one, which counts spans from zero again.
type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	t     *Telemetry
	info  *workflow.Info
	spans uint64
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{}
	o.Next = outbound
	return w.Next.Init(o)
}

func (w *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	ret, err := w.Next.ExecuteWorkflow(workflows.WithSpanTracer(ctx, w), in)
	markDone(ctx)
	return ret, err
}

func (w *workflowInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	// An update's handler runs in a context of its own, not the workflow function's.
	ret, err := w.Next.ExecuteUpdate(workflows.WithSpanTracer(ctx, w), in)
	markDone(ctx)
	return ret, err
}

// markDone lets the workflow's (or update's) span be exported when it returned live.
func markDone(ctx workflow.Context) {
	if workflow.IsReplaying(ctx) {
		return
	}
	if d, ok := ctx.Value(spanKey{}).(*deferredSpan); ok {
		d.done.Store(true)
	}
}

// workflowSpan is a span of workflow code (workflows.SpanTracer) as it sits in the
// workflow context: its ids, and the agent it belongs to.
type workflowSpan struct {
	sc    trace.SpanContext
	agent string
}

// Finish is never called: the tracing interceptor finishes only the spans it starts.
func (*workflowSpan) Finish(*interceptor.TracerFinishSpanOptions) {}

// StartSpan implements workflows.SpanTracer: ids from the run and this execution's span
// count, parent the span in ctx (the RunWorkflow span, an update's, or an enclosing
// workflow span), exported at its end when that end runs live.
func (w *workflowInbound) StartSpan(ctx workflow.Context, s workflows.SpanStart) (workflow.Context, func(workflows.SpanEnd)) {
	w.spans++
	parentVal := ctx.Value(spanKey{})
	parent := spanContextOf(parentVal)
	agent, _ := s.Attrs[workflows.AttrAgentName].(string)
	if ps, ok := parentVal.(*workflowSpan); ok && agent == "" {
		agent = ps.agent
	}
	ex := w.info.WorkflowExecution
	h := sha256.New()
	h.Write([]byte(w.info.Namespace + "|" + ex.ID + "|" + ex.RunID + "|" + s.Name))
	binary.Write(h, binary.BigEndian, w.spans)
	sum := h.Sum(nil)
	var ids fixedIDs
	copy(ids.trace[:], sum[8:24])
	copy(ids.span[:], sum[:8])
	traceID := ids.trace
	if parent.IsValid() {
		traceID = parent.TraceID()
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: ids.span, TraceFlags: trace.FlagsSampled})
	start := workflow.Now(ctx)
	attrs := s.Attrs
	return workflow.WithValue(ctx, spanKey{}, &workflowSpan{sc: sc, agent: agent}), func(e workflows.SpanEnd) {
		if workflow.IsReplaying(ctx) {
			return // the live execution of this end exports it, once
		}
		end := workflow.Now(ctx)
		w.t.exportWorkflowSpan(s.Name, parent, ids, start, end, ex.ID, ex.RunID, attrs, e)
		if s.Kind == workflows.SpanApproval {
			w.t.metrics.approvalDecided(attrs, e.Attrs, end.Sub(start))
		}
	}
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	setAgentHeader(ctx)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	setAgentHeader(ctx)
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

func setAgentHeader(ctx workflow.Context) {
	ws, ok := ctx.Value(spanKey{}).(*workflowSpan)
	if !ok || ws.agent == "" {
		return
	}
	if h := interceptor.WorkflowHeader(ctx); h != nil {
		if p, err := converter.GetDefaultDataConverter().ToPayload(ws.agent); err == nil {
			h[agentHeader] = p
		}
	}
}

// agentOf is the agent an activity runs for, from its header, or "".
func agentOf(ctx context.Context) string {
	p := interceptor.Header(ctx)[agentHeader]
	if p == nil {
		return ""
	}
	var agent string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &agent); err != nil {
		return ""
	}
	return agent
}

// exportWorkflowSpan exports one finished workflow span with its workflow times and ids.
func (t *Telemetry) exportWorkflowSpan(name string, parent trace.SpanContext, ids fixedIDs, start, end time.Time,
	workflowID, runID string, startAttrs map[string]any, e workflows.SpanEnd) {
	if t.tracer == nil {
		return
	}
	ctx := context.WithValue(context.Background(), fixedIDsKey{}, ids)
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	attrs := append(kvs(startAttrs), kvs(e.Attrs)...)
	attrs = append(attrs, attribute.String(attrWorkflowID, workflowID), attribute.String(attrRunID, runID))
	_, sp := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if e.Err != nil {
		sp.SetStatus(codes.Error, e.Err.Error())
		sp.SetAttributes(attribute.String(attrErrorType, errorType(e.Err)))
	}
	sp.End(trace.WithTimestamp(end))
}

// kvs turns a span's attribute map into attributes, in key order; empty strings are left
// out (an approval decided by nobody in particular has no decided_by).
func kvs(m map[string]any) []attribute.KeyValue {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]attribute.KeyValue, 0, len(keys))
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				out = append(out, attribute.String(k, v))
			}
		case int:
			out = append(out, attribute.Int(k, v))
		case int64:
			out = append(out, attribute.Int64(k, v))
		case bool:
			out = append(out, attribute.Bool(k, v))
		}
	}
	return out
}
