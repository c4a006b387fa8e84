package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/bwrap"
)

// harnessScript writes an executable sh script outside the run's workspace and returns
// its path: a harness as a user would point loop.command at.
func harnessScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "harness.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// harnessReq is a step request for testRun with a transcript of every kind of entry.
func harnessReq(loop api.LoopSpec) api.CompleteChatRequest {
	return api.CompleteChatRequest{RunID: testRun, Agent: "harnessed", CallID: "2", Loop: &loop,
		System: "You write files.",
		Tools:  []api.ToolDef{{Name: "write_file", Description: "Write a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}},
		Messages: []api.ChatMessage{
			{Role: api.RoleUser, Content: "write hello to h.txt"},
			{Role: api.RoleAssistant, Content: "Writing.", ToolCalls: []api.ToolCall{{ID: "1.1", Name: "write_file", Arguments: `{"path":"h.txt"}`}}},
			{Role: api.RoleTool, ToolCallID: "1.1", Content: "error: write_file needs a string \"content\"", IsError: true},
		},
		Thread: &api.ThreadRef{}}
}

func TestHarnessStepProtocol(t *testing.T) {
	e := newEnv(t, activities.Deps{})
	got := filepath.Join(t.TempDir(), "start.json")
	script := harnessScript(t, `cat > `+got+`
echo '{"type":"thinking","text":"I need the content."}'
echo '{"type":"plan","steps":[{"step":"write h.txt","status":"in_progress"}]}'
echo ''
echo '{"type":"text","text":"Trying "}'
echo '{"type":"text","text":"again."}'
echo '{"type":"usage","prompt_tokens":10,"completion_tokens":5}'
echo '{"type":"tool_use","id":"x","name":"write_file","arguments":{"path":"h.txt","content":"hello"}}'
echo '{"type":"tool_use","name":"glob"}'`)
	out, err := e.a.Tools.HarnessStep(context.Background(), harnessReq(api.LoopSpec{Type: api.LoopHarness, Command: []string{script}}))
	if err != nil {
		t.Fatalf("HarnessStep: %v", err)
	}
	if out.Message.Content != "Trying again." || out.Reasoning != "I need the content." {
		t.Errorf("content %q, reasoning %q", out.Message.Content, out.Reasoning)
	}
	if len(out.Plan) != 1 || out.Plan[0] != (api.PlanStep{Step: "write h.txt", Status: "in_progress"}) {
		t.Errorf("plan = %+v", out.Plan)
	}
	if out.Usage.PromptTokens != 10 || out.Usage.CompletionTokens != 5 || out.Usage.TotalTokens != 15 {
		t.Errorf("usage = %+v", out.Usage)
	}
	calls := out.Message.ToolCalls
	if len(calls) != 2 || calls[0].Name != "write_file" || calls[0].Arguments != `{"path":"h.txt","content":"hello"}` ||
		calls[1].Name != "glob" || calls[1].Arguments != "{}" {
		t.Errorf("tool calls = %+v", calls)
	}
	if out.Thread == nil || out.Thread.Messages != 4 {
		t.Errorf("thread = %+v, want the three messages and the reply stored", out.Thread)
	}

	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	var start api.LoopRequest
	if err := json.Unmarshal(b, &start); err != nil || !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("the start message is not one JSON line: %v\n%s", err, b)
	}
	if start.Type != "start" || start.Protocol != api.HarnessProtocol || start.Agent != "harnessed" || start.Step != "2" || start.RunID != testRun {
		t.Errorf("start header = %+v", start)
	}
	if start.Prompt != "write hello to h.txt" || !strings.HasPrefix(start.Instructions, "You write files.") {
		t.Errorf("prompt %q, instructions %q", start.Prompt, start.Instructions)
	}
	if len(start.Tools) != 1 || start.Tools[0].Name != "write_file" || !strings.Contains(string(start.Tools[0].InputSchema), `"path"`) {
		t.Errorf("tools = %+v", start.Tools)
	}
	tr := start.Transcript
	if len(tr) != 3 || tr[0].Role != "user" || tr[1].Role != "assistant" || tr[1].Text != "Writing." || len(tr[1].ToolUses) != 1 ||
		tr[1].ToolUses[0].ID != "1.1" || string(tr[1].ToolUses[0].Arguments) != `{"path":"h.txt"}` ||
		tr[2].Role != "tool" || tr[2].ToolUseID != "1.1" || !tr[2].IsError {
		t.Errorf("transcript = %+v", tr)
	}
}

func TestHarnessStepFinal(t *testing.T) {
	e := newEnv(t, activities.Deps{})
	script := harnessScript(t, `cat >/dev/null
echo '{"type":"text","text":"All done: "}'
echo '{"type":"final","text":"h.txt holds hello."}'`)
	out, err := e.a.Tools.HarnessStep(context.Background(), harnessReq(api.LoopSpec{Type: api.LoopHarness, Command: []string{script}}))
	if err != nil {
		t.Fatalf("HarnessStep: %v", err)
	}
	if out.Message.Content != "All done: h.txt holds hello." || len(out.Message.ToolCalls) != 0 {
		t.Errorf("reply = %+v", out.Message)
	}
}

// TestHarnessStepBadInput: each way a harness can get a step wrong fails it with an
// error naming the harness and what it did; a retry is allowed only where it may help.
func TestHarnessStepBadInput(t *testing.T) {
	e := newEnv(t, activities.Deps{})
	long := strings.Repeat("z", 500)
	cases := []struct {
		name, body string
		timeout    time.Duration
		want       []string
		retryable  bool
	}{
		{"exits non-zero", "cat >/dev/null; echo 'cannot reach my planner' >&2; exit 3",
			0, []string{"exited with code 3", "stderr: cannot reach my planner"}, true},
		{"not JSON", "cat >/dev/null; echo 'Hello, I am a harness'",
			0, []string{"line 1 is not a JSON object", `"Hello, I am a harness"`}, false},
		{"long garbage is clipped", "cat >/dev/null; echo '" + long + "'",
			0, []string{"line 1 is not a JSON object", `"` + strings.Repeat("z", api.MaxHarnessLine) + `"…`}, false},
		{"unknown type", `cat >/dev/null; echo '{"type":"shout","text":"hi"}'`,
			0, []string{`line 1 has unknown type "shout"`}, false},
		{"no final", `cat >/dev/null; echo '{"type":"text","text":"thinking aloud"}'`,
			0, []string{"exited without a final or tool_use line"}, false},
		{"final and tool use", `cat >/dev/null; echo '{"type":"tool_use","name":"glob"}'; echo '{"type":"final","text":"x"}'`,
			0, []string{"line 2: final after tool_use"}, false},
		{"bad plan", `cat >/dev/null; echo '{"type":"plan","steps":[{"step":"","status":"pending"}]}'; echo '{"type":"final"}'`,
			0, []string{"line 1: plan: steps[0].step is empty"}, false},
		{"floods", `cat >/dev/null; while :; do echo '{"type":"text","text":"more"}'; done`,
			0, []string{"printed more than 1048576 bytes (1 MiB", "was killed"}, false},
		{"hangs", "cat >/dev/null; sleep 30", time.Second,
			[]string{"did not finish its step within 1s (loop.timeout) and was killed"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := harnessScript(t, tc.body)
			loop := api.LoopSpec{Type: api.LoopHarness, Command: []string{script}, Timeout: api.Duration(tc.timeout)}
			began := time.Now()
			_, err := e.a.Tools.HarnessStep(context.Background(), harnessReq(loop))
			if err == nil {
				t.Fatal("HarnessStep succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, "harness "+script) {
				t.Errorf("error does not name the harness: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\nwant it to contain %q", msg, w)
				}
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.NonRetryable() == tc.retryable {
				t.Errorf("retryable = %v, want %v (%v)", app != nil && !app.NonRetryable(), tc.retryable, err)
			}
			if d := time.Since(began); d > 20*time.Second {
				t.Errorf("the step took %s", d)
			}
		})
	}
	t.Run("missing binary", func(t *testing.T) {
		loop := api.LoopSpec{Type: api.LoopHarness, Command: []string{filepath.Join(t.TempDir(), "nope")}}
		_, err := e.a.Tools.HarnessStep(context.Background(), harnessReq(loop))
		var app *temporal.ApplicationError
		if err == nil || !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "nope") {
			t.Errorf("err = %v, want a non-retryable error naming the binary", err)
		}
	})
}

// TestGoLoopStep: a Go loop registered on the worker gets the same request a harness
// reads and answers in the same shapes.
func TestGoLoopStep(t *testing.T) {
	var seen api.LoopRequest
	loops := activities.Loops{
		"echo": activities.LoopFunc(func(_ context.Context, req api.LoopRequest) (api.LoopStep, error) {
			seen = req
			return api.LoopStep{Text: "Writing it.", Thinking: "easy", Usage: api.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
				ToolUses: []api.LoopToolUse{{ID: "a", Name: "write_file", Arguments: json.RawMessage(`{"path":"h.txt","content":"hello"}`)}}}, nil
		}),
		"panics": activities.LoopFunc(func(context.Context, api.LoopRequest) (api.LoopStep, error) { panic("out of ideas") }),
		"silent": activities.LoopFunc(func(context.Context, api.LoopRequest) (api.LoopStep, error) { return api.LoopStep{Text: "hm"}, nil }),
	}
	e := newEnv(t, activities.Deps{Loops: loops})
	out, err := e.a.Tools.HarnessStep(context.Background(), harnessReq(api.LoopSpec{Type: api.LoopGo, Name: "echo"}))
	if err != nil {
		t.Fatalf("HarnessStep: %v", err)
	}
	if out.Message.Content != "Writing it." || out.Reasoning != "easy" || out.Usage.TotalTokens != 5 ||
		len(out.Message.ToolCalls) != 1 || out.Message.ToolCalls[0].Arguments != `{"path":"h.txt","content":"hello"}` {
		t.Errorf("result = %+v", out)
	}
	if seen.Prompt != "write hello to h.txt" || len(seen.Transcript) != 3 || len(seen.Tools) != 1 {
		t.Errorf("the loop saw %+v", seen)
	}
	for name, want := range map[string]string{
		"panics":  "go loop panics panicked: out of ideas",
		"silent":  "go loop silent answered neither final nor a tool use",
		"missing": `no Go loop "missing" is registered on this worker (registered: echo, panics, silent)`,
	} {
		_, err := e.a.Tools.HarnessStep(context.Background(), harnessReq(api.LoopSpec{Type: api.LoopGo, Name: name}))
		var app *temporal.ApplicationError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &app) || !app.NonRetryable() {
			t.Errorf("%s: err = %v, want a non-retryable error containing %q", name, err, want)
		}
	}
}

