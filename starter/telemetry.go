package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/telemetry"
)

// traced is the connect option that traces this command's Temporal calls (the run it
// starts, the signals it sends) when OTEL_EXPORTER_OTLP_ENDPOINT is set, so a run's trace
// begins at the `starter` that started it. Off otherwise. closeTelemetry flushes it.
func (e *env) traced(ctx context.Context, service string) (connect.Option, error) {
	if service == "" {
		service = "nexo-starter"
	}
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	tel, err := telemetry.New(ctx, telemetry.Options{Service: service, CaptureContent: cfg.Telemetry.CaptureContent, Getenv: e.getenv})
	if err != nil {
		return nil, fmt.Errorf("set up tracing (OTEL_*): %w", err)
	}
	e.tel = tel
	return func(o *client.Options) { tel.ClientOptions(o) }, nil
}

func (e *env) closeTelemetry() {
	if e.tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.tel.Shutdown(ctx); err != nil {
		fmt.Fprintf(e.stderr, "warning: %v\n", err)
	}
}
