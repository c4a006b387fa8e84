// Package telemetry is where a Nexo process says where the time went and what it cost:
// OpenTelemetry traces and Prometheus metrics.
//
// Traces follow the standard OpenTelemetry environment, as any other program's do:
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns them on,
// OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL) picks http/protobuf (the default)
// or grpc, OTEL_EXPORTER_OTLP_HEADERS adds headers, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the process. Without an endpoint there is no exporter and
// no goroutine. The spans: Temporal's own (go.temporal.io/sdk/contrib/opentelemetry:
// StartWorkflow, RunWorkflow, StartActivity, RunActivity, HandleSignal, ...), made
// replay-safe here (tracer.go), and the GenAI ones of the OpenTelemetry semantic
// conventions: `invoke_agent <agent>` around an agent's loop and `await_approval <tool>`
// around an approval wait (workflow time, workflows.SpanTracer), `chat <model>` per model
// call and `execute_tool <tool>` per tool call (activity.go). Prompts, completions and
// tool arguments and results are on them only with telemetry.capture_content.
//
// Metrics (worker, metrics.addr): the Temporal SDK's temporal_* worker metrics through
// its metrics handler, and the platform's nexo_* (metrics.go), on /metrics.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/nexo-temporal/nexo/api"
)

// scope is the instrumentation scope of the platform's spans and metrics.
const scope = "github.com/nexo-temporal/nexo"

// Options configure a process's telemetry.
type Options struct {
	// Service is the service.name when OTEL_SERVICE_NAME does not set one ("nexo-worker").
	Service string
	// Instance is the service.instance.id: the worker's Temporal identity, so a span and a
	// series name the worker that made it.
	Instance string
	// CaptureContent puts prompts, completions, tool arguments and results on spans
	// (config telemetry.capture_content). Default: never.
	CaptureContent bool
	// MetricsAddr is where /metrics is served (config metrics.addr); "" serves none.
	MetricsAddr string
	// DefaultModel names a model call's model when the agent names none (llm.model).
	DefaultModel string
	// Getenv reads the OTEL_* environment; nil means os.Getenv. The exporters read their
	// own variables (endpoint, headers, timeout) from the process environment.
	Getenv func(string) string
	// Logger gets what cannot be returned (a failed export, a failed scrape callback).
	Logger *slog.Logger
	// SpanExporter, when set, receives the spans instead of an OTLP exporter, whatever
	// the environment says (tests; a program embedding the platform with its own
	// pipeline). Spans go to it synchronously as they end.
	SpanExporter sdktrace.SpanExporter
}

// Telemetry is one process's traces and metrics. The zero of each part is off.
type Telemetry struct {
	opts    Options
	tp      *sdktrace.TracerProvider // nil: no traces
	tracer  trace.Tracer             // the platform's spans; nil without traces
	wf      *tracer                  // Temporal's tracer, replay-safe
	mp      *sdkmetric.MeterProvider // nil: no metrics
	metrics *metrics
	server  *metricsServer
}

// ErrBadProtocol: OTEL_EXPORTER_OTLP_PROTOCOL names a protocol other than
// http/protobuf or grpc.
var ErrBadProtocol = errors.New("unsupported OTLP protocol")

// New sets up what the environment and o ask for: traces when an OTLP endpoint is set,
// metrics on o.MetricsAddr when set. With neither it returns a Telemetry that does
// nothing. Call Shutdown on exit, which flushes the spans still buffered.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Telemetry{opts: o}
	if o.SpanExporter != nil || tracesOn(o.Getenv) {
		processor := sdktrace.WithSyncer(o.SpanExporter)
		if o.SpanExporter == nil {
			exp, err := newExporter(ctx, o.Getenv)
			if err != nil {
				return nil, err
			}
			processor = sdktrace.WithBatcher(exp)
		}
		res, err := t.resource(ctx)
		if err != nil {
			return nil, err
		}
		t.tp = sdktrace.NewTracerProvider(processor, sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{}))
		t.tracer = t.tp.Tracer(scope)
		if t.wf, err = newTracer(t.tp.Tracer("temporal-sdk-go")); err != nil {
			return nil, errors.Join(err, t.tp.Shutdown(ctx))
		}
	}
	if o.MetricsAddr != "" {
		reg, reader, err := newPrometheus()
		if err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
		res, err := t.resource(ctx)
		if err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
		if t.metrics, err = newMetrics(t.mp.Meter(scope)); err != nil {
			return nil, errors.Join(fmt.Errorf("create the nexo_* metrics: %w", err), t.Shutdown(ctx))
		}
		if t.server, err = serveMetrics(o.MetricsAddr, reg); err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
	}
	return t, nil
}

// tracesOn: an OTLP endpoint is set, and traces are not turned off by
// OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true.
func tracesOn(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// SecretEnvNames are the OTEL_* variables that carry credentials (a collector's token in
// its headers). A long-running process takes them out of its environment at start
// (internal/secrets) and hands them to New through Options.Getenv: the exporters would
// otherwise read them from the environment a sandboxed command can see.
var SecretEnvNames = []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}