// TestHarnessNeedsAProcessSandbox: a virtual sandbox runs no process, so a step there
// fails naming the tier (config loading refuses such an agent before it gets here).
func TestHarnessNeedsAProcessSandbox(t *testing.T) {
	e := newEnv(t, activities.Deps{})
	req := harnessReq(api.LoopSpec{Type: api.LoopHarness, Command: []string{"/bin/true"}})
	req.Sandbox = api.SandboxSpec{Type: api.SandboxVirtual}
	_, err := e.a.Tools.HarnessStep(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "a virtual sandbox cannot run a harness") {
		t.Errorf("err = %v", err)
	}
}

// TestHarnessStepSealed: on the bubblewrap tier the harness runs sealed (no network, the
// workspace the only writable place), its binary, outside the workspace and the system
// folders, bound read-only.
func TestHarnessStepSealed(t *testing.T) {
	if err := bwrap.Probe(context.Background(), ""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bubblewrap unavailable under CI: %v", err)
		}
		t.Skipf("bubblewrap unavailable: %v", err)
	}
	sbs, err := activities.NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := bwrap.LookPath("")
	sbs.WithBubblewrap(bin)
	spec := api.SandboxSpec{Type: api.SandboxBubblewrap}
	t.Cleanup(func() { _ = sbs.Release(context.Background(), testRun, spec) })
	e := newEnv(t, activities.Deps{Sandboxes: sbs})
	script := harnessScript(t, `cat >/dev/null
if echo x >> "$0" 2>/dev/null; then echo '{"type":"text","text":"wrote my binary "}'; fi
if [ -e /root ] || [ -e /home ]; then echo '{"type":"text","text":"saw the host "}'; fi
if echo x > mine.txt 2>/dev/null; then echo '{"type":"text","text":"wrote the workspace "}'; fi
if [ "$(cat brief.md)" != "the brief" ]; then echo '{"type":"text","text":"cannot read the workspace "}'; fi
echo '{"type":"final","text":"sealed"}'`)
	// The workspace is the harness's to read, not to change: it acts through tool uses,
	// which the permission gate decides and the platform snapshots.
	sb, err := sbs.Open(context.Background(), testRun, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Write(context.Background(), "brief.md", []byte("the brief")); err != nil {
		t.Fatal(err)
	}
	req := harnessReq(api.LoopSpec{Type: api.LoopHarness, Command: []string{script}})
	req.Sandbox = spec
	out, err := e.a.Tools.HarnessStep(context.Background(), req)
	if err != nil {
		t.Fatalf("HarnessStep: %v", err)
	}
	if out.Message.Content != "sealed" {
		t.Errorf("the harness said %q, want only sealed", out.Message.Content)
	}
	if _, err := sb.Stat(context.Background(), "mine.txt"); err == nil {
		t.Error("the harness's own write reached the workspace")
	}
}

