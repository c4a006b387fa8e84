package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/fakellm"
)

// otlpReceiver is an OTLP/HTTP trace receiver inside the test: it decodes every
// ExportTraceServiceRequest the processes post to /v1/traces and keeps the spans.
type otlpReceiver struct {
	URL string
	// token is the collector's credential: a request without it in the x-collector-token
	// header is refused, as a real collector behind auth does.
	token string
	mu    sync.Mutex
	spans []*gotSpan
}

// gotSpan is one received span with its service and attributes flattened to strings.
type gotSpan struct {
	service, instance, name, traceID, spanID, parentID string
	attrs                                              map[string]string
	start, end                                         uint64
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{URL: "http://" + ln.Addr().String(), token: collectorToken}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-Collector-Token") != r.token {
			http.Error(w, "no collector token", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(req.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&in)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// collectorToken is the receivers' credential; the processes get it in
// OTEL_EXPORTER_OTLP_HEADERS (percent-encoded), which the worker takes out of its
// environment (TestLocalShellCannotReadWorkerSecrets) and still sends.
const collectorToken = "otlp collector-secret-e2e"

// startOTLPGRPCReceiver is the OTLP/gRPC counterpart of startOTLPReceiver: the
// TraceService on 127.0.0.1 in plaintext. Its URL has the http scheme, which is what makes
// the gRPC exporter dial without TLS (as OTEL_EXPORTER_OTLP_INSECURE=true would).
func startOTLPGRPCReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{URL: "http://" + ln.Addr().String(), token: collectorToken}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, traceService{r: r})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r
}

// traceService answers the OTLP TraceService's Export for startOTLPGRPCReceiver.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *otlpReceiver
}

func (s traceService) Export(ctx context.Context, in *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-collector-token")) != 1 || md.Get("x-collector-token")[0] != s.r.token {
		return nil, status.Error(codes.Unauthenticated, "no collector token")
	}
	s.r.add(in)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) add(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service, instance := "", ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = anyString(kv.GetValue())
			}
			if kv.GetKey() == "service.instance.id" {
				instance = anyString(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				g := convertSpan(service, s)
				g.instance = instance
				r.spans = append(r.spans, g)
			}
		}
	}
}

func convertSpan(service string, s *tracepb.Span) *gotSpan {
	g := &gotSpan{service: service, name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()),
		spanID: hex.EncodeToString(s.GetSpanId()), parentID: hex.EncodeToString(s.GetParentSpanId()),
		attrs: map[string]string{}, start: s.GetStartTimeUnixNano(), end: s.GetEndTimeUnixNano()}
	for _, kv := range s.GetAttributes() {
		g.attrs[kv.GetKey()] = anyString(kv.GetValue())
	}
	return g
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

func (r *otlpReceiver) all() []*gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*gotSpan(nil), r.spans...)
}

// waitTrace waits until the RunWorkflow span of run id arrived (it is exported when the
// run ends) and returns every span of its trace.
func (r *otlpReceiver) waitTrace(t *testing.T, id string) []*gotSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range r.all() {
			if s.name == "RunWorkflow:AgentRun" && s.attrs["temporalWorkflowID"] == id {
				var trace []*gotSpan
				for _, o := range r.all() {
					if o.traceID == s.traceID {
						trace = append(trace, o)
					}
				}
				return trace
			}
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range r.all() {
				names = append(names, s.name)
			}
			t.Fatalf("no RunWorkflow:AgentRun span of run %s after 30s; got %d spans: %s", id, len(names), strings.Join(names, ", "))
		}
		time.Sleep(50 * time.Millisecond) // polling the receiver, bounded by the deadline
	}
}

// tracedPlatform is a worker --dev (and starter) exporting traces to an OTLP/HTTP
// receiver in the test, with /metrics on a free port; capture turns
// telemetry.capture_content on.
func tracedPlatform(t *testing.T, capture bool) (*platform, *otlpReceiver, string) {
	t.Helper()
	return tracedPlatformOver(t, capture, "")
}

