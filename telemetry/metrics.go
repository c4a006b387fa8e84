package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/workflows"
)

// Metric names. The Prometheus exporter adds _total to counters and _seconds to
// histograms in seconds, so the series are nexo_model_calls_total,
// nexo_tool_call_duration_seconds_bucket, and so on (README "Traces and metrics").
const (
	metricModelCalls       = "nexo_model_calls"
	metricInputTokens      = "nexo_model_input_tokens"
	metricOutputTokens     = "nexo_model_output_tokens"
	metricToolCalls        = "nexo_tool_calls"
	metricToolDuration     = "nexo_tool_call_duration"
	metricApprovalsPending = "nexo_approvals_pending"
	metricApprovalDecision = "nexo_approval_decision_duration"
	metricSandboxesLive    = "nexo_sandboxes_live"
	metricOffloadedBytes   = "nexo_payload_offloaded_bytes"
	metricModelCost        = "nexo_model_cost_usd"
	metricTokenWait        = "nexo_model_token_wait"
	metricNotifications    = "nexo_notifications"
)

// metrics are the platform's instruments; the zero value (no metrics.addr) records nothing.
type metrics struct {
	modelCalls, inputTokens, outputTokens, toolCalls metric.Int64Counter
	toolDuration, approvalDecision                   metric.Float64Histogram
	// tokenWait is how long model calls waited for their endpoint's token limiter, by
	// endpoint.
	tokenWait metric.Float64Histogram
	// cost is what priced model calls cost (USD, from llm.prices), by agent and model;
	// an unpriced call adds nothing (its tokens are counted).
	cost metric.Float64Counter
	on   bool
}

func newMetrics(m metric.Meter) (*metrics, error) {
	var errs []error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400))
		errs = append(errs, err)
		return h
	}
	cost, err := m.Float64Counter(metricModelCost, metric.WithDescription("What priced model calls cost in US dollars (llm.prices), by agent and model."))
	errs = append(errs, err)
	ms := &metrics{on: true, cost: cost,
		modelCalls:       counter(metricModelCalls, "Model calls (CompleteChat activities), by agent, model and outcome.", ""),
		inputTokens:      counter(metricInputTokens, "Prompt tokens the provider counted, by agent and model.", ""),
		outputTokens:     counter(metricOutputTokens, "Completion tokens the provider counted, by agent and model.", ""),
		toolCalls:        counter(metricToolCalls, "Tool calls (built-in and MCP), by agent, tool and outcome (ok, error, failed).", ""),
		toolDuration:     hist(metricToolDuration, "Time a tool call's activity took, by tool and outcome."),
		approvalDecision: hist(metricApprovalDecision, "Time from an approval's request to its decision (workflow time), by tool and action."),
		tokenWait:        hist(metricTokenWait, "Time a model call waited for its booking with its endpoint's token limiter (limits.tokens_per_minute), by endpoint."),
	}
	return ms, errors.Join(errs...)
}

func (m *metrics) modelCall(agent, model string, out api.CompleteChatResult, err error) {
	if m == nil || !m.on {
		return
	}
	ctx := context.Background()
	labels := metric.WithAttributes(attribute.String("agent", agent), attribute.String("model", model))
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.modelCalls.Add(ctx, 1, metric.WithAttributes(attribute.String("agent", agent), attribute.String("model", model), attribute.String("outcome", outcome)))
	if err != nil {
		return
	}
	m.inputTokens.Add(ctx, int64(out.Usage.PromptTokens), labels)
	m.outputTokens.Add(ctx, int64(out.Usage.CompletionTokens), labels)
	if out.Usage.Priced {
		m.cost.Add(ctx, out.Usage.Cost, labels)
	}
}

func (m *metrics) tokenWaited(endpoint string, d time.Duration) {
	if m == nil || !m.on {
		return
	}
	m.tokenWait.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("endpoint", endpoint)))
}

