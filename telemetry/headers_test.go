package telemetry

import (
	"strings"
	"testing"
)

func TestOTLPHeaders(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got, err := otlpHeaders(env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc, x-team = core "}))
	if err != nil || len(got) != 2 || got["authorization"] != "Bearer abc" || got["x-team"] != "core" {
		t.Fatalf("otlpHeaders = %v, %v", got, err)
	}
	got, err = otlpHeaders(env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2"}))
	if err != nil || len(got) != 1 || got["b"] != "2" {
		t.Fatalf("the traces variable wins: %v, %v", got, err)
	}
	if got, err := otlpHeaders(env(nil)); got != nil || err != nil {
		t.Fatalf("unset: %v, %v", got, err)
	}
	for _, bad := range []string{"sk-live-secret", "=v", "a b=c", "k=%zz-secret"} {
		_, err := otlpHeaders(env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": bad}))
		if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_HEADERS") || strings.Contains(err.Error(), "secret") {
			t.Errorf("otlpHeaders(%q) = %v, want an error naming the variable and not quoting it", bad, err)
		}
	}
}