// tracedPlatformOver is tracedPlatform with OTEL_EXPORTER_OTLP_PROTOCOL set to protocol:
// "grpc" exports to an OTLP/gRPC receiver, "" leaves the exporters' default (HTTP).
func tracedPlatformOver(t *testing.T, capture bool, protocol string) (*platform, *otlpReceiver, string) {
	t.Helper()
	var rcv *otlpReceiver
	switch protocol {
	case "":
		rcv = startOTLPReceiver(t)
	case "grpc":
		rcv = startOTLPGRPCReceiver(t)
	default:
		t.Fatalf("tracedPlatformOver: protocol %q, want \"\" or grpc", protocol)
	}
	mp := freePort(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", mp)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("SECRET-NOTE-CONTENT")}},
		fakellm.Reply{Content: "I wrote notes.md."},
	)
	p := newPlatform(t)
	// Priced, so nexo_model_cost_usd_total moves (llm.prices).
	p.writeConfig(strings.Replace(agentConfig(model.Start(t)), "  model: fake-model\n",
		"  model: fake-model\n  prices: {fake-model: {input_per_mtok: 1000, output_per_mtok: 1000}}\n", 1))
	p.extraEnv = []string{"NEXO_TEST_LLM_KEY=sk-test-secret",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_EXPORTER_OTLP_HEADERS=x-collector-token=" + url.PathEscape(collectorToken),
		"NEXO_METRICS_ADDR=" + metricsAddr, "NEXO_TELEMETRY_CAPTURE_CONTENT=" + strconv.FormatBool(capture)}
	if protocol != "" {
		p.extraEnv = append(p.extraEnv, "OTEL_EXPORTER_OTLP_PROTOCOL="+protocol)
	}
	p.start()
	if !strings.Contains(p.output(), "Traces: OTLP to "+rcv.URL) || !strings.Contains(p.output(), "Metrics: http://"+metricsAddr+"/metrics") {
		t.Fatalf("the worker does not say it exports traces and serves metrics:\n%s", p.output())
	}
	return p, rcv, metricsAddr
}

