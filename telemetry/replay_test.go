package telemetry

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/workflows"
)

// newTestTelemetry exports synchronously to memory, so a span is there once it ended.
func newTestTelemetry(t *testing.T) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tel, err := New(context.Background(), Options{Service: "test", SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel, exp
}

// TestReplayExportsNoSpan: replaying recorded runs (agent runs through an approval, a
// session, a document approval) with the worker's interceptors exports nothing: the
// spans of those runs were exported by the workers that ran them live.
func TestReplayExportsNoSpan(t *testing.T) {
	blobs := fixtureBlobs(t)
	for _, name := range []string{"threadref_agent_approved.json", "inbox_agent_denied.json", "deadline_agent_timed_out.json",
		"threadref_session_reopened_suspended_on_approval.json", "recordclose_document_approval_approved.json"} {
		t.Run(name, func(t *testing.T) {
			tel, exp := newTestTelemetry(t)
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
				ExternalStorage: payloads.ExternalStorage(blobs, 0), Interceptors: tel.WorkerInterceptors()})
			if err != nil {
				t.Fatal(err)
			}
			workflows.RegisterAll(r)
			demo.Register(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("..", "workflows", "testdata", name)); err != nil {
				t.Fatalf("replay with the telemetry interceptors: %v", err)
			}
			// (No Shutdown before reading: the in-memory exporter forgets its spans then.)
			for _, s := range exp.GetSpans() {
				t.Errorf("replay exported span %q", s.Name)
			}
		})
	}
}

// spannedWorkflow runs one activity inside a workflow span, as the agent loop does.
func spannedWorkflow(ctx workflow.Context) error {
	ctx, end := workflows.StartSpan(ctx, workflows.SpanStart{Name: "invoke_agent tester", Kind: workflows.SpanAgent,
		Attrs: map[string]any{workflows.AttrAgentName: "tester"}})
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	err := workflow.ExecuteActivity(ctx, "Work", api.CompleteChatRequest{Model: "m1", CallID: "1"}).Get(ctx, nil)
	end(workflows.SpanEnd{Attrs: map[string]any{workflows.AttrTurns: 1}, Err: err})
	return err
}

// TestLiveRunExportsEachSpanOnce: the same interceptors on a live run export the
// workflow, the workflow span and the activity's spans once each, the activity under
// the workflow span, which is under the run's span; and the activity learns its agent.
func TestLiveRunExportsEachSpanOnce(t *testing.T) {
	tel, exp := newTestTelemetry(t)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: tel.WorkerInterceptors()})
	env.RegisterWorkflowWithOptions(spannedWorkflow, workflow.RegisterOptions{Name: "Spanned"})
	env.RegisterActivityWithOptions(func(context.Context, api.CompleteChatRequest) (api.CompleteChatResult, error) {
		return api.CompleteChatResult{Model: "m1", FinishReason: "stop", Usage: api.Usage{PromptTokens: 7, CompletionTokens: 3}}, nil
	}, activity.RegisterOptions{Name: "Work"})
	env.ExecuteWorkflow("Spanned")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if _, dup := byName[s.Name]; dup {
			t.Errorf("span %q exported twice", s.Name)
		}
		byName[s.Name] = s
	}
	run, ok1 := byName["RunWorkflow:Spanned"]
	span, ok2 := byName["invoke_agent tester"]
	start, ok3 := byName["StartActivity:Work"]
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("spans %v; want RunWorkflow:Spanned, invoke_agent tester, StartActivity:Work", exp.GetSpans())
	}
	if span.Parent.SpanID() != run.SpanContext.SpanID() || start.Parent.SpanID() != span.SpanContext.SpanID() {
		t.Errorf("parentage: invoke_agent under %s (run %s), StartActivity under %s (invoke_agent %s)",
			span.Parent.SpanID(), run.SpanContext.SpanID(), start.Parent.SpanID(), span.SpanContext.SpanID())
	}
	chat, ok := byName["chat m1"]
	if !ok {
		t.Fatalf("no chat m1 span for the model call: %v", exp.GetSpans())
	}
	attrs := map[string]string{}
	for _, kv := range chat.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["gen_ai.agent.name"] != "tester" || attrs["gen_ai.usage.input_tokens"] != "7" || attrs["gen_ai.usage.output_tokens"] != "3" ||
		attrs["gen_ai.response.finish_reasons"] != `["stop"]` {
		t.Errorf("chat span attributes %v; want the agent from the header and the usage", attrs)
	}
	if ra := byName["RunActivity:Work"]; chat.Parent.SpanID() != ra.SpanContext.SpanID() {
		t.Errorf("chat is under %s, want RunActivity:Work %s", chat.Parent.SpanID(), ra.SpanContext.SpanID())
	}
}

// fixtureBlobs is a store holding the replay fixtures' offloaded payloads.
func fixtureBlobs(t *testing.T) artifacts.Blobs {
	t.Helper()
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	files, _ := filepath.Glob(filepath.Join("..", "workflows", "testdata", "blobs", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.PutBlob(context.Background(), data); err != nil {
			t.Fatal(err)
		}
	}
	return store
}
