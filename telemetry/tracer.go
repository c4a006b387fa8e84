package telemetry

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// spanKey is the workflow-context key the Temporal tracing interceptor keeps its spans
// under (TracerOptions.SpanContextKey): ours, so the workflow spans of this package
// (invoke_agent, await_approval) can be put there and become the parents of the
// interceptor's StartActivity spans.
type spanKey struct{}

// tracer is Temporal's OpenTelemetry tracer (contrib/opentelemetry) made replay-safe for
// the spans that live as long as a workflow or an update:
//
//   - the RunWorkflow span gets ids derived from the SDK's IdempotencyKey for it, so every
//     worker that replays the run computes the same ids, and children exported before a
//     replay (activity spans, the workflow spans of this package) keep their parent;
//   - it is exported only when the workflow (or update) returned live, not replaying:
//     a worker that evicts the run from its cache, or a replayer, exports nothing.
//
// Everything else is the contrib tracer's.
type tracer struct {
	interceptor.BaseTracer
	inner interceptor.Tracer

	// mu serialises StartSpan, so pending reaches exactly the span being started.
	mu      sync.Mutex
	pending *fixedIDs
}

func newTracer(tr trace.Tracer) (*tracer, error) {
	t := &tracer{}
	inner, err := temporalotel.NewTracer(temporalotel.TracerOptions{
		Tracer:         tr,
		SpanContextKey: spanKey{},
		// Every `starter` poll is a query: traced, they would bury the runs' traces.
		DisableQueryTracing: true,
		SpanStarter: func(ctx context.Context, tr trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
			if t.pending != nil { // under t.mu, held by StartSpan
				ctx = context.WithValue(ctx, fixedIDsKey{}, *t.pending)
			}
			_, s := tr.Start(ctx, name, opts...)
			return s
		},
	})
	if err != nil {
		return nil, err
	}
	t.inner = inner
	return t, nil
}

func (t *tracer) Options() interceptor.TracerOptions { return t.inner.Options() }

func (t *tracer) UnmarshalSpan(m map[string]string) (interceptor.TracerSpanRef, error) {
	return t.inner.UnmarshalSpan(m)
}

func (t *tracer) MarshalSpan(s interceptor.TracerSpan) (map[string]string, error) {
	inner, ok := t.unwrap(s).(interceptor.TracerSpan)
	if !ok || inner == nil {
		return nil, nil // nothing to propagate
	}
	return t.inner.MarshalSpan(inner)
}

func (t *tracer) SpanFromContext(ctx context.Context) interceptor.TracerSpan {
	return t.inner.SpanFromContext(ctx)
}

func (t *tracer) ContextWithSpan(ctx context.Context, s interceptor.TracerSpan) context.Context {
	inner, ok := t.unwrap(s).(interceptor.TracerSpan)
	if !ok || inner == nil {
		return ctx
	}
	return t.inner.ContextWithSpan(ctx, inner)
}

func (t *tracer) GetLogger(l sdklog.Logger, ref interceptor.TracerSpanRef) sdklog.Logger {
	return t.inner.GetLogger(l, t.unwrap(ref))
}

func (t *tracer) SpanName(o *interceptor.TracerStartSpanOptions) string { return t.inner.SpanName(o) }

// Operations whose span lasts as long as the workflow or the update does.
const (
	opRunWorkflow  = "RunWorkflow"
	opHandleUpdate = "HandleUpdate"
)

func (t *tracer) StartSpan(o *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	opts := *o
	opts.Parent = t.unwrap(o.Parent)
	t.mu.Lock()
	defer t.mu.Unlock()
	if opts.Operation != opRunWorkflow && opts.Operation != opHandleUpdate {
		return t.inner.StartSpan(&opts)
	}
	// Only the RunWorkflow key is the same on every replay (it is the first); an update's
	// counts the signals the worker saw live, so its span keeps a random id.
	if opts.Operation == opRunWorkflow && opts.IdempotencyKey != "" {
		ids := idsFromKey(opts.IdempotencyKey)
		t.pending = &ids
	}
	s, err := t.inner.StartSpan(&opts)
	t.pending = nil
	if err != nil {
		return nil, err
	}
	return &deferredSpan{TracerSpan: s}, nil
}

// unwrap turns this package's spans into what the contrib tracer knows.
func (t *tracer) unwrap(ref interceptor.TracerSpanRef) interceptor.TracerSpanRef {
	switch s := ref.(type) {
	case *deferredSpan:
		return s.TracerSpan
	case *workflowSpan:
		return t.inner.SpanFromContext(trace.ContextWithSpanContext(context.Background(), s.sc))
	}
	return ref
}

// deferredSpan is a RunWorkflow or HandleUpdate span: ended (exported) only when the
// interceptor marked it done, that is when the workflow or update returned live.
type deferredSpan struct {
	interceptor.TracerSpan
	done atomic.Bool
}

func (d *deferredSpan) Finish(o *interceptor.TracerFinishSpanOptions) {
	if !d.done.Load() {
		return // evicted or replayed: the worker that finishes the run exports it
	}
	var can *workflow.ContinueAsNewError
	if o != nil && errors.As(o.Error, &can) {
		o = &interceptor.TracerFinishSpanOptions{} // continuing as new is not a failure
	}
	d.TracerSpan.Finish(o)
}

// spanContextOf is the OpenTelemetry span context of a span the tracing interceptor or
// this package put in a workflow context, or an invalid one.
func spanContextOf(v any) trace.SpanContext {
	switch s := v.(type) {
	case *deferredSpan:
		return spanContextOf(s.TracerSpan)
	case *workflowSpan:
		return s.sc
	case interface{ SpanContext() trace.SpanContext }:
		return s.SpanContext()
	}
	return trace.SpanContext{}
}

// fixedIDs are the ids a span must get (idGenerator), carried in the context passed to
// Tracer.Start.
type fixedIDs struct {
	trace trace.TraceID // used when the span has no parent
	span  trace.SpanID
}

type fixedIDsKey struct{}

func idsFromKey(key string) fixedIDs {
	var ids fixedIDs
	ts := sha256.Sum256([]byte("trace|" + key))
	ss := sha256.Sum256([]byte("span|" + key))
	copy(ids.trace[:], ts[:])
	copy(ids.span[:], ss[:])
	return ids
}

// idGenerator gives a span the ids in its start context (fixedIDs), else random ones.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(fixedIDsKey{}).(fixedIDs); ok {
		return f.trace, f.span
	}
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(fixedIDsKey{}).(fixedIDs); ok {
		return f.span
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