// approvedRun starts the scribe on a prompt, waits for its approval, approves it and
// waits for the end; it returns the run id.
func approvedRun(t *testing.T, p *platform, prompt string, whileWaiting func(id string)) string {
	t.Helper()
	r := p.starter("agent", "scribe", prompt, "--wait")
	if r.code != 0 || !strings.Contains(r.stderr, "suspended: approval of write_file (call 1.1)") {
		t.Fatalf("agent --wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	if whileWaiting != nil {
		whileWaiting(id)
	}
	if r := p.starter("approve", id, "--wait"); r.code != 0 || !strings.Contains(r.stderr, "is done") {
		out := r.stdout + r.stderr
		t.Fatalf("approve --wait:\n%s", out)
	}
	return id
}

func one(t *testing.T, spans []*gotSpan, name string) *gotSpan {
	t.Helper()
	var found []*gotSpan
	for _, s := range spans {
		if s.name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q in the trace, want 1", len(found), name)
	}
	return found[0]
}

// descends says whether s has anc among its ancestors in spans.
func descends(spans []*gotSpan, s, anc *gotSpan) bool {
	byID := map[string]*gotSpan{}
	for _, o := range spans {
		byID[o.spanID] = o
	}
	for cur := s; cur != nil; cur = byID[cur.parentID] {
		if cur.parentID == anc.spanID {
			return true
		}
	}
	return false
}

// checkApprovedRunTrace asserts the trace of approvedRun's run id, whatever carried it:
// one trace from the starter's StartWorkflow down to the model and tool calls, named and
// attributed by the GenAI conventions, and every span rcv received arrived once.
func checkApprovedRunTrace(t *testing.T, rcv *otlpReceiver, spans []*gotSpan, id string) {
	t.Helper()
	start := one(t, spans, "StartWorkflow:AgentRun")
	run := one(t, spans, "RunWorkflow:AgentRun")
	if start.service != "nexo-starter" || run.service != "nexo-worker" {
		t.Errorf("services: StartWorkflow from %q, RunWorkflow from %q; want nexo-starter and nexo-worker", start.service, run.service)
	}
	if !strings.Contains(run.instance, "@") {
		t.Errorf("RunWorkflow's service.instance.id = %q, want the worker's identity (pid@host@)", run.instance)
	}
	if run.parentID != start.spanID || run.attrs["temporalRunID"] == "" {
		t.Errorf("RunWorkflow: parent %s (want the starter's %s), attrs %v", run.parentID, start.spanID, run.attrs)
	}
	agent := one(t, spans, "invoke_agent scribe")
	if agent.parentID != run.spanID {
		t.Errorf("invoke_agent's parent is %s, want RunWorkflow %s", agent.parentID, run.spanID)
	}
	if agent.attrs["gen_ai.agent.name"] != "scribe" || agent.attrs["gen_ai.operation.name"] != "invoke_agent" ||
		agent.attrs["temporalWorkflowID"] != id || agent.attrs["nexo.agent.turns"] != "2" {
		t.Errorf("invoke_agent attributes: %v", agent.attrs)
	}
	if n, _ := strconv.Atoi(agent.attrs["gen_ai.usage.input_tokens"]); n <= 0 {
		t.Errorf("invoke_agent carries no input tokens: %v", agent.attrs)
	}
	var chats []*gotSpan
	for _, s := range spans {
		if s.name == "chat fake-model" {
			chats = append(chats, s)
		}
	}
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2 (one per model call)", len(chats))
	}
	for _, c := range chats {
		in, _ := strconv.Atoi(c.attrs["gen_ai.usage.input_tokens"])
		out, _ := strconv.Atoi(c.attrs["gen_ai.usage.output_tokens"])
		if !descends(spans, c, agent) || in <= 0 || out <= 0 || c.attrs["gen_ai.request.model"] != "fake-model" ||
			c.attrs["gen_ai.response.finish_reasons"] == "" || c.attrs["gen_ai.agent.name"] != "scribe" {
			t.Errorf("chat span (under invoke_agent: %v): %v", descends(spans, c, agent), c.attrs)
		}
	}
	tool := one(t, spans, "execute_tool write_file")
	if !descends(spans, tool, agent) || tool.attrs["gen_ai.tool.name"] != "write_file" || tool.attrs["gen_ai.tool.call.id"] != "1.1" ||
		tool.attrs["nexo.tool.outcome"] != "ok" {
		t.Errorf("execute_tool (under invoke_agent: %v): %v", descends(spans, tool, agent), tool.attrs)
	}
	wait := one(t, spans, "await_approval write_file")
	if wait.parentID != agent.spanID || wait.attrs["nexo.approval.action"] != "approve" || wait.attrs["gen_ai.tool.call.id"] != "1.1" {
		t.Errorf("await_approval (parent %s, want %s): %v", wait.parentID, agent.spanID, wait.attrs)
	}
	if wait.end <= wait.start || wait.start < agent.start || wait.end > tool.start {
		t.Errorf("await_approval spans %d..%d; want within invoke_agent (from %d) and before the tool ran (%d)", wait.start, wait.end, agent.start, tool.start)
	}
	seen := map[string]string{}
	for _, s := range rcv.all() {
		if prev, dup := seen[s.spanID]; dup {
			t.Errorf("span %s exported twice (%s, %s)", s.spanID, prev, s.name)
		}
		seen[s.spanID] = s.name
	}
}