// In a session (StreamLive) a step's text and thinking are published as the harness prints
// them, through the attempt's heartbeat, before the step ends; the result is unchanged.
func TestHarnessStepStreamsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	gate := filepath.Join(t.TempDir(), "go")
	script := harnessScript(t, `cat >/dev/null
echo '{"type":"thinking","text":"Let me see."}'
echo '{"type":"text","text":"Half "}'
while [ ! -e `+gate+` ]; do sleep 0.01; done
echo '{"type":"final","text":"done."}'`)
	req := harnessReq(api.LoopSpec{Type: api.LoopHarness, Command: []string{script}})
	req.StreamLive, req.StreamCall = true, "2"
	var mu sync.Mutex
	var beats []api.LiveText
	record := func(_ context.Context, details ...any) {
		if len(details) != 1 {
			return
		}
		if lt, ok := details[0].(api.LiveText); ok {
			mu.Lock()
			beats = append(beats, lt)
			mu.Unlock()
			if lt.Text == "Half " && lt.Thinking != nil && lt.Thinking.Text == "Let me see." {
				_ = os.WriteFile(gate, nil, 0o600) // seen live: let the harness finish
			}
		}
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	tenv := suite.NewTestActivityEnvironment()
	tenv.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&activities.KeepAlive{Every: 20 * time.Millisecond, Record: record}}})
	e.a.Register(tenv)
	val, err := tenv.ExecuteActivity(api.ActivityHarnessStep, req)
	if err != nil {
		t.Fatalf("HarnessStep: %v", err)
	}
	var out api.CompleteChatResult
	if err := val.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Message.Content != "Half done." || out.Reasoning != "Let me see." {
		t.Errorf("content %q, reasoning %q", out.Message.Content, out.Reasoning)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := false // the gate opens only on a beat with both, so the harness waited for it
	for _, b := range beats {
		if b.Call != "2" || (b.Text != "" && b.Text != "Half " && b.Text != "Half done.") {
			t.Errorf("live beat %+v, want call 2 and the text so far", b)
		}
		seen = seen || b.Text == "Half "
	}
	if !seen {
		t.Errorf("no live beat carried the first text while the step ran: %+v", beats)
	}
}
