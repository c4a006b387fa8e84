package platform

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/telemetry"
)

// startTelemetry sets up the worker's traces (OTEL_* environment) and metrics
// (metrics.addr) and says on stdout what it turned on. stop flushes them; call it after
// the worker and the client stopped.
// getenv answers for the OTEL_* variables, the secret ones (telemetry.SecretEnvNames)
// from memory.
func startTelemetry(ctx context.Context, cfg config.Config, getenv func(string) string, stdout io.Writer, logger *slog.Logger) (*telemetry.Telemetry, func(), error) {
	tel, err := telemetry.New(ctx, telemetry.Options{Service: "nexo-worker", Instance: workerIdentity(), CaptureContent: cfg.Telemetry.CaptureContent,
		MetricsAddr: cfg.Metrics.Addr, DefaultModel: cfg.LLM.Model, Logger: logger, Getenv: getenv})
	if err != nil {
		return nil, nil, err
	}
	if tel.Tracing() {
		endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		if endpoint == "" {
			endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		content := "no content"
		if cfg.Telemetry.CaptureContent {
			content = "with prompts, completions and tool arguments (telemetry.capture_content)"
		}
		fmt.Fprintf(stdout, "Traces: OTLP to %s (%s)\n", endpoint, content)
	}
	if addr := tel.MetricsAddr(); addr != "" {
		fmt.Fprintf(stdout, "Metrics: http://%s/metrics\n", addr)
	}
	return tel, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			logger.Warn("stop telemetry", slog.String("error", err.Error()))
		}
	}, nil
}

// telemetryOption is the connect option carrying the worker's interceptors and metrics
// handler.
func telemetryOption(tel *telemetry.Telemetry) connect.Option {
	return func(o *client.Options) { tel.ClientOptions(o) }
}

// observeWorker registers the gauges read at every scrape: this worker's live sandboxes,
// the namespace's runs waiting for an approval, the payload bytes offloaded, and the task
// queue's notifications not delivered or given up (nexo_notifications).
func observeWorker(tel *telemetry.Telemetry, tc client.Client, namespace, taskQueue string, sandboxes *activities.Sandboxes) error {
	q := fmt.Sprintf("ExecutionStatus = 'Running' AND %s IS NOT NULL", api.SearchAttributeApprovalAgent)
	pending := func(ctx context.Context) (int64, error) {
		resp, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: q})
		if err != nil {
			return 0, err
		}
		return resp.GetCount(), nil
	}
	if err := tel.ObserveNotifications(runs.New(tc, namespace, taskQueue).Notifications); err != nil {
		return err
	}
	return tel.Observe(sandboxes.Live, pending, payloads.OffloadedBytes)
}