// TestTelemetryTraceAndMetricsOfAnApprovedRun: the worker and the starter export to an
// OTLP/HTTP receiver; an agent run with an approval is one trace from the starter's
// StartWorkflow down to the model and tool calls, named and attributed by the GenAI
// conventions, with no prompt or tool argument in any attribute; every span arrives once;
// /metrics shows the nexo_* and temporal_* series moved.
func TestTelemetryTraceAndMetricsOfAnApprovedRun(t *testing.T) {
	t.Parallel()
	p, rcv, metricsAddr := tracedPlatform(t, false)
	const prompt = "Write a note PROMPT-MARKER-42."
	// While the run waits, the namespace has one pending approval (a visibility count,
	// which may lag the suspension a little).
	pendingSeen := false
	id := approvedRun(t, p, prompt, func(string) {
		deadline := time.Now().Add(20 * time.Second)
		for !pendingSeen && time.Now().Before(deadline) {
			v, ok := sample(scrape(t, metricsAddr), "nexo_approvals_pending")
			pendingSeen = ok && v == 1
			if !pendingSeen {
				time.Sleep(100 * time.Millisecond) // polling visibility, bounded by the deadline
			}
		}
	})
	if !pendingSeen {
		t.Errorf("nexo_approvals_pending never showed the waiting run:\n%s", grepLines(scrape(t, metricsAddr), "nexo_"))
	}
	spans := rcv.waitTrace(t, id)
	for _, s := range spans {
		t.Logf("span %s parent %s: %s (%s) %v", s.spanID, s.parentID, s.name, s.service, s.attrs)
	}

	t.Run("span tree", func(t *testing.T) { checkApprovedRunTrace(t, rcv, spans, id) })

	t.Run("no content by default", func(t *testing.T) {
		for _, s := range rcv.all() {
			for k, v := range s.attrs {
				if strings.Contains(v, "PROMPT-MARKER") || strings.Contains(v, "SECRET-NOTE-CONTENT") || strings.Contains(v, "sk-test-secret") {
					t.Errorf("span %s attribute %s holds content: %q", s.name, k, v)
				}
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		body := scrape(t, metricsAddr)
		for _, want := range []struct {
			series string
			min    float64
		}{
			{`nexo_model_calls_total{agent="scribe",model="fake-model",outcome="ok"}`, 2},
			{`nexo_model_input_tokens_total{agent="scribe",model="fake-model"}`, 1},
			{`nexo_model_output_tokens_total{agent="scribe",model="fake-model"}`, 1},
			{`nexo_model_cost_usd_total{agent="scribe",model="fake-model"}`, 0.0001},
			{`nexo_tool_calls_total{agent="scribe",outcome="ok",tool="write_file"}`, 1},
			{`nexo_tool_call_duration_seconds_count{outcome="ok",tool="write_file"}`, 1},
			{`nexo_approval_decision_duration_seconds_count{action="approve",tool="write_file"}`, 1},
			{`nexo_sandboxes_live`, 0},
			{`nexo_approvals_pending`, 0},
			{`nexo_payload_offloaded_bytes_total`, 0},
		} {
			v, ok := sample(body, want.series)
			if !ok || v < want.min {
				t.Errorf("%s = %v (present %v), want >= %v", want.series, v, ok, want.min)
			}
		}
		if !regexp.MustCompile(`(?m)^temporal_workflow_completed_total\{.*\} [1-9]`).MatchString(body) ||
			!regexp.MustCompile(`(?m)^temporal_activity_execution_latency_seconds_count\{.*\} [1-9]`).MatchString(body) {
			t.Errorf("no temporal_* worker series moved:\n%s", grepLines(body, "temporal_"))
		}
	})
}

// TestTelemetryTraceOverGRPC: with OTEL_EXPORTER_OTLP_PROTOCOL=grpc the worker and the
// starter export to an OTLP/gRPC receiver (the TraceService, plaintext on loopback), and
// the approved run's trace is the same tree as over HTTP.
func TestTelemetryTraceOverGRPC(t *testing.T) {
	t.Parallel()
	p, rcv, _ := tracedPlatformOver(t, false, "grpc")
	id := approvedRun(t, p, "Write a note over gRPC.", nil)
	checkApprovedRunTrace(t, rcv, rcv.waitTrace(t, id), id)
}

// TestTelemetryCapturesContentWhenAsked: with telemetry.capture_content the chat span
// carries the prompt and the execute_tool span the tool's arguments.
func TestTelemetryCapturesContentWhenAsked(t *testing.T) {
	t.Parallel()
	p, rcv, _ := tracedPlatform(t, true)
	id := approvedRun(t, p, "Write a note PROMPT-MARKER-43.", nil)
	spans := rcv.waitTrace(t, id)
	var prompt bool
	for _, s := range spans {
		if strings.HasPrefix(s.name, "chat ") && strings.Contains(s.attrs["gen_ai.input.messages"], "PROMPT-MARKER-43") {
			prompt = true
		}
	}
	tool := one(t, spans, "execute_tool write_file")
	if !prompt || !strings.Contains(tool.attrs["gen_ai.tool.call.arguments"], "SECRET-NOTE-CONTENT") {
		t.Errorf("capture_content: prompt on a chat span %v, tool arguments %q", prompt, tool.attrs["gen_ai.tool.call.arguments"])
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// sample is the value of the series written exactly as series (name{labels} in the
// exporter's label order), ignoring labels the exporter adds (otel_scope_*, job).
func sample(body, series string) (float64, bool) {
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, ls, _ := strings.Cut(strings.TrimSuffix(key, "}"), "{")
		if n != name {
			continue
		}
		all := true
		for _, l := range strings.Split(labels, ",") {
			if l != "" && !strings.Contains(","+ls+",", ","+l+",") {
				all = false
			}
		}
		if all {
			v, err := strconv.ParseFloat(val, 64)
			return v, err == nil
		}
	}
	return 0, false
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// waitSpans waits until a span named each of names arrived and returns all spans so far.
func (r *otlpReceiver) waitSpans(t *testing.T, names ...string) []*gotSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := r.all()
		missing := ""
		for _, n := range names {
			found := false
			for _, s := range spans {
				found = found || strings.HasPrefix(s.name, n)
			}
			if !found {
				missing = n
			}
		}
		if missing == "" {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q after 30s (%d spans)", missing, len(spans))
		}
		time.Sleep(50 * time.Millisecond) // polling the receiver, bounded by the deadline
	}
}

// TestTelemetrySessionPromptTrace: a session prompt (an update-with-start) is traced from
// the starter's call through the update's handler to the agent's model call, each span
// once.
func TestTelemetrySessionPromptTrace(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	model := fakellm.New(fakellm.Reply{Content: "Hello, Mac."})
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.extraEnv = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_EXPORTER_OTLP_HEADERS=x-collector-token=" + url.PathEscape(collectorToken)}
	p.start()
	if out := p.ok("session", "prompt", "assistant", "u42", "Hi, I am Mac."); strings.TrimSpace(out) != "Hello, Mac." {
		t.Fatalf("reply = %q", out)
	}
	spans := rcv.waitSpans(t, "HandleUpdate:", "invoke_agent assistant", "chat fake-model")
	var update *gotSpan
	for _, s := range spans {
		if strings.HasPrefix(s.name, "HandleUpdate:") {
			update = s
		}
	}
	agent := one(t, spans, "invoke_agent assistant")
	chat := one(t, spans, "chat fake-model")
	if agent.parentID != update.spanID || !descends(spans, chat, agent) || agent.traceID != update.traceID {
		t.Errorf("invoke_agent under %s (want %s %s), chat under invoke_agent: %v", agent.parentID, update.name, update.spanID, descends(spans, chat, agent))
	}
	seen := map[string]bool{}
	for _, s := range spans {
		if seen[s.spanID] {
			t.Errorf("span %s (%s) exported twice", s.spanID, s.name)
		}
		seen[s.spanID] = true
	}
}
