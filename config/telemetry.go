package config

// Telemetry configures what the traces of a worker, starter or gateway may carry. Where
// they go is not configured here but by the standard OpenTelemetry environment
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES), so a collector is pointed at as for any other program;
// without an endpoint there are no traces (package telemetry).
type Telemetry struct {
	// CaptureContent puts prompts, completions, tool arguments and tool results on the
	// GenAI spans (gen_ai.input.messages, gen_ai.output.messages,
	// gen_ai.tool.call.arguments, gen_ai.tool.call.result). Default false: spans carry
	// names, ids, token counts and outcomes only, never what a user or a model wrote.
	CaptureContent bool `mapstructure:"capture_content"`
}

// Metrics configures the worker's Prometheus endpoint.
type Metrics struct {
	// Addr is host:port the worker serves /metrics on (e.g. 127.0.0.1:9464): the Temporal
	// SDK's temporal_* worker metrics and the platform's nexo_* ones. Empty (the
	// default): no endpoint.
	Addr string `mapstructure:"addr"`
	// Public allows Addr on every interface (0.0.0.0, ::, or no host): /metrics has no
	// authentication, so without it only a specific address is accepted.
	Public bool `mapstructure:"public"`
}