// otlpHeaders parses the exporter's headers from getenv as the OTLP exporter
// specification writes them (comma-separated key=value, values percent-encoded), the
// traces-only variable winning over the general one. nil when neither is set.
func otlpHeaders(getenv func(string) string) (map[string]string, error) {
	name := "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	v := getenv(name)
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_HEADERS"
		v = getenv(name)
	}
	if v == "" {
		return nil, nil
	}
	out := map[string]string{}
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			// Not the pair itself: it may be (part of) a token.
			return nil, fmt.Errorf("%s: entry %d is not key=value (a header name, '=', its percent-encoded value)", name, i+1)
		}
		dec, err := url.PathUnescape(val)
		if err != nil {
			return nil, fmt.Errorf("%s: the value of header %s is not percent-encoded correctly", name, k)
		}
		out[k] = strings.TrimSpace(dec)
	}
	return out, nil
}

func newExporter(ctx context.Context, getenv func(string) string) (*otlptrace.Exporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	headers, err := otlpHeaders(getenv)
	if err != nil {
		return nil, err
	}
	var exp *otlptrace.Exporter
	switch proto {
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		if headers != nil {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		if headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: %w (use http/protobuf or grpc)", proto, ErrBadProtocol)
	}
	if err != nil {
		return nil, fmt.Errorf("create the OTLP trace exporter (%s): %w", proto, err)
	}
	return exp, nil
}

// resource names the process: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over
// o.Service.
func (t *Telemetry) resource(ctx context.Context) (*resource.Resource, error) {
	svc := t.opts.Service
	if svc == "" {
		svc = "nexo"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(svc)}
	if t.opts.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(t.opts.Instance))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(),
		resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && res == nil {
		return nil, fmt.Errorf("describe the process for OpenTelemetry: %w", err)
	}
	return res, nil
}

// Tracing says whether traces are exported.
func (t *Telemetry) Tracing() bool { return t != nil && t.tp != nil }

// MetricsAddr is the address /metrics is served at (the port chosen when metrics.addr
// ends in :0), or "".
func (t *Telemetry) MetricsAddr() string {
	if t == nil || t.server == nil {
		return ""
	}
	return t.server.ln.Addr().String()
}

// Interceptors are the Temporal interceptors of a client (and of the workers made from
// it): the tracing interceptor, then the platform's, which must sit inside it. None when
// both traces and metrics are off, so such a process runs exactly as before.
func (t *Telemetry) Interceptors() []interceptor.ClientInterceptor {
	if t == nil || (t.tp == nil && t.mp == nil) {
		return nil
	}
	var out []interceptor.ClientInterceptor
	if t.wf != nil {
		out = append(out, interceptor.NewTracingInterceptor(t.wf))
	}
	return append(out, &nexoInterceptor{t: t})
}

// WorkerInterceptors are Interceptors for a worker.WorkflowReplayer or a worker that is
// not made from a client carrying them.
func (t *Telemetry) WorkerInterceptors() []interceptor.WorkerInterceptor {
	var out []interceptor.WorkerInterceptor
	for _, i := range t.Interceptors() {
		if w, ok := i.(interceptor.WorkerInterceptor); ok {
			out = append(out, w)
		}
	}
	return out
}

// ClientOptions adds the interceptors and, with metrics on, the SDK's metrics handler
// (temporal_* series) to a client's options. Use it as a connect.Option.
func (t *Telemetry) ClientOptions(o *client.Options) {
	if t == nil {
		return
	}
	o.Interceptors = append(o.Interceptors, t.Interceptors()...)
	if t.mp != nil {
		o.MetricsHandler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter:                t.mp.Meter("temporal-sdk-go"),
			UseMonotonicCounters: true,
			OnError:              func(err error) { t.opts.Logger.Warn("Temporal SDK metric", slog.String("error", err.Error())) },
		})
	}
}

// TokenWait records how long a model call waited for its endpoint's token limiter
// (activities.Deps.TokenWait); nothing without metrics.
func (t *Telemetry) TokenWait(endpoint string, d time.Duration) {
	if t == nil {
		return
	}
	t.metrics.tokenWaited(endpoint, d)
}

// Observe registers the gauges read at every scrape. A nil function leaves its gauge out.
func (t *Telemetry) Observe(sandboxesLive func() int, approvalsPending func(context.Context) (int64, error), offloadedBytes func() int64) error {
	if t == nil || t.mp == nil {
		return nil
	}
	return registerGauges(t.mp.Meter(scope), gauges{SandboxesLive: sandboxesLive, ApprovalsPending: approvalsPending,
		OffloadedBytes: offloadedBytes}, func(err error) { t.opts.Logger.Warn("metrics", slog.String("error", err.Error())) })
}

// ObserveNotifications registers the nexo_notifications gauge, read through read (the
// receivers' outboxes, runs.Client.Notifications) at every scrape.
func (t *Telemetry) ObserveNotifications(read func(context.Context) ([]api.NotifierStatus, error)) error {
	if t == nil || t.mp == nil {
		return nil
	}
	return registerNotifications(t.mp.Meter(scope), read, func(err error) { t.opts.Logger.Warn("metrics", slog.String("error", err.Error())) })
}

// Shutdown stops /metrics and flushes and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.server != nil {
		errs = append(errs, t.server.srv.Shutdown(ctx))
	}
	if t.tp != nil {
		if err := t.tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush traces: %w", err))
		}
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// startSpan starts one of the platform's activity spans (chat, execute_tool): a child of
// the span in ctx (the interceptor's RunActivity). Without traces it is a no-op span.
func (t *Telemetry) startSpan(ctx context.Context, name string, kind trace.SpanKind, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