func (m *metrics) toolCall(agent, tool, outcome string, took time.Duration) {
	if m == nil || !m.on {
		return
	}
	ctx := context.Background()
	m.toolCalls.Add(ctx, 1, metric.WithAttributes(attribute.String("agent", agent), attribute.String("tool", tool), attribute.String("outcome", outcome)))
	m.toolDuration.Record(ctx, took.Seconds(), metric.WithAttributes(attribute.String("tool", tool), attribute.String("outcome", outcome)))
}

func (m *metrics) approvalDecided(start, end map[string]any, took time.Duration) {
	if m == nil || !m.on {
		return
	}
	tool, _ := start[workflows.AttrToolName].(string)
	action, _ := end[workflows.AttrApprovalAction].(string)
	if action == "" {
		action = "none" // the wait ended without a decision (the run was canceled)
	}
	m.approvalDecision.Record(context.Background(), took.Seconds(),
		metric.WithAttributes(attribute.String("tool", tool), attribute.String("action", action)))
}

// Gauges read when scraped: the worker gives the functions (Telemetry.Observe).
type gauges struct {
	// SandboxesLive is how many sandboxes this worker holds open.
	SandboxesLive func() int
	// ApprovalsPending counts the runs waiting for an approval, as Temporal's visibility
	// sees them (the same number on every worker: it is the deployment's).
	ApprovalsPending func(ctx context.Context) (int64, error)
	// OffloadedBytes is how many payload bytes this process offloaded to the blob store.
	OffloadedBytes func() int64
}

func registerGauges(m metric.Meter, g gauges, onErr func(error)) error {
	live, err1 := m.Int64ObservableGauge(metricSandboxesLive, metric.WithDescription("Sandboxes this worker holds open (virtual, local, docker)."))
	pending, err2 := m.Int64ObservableGauge(metricApprovalsPending, metric.WithDescription("Runs waiting for an approval in the namespace (a visibility count)."))
	off, err3 := m.Int64ObservableCounter(metricOffloadedBytes, metric.WithDescription("Payload bytes this process stored in the blob store through External Storage."), metric.WithUnit("By"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if g.SandboxesLive != nil {
			o.ObserveInt64(live, int64(g.SandboxesLive()))
		}
		if g.OffloadedBytes != nil {
			o.ObserveInt64(off, g.OffloadedBytes())
		}
		if g.ApprovalsPending != nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			n, err := g.ApprovalsPending(cctx)
			cancel()
			if err != nil {
				onErr(fmt.Errorf("count pending approvals for %s: %w", metricApprovalsPending, err))
			} else {
				o.ObserveInt64(pending, n)
			}
		}
		return nil
	}, live, pending, off)
	return err
}

// metricsServer serves /metrics from a Prometheus registry fed by the meter provider.
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
}

func newPrometheus() (*prometheus.Registry, sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("create the Prometheus exporter: %w", err)
	}
	return reg, exp, nil
}

func serveMetrics(addr string, reg *prometheus.Registry) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.addr %s: listen: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go s.srv.Serve(ln)
	return s, nil
}

// registerNotifications registers the nexo_notifications gauge: per receiver, the
// notifications its outbox has not delivered yet (status pending) and those it gave up
// (status failed, the latest api.NotifierKeepFailed), read from the notifiers at every
// scrape.
func registerNotifications(m metric.Meter, read func(context.Context) ([]api.NotifierStatus, error), onErr func(error)) error {
	g, err := m.Int64ObservableGauge(metricNotifications, metric.WithDescription(
		"Approval notifications in the receivers' outboxes, by receiver and status (pending: not delivered yet; failed: given up)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		outboxes, err := read(cctx)
		cancel()
		if err != nil {
			onErr(fmt.Errorf("read the notification outboxes for %s: %w", metricNotifications, err))
			return nil
		}
		for _, ob := range outboxes {
			if ob.Error != "" {
				continue
			}
			o.ObserveInt64(g, int64(len(ob.Pending)), metric.WithAttributes(attribute.String("receiver", ob.Receiver), attribute.String("status", api.NotifyPending)))
			o.ObserveInt64(g, int64(len(ob.Failed)), metric.WithAttributes(attribute.String("receiver", ob.Receiver), attribute.String("status", api.NotifyFailed)))
		}
		return nil
	}, g)
	return err
}
