package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

// A model call's wait for its token booking is a histogram by endpoint on /metrics; a
// Telemetry without metrics (or nil) ignores it.
func TestTokenWaitIsAHistogramByEndpoint(t *testing.T) {
	ctx := context.Background()
	var none *Telemetry
	none.TokenWait("small", time.Second)
	tel, err := New(ctx, Options{MetricsAddr: "127.0.0.1:0", Getenv: envOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	tel.TokenWait("small", 2*time.Second)
	tel.TokenWait("small", 0)
	resp, err := http.Get("http://" + tel.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`nexo_model_token_wait_seconds_count{endpoint="small"} 2`, `nexo_model_token_wait_seconds_sum{endpoint="small"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(body), "token_wait"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
