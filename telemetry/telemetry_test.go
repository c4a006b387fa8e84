package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestNewFollowsTheOTELEnvironment: traces are on only with an endpoint, over HTTP or
// gRPC, off when disabled; a protocol OpenTelemetry does not define is refused by name;
// with nothing set a client gets no interceptor and no metrics handler.
func TestNewFollowsTheOTELEnvironment(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		tracing bool
		err     error
	}{
		{name: "nothing set", env: nil},
		{name: "http endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, tracing: true},
		{name: "traces endpoint over grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, tracing: true},
		{name: "disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: ErrBadProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel, err := New(ctx, Options{Getenv: envOf(tc.env)})
			if !errors.Is(err, tc.err) {
				t.Fatalf("New: %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			defer tel.Shutdown(ctx)
			if tel.Tracing() != tc.tracing {
				t.Errorf("Tracing() = %v, want %v", tel.Tracing(), tc.tracing)
			}
			var o client.Options
			tel.ClientOptions(&o)
			if got := len(o.Interceptors) > 0; got != tc.tracing || o.MetricsHandler != nil {
				t.Errorf("client options: %d interceptors, metrics handler %v", len(o.Interceptors), o.MetricsHandler)
			}
		})
	}
}

// TestMetricsAddrIsServedAndRefusedWhenTaken: metrics.addr serves /metrics; an address
// in use fails New with the key named.
func TestMetricsAddrIsServedAndRefusedWhenTaken(t *testing.T) {
	ctx := context.Background()
	tel, err := New(ctx, Options{MetricsAddr: "127.0.0.1:0", Getenv: envOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	if tel.MetricsAddr() == "" {
		t.Fatal("no metrics address")
	}
	var o client.Options
	tel.ClientOptions(&o)
	if o.MetricsHandler == nil || len(o.Interceptors) != 1 {
		t.Errorf("metrics only: handler %v, %d interceptors (want the platform's only)", o.MetricsHandler, len(o.Interceptors))
	}
	_, err = New(ctx, Options{MetricsAddr: tel.MetricsAddr(), Getenv: envOf(nil)})
	if err == nil || !contains(err.Error(), "metrics.addr "+tel.MetricsAddr()) {
		t.Errorf("second New on the same address: %v, want an error naming metrics.addr", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
