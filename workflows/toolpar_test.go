package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// parFakes are the agent activities with a scripted model (reply N answers a thread with
// N assistant messages) and a RunTool whose calls really overlap: each call can wait for
// others (meet, after) so a test sees what ran beside what.
type parFakes struct {
	spec   agents.Spec
	script []api.CompleteChatResult

	mu       sync.Mutex
	requests []api.CompleteChatRequest
	started  []string // the paths of the calls, in the order they started
	ended    []string // ... and ended
	inFlight int
	maxIn    int
	// meet: a call waits (at most 5 s) until this many calls were in flight at once.
	meet    int
	reached bool
	// after[path] lists the paths that must have ended before the call on path ends.
	after map[string][]string
	// fail[path] makes the call on path an activity error (broken infrastructure).
	fail map[string]bool
}

func (f *parFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (agents.Spec, error) {
		return f.spec, nil
	}, activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		n := 0
		for _, m := range req.Messages {
			if m.Role == api.RoleAssistant {
				n++
			}
		}
		if n >= len(f.script) {
			return api.CompleteChatResult{}, fmt.Errorf("script has no reply %d", n+1)
		}
		out := f.script[n]
		out.Model = "fake"
		return out, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		var args map[string]string
		_ = json.Unmarshal(req.Args, &args)
		p := args["path"] + args["pattern"] + args["command"]
		f.mu.Lock()
		f.started = append(f.started, p)
		f.inFlight++
		f.maxIn = max(f.maxIn, f.inFlight)
		f.mu.Unlock()
		f.waitFor(func() bool {
			if f.inFlight >= f.meet {
				f.reached = true
			}
			return f.reached
		})
		f.waitFor(func() bool {
			for _, q := range f.after[p] {
				if !strings.Contains(" "+strings.Join(f.ended, " ")+" ", " "+q+" ") {
					return false
				}
			}
			return true
		})
		f.mu.Lock()
		f.inFlight--
		f.ended = append(f.ended, p)
		f.mu.Unlock()
		if f.fail[p] {
			return api.RunToolResult{}, temporal.NewNonRetryableApplicationError("sandbox gone for "+p, "Broken", nil)
		}
		return api.RunToolResult{Content: "ok " + req.Tool + " " + p}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
}

// waitFor polls cond (under f.mu) until it holds or 5 s passed.
func (f *parFakes) waitFor(cond func() bool) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func reads(paths ...string) api.CompleteChatResult {
	var calls []api.ToolCall
	for _, p := range paths {
		calls = append(calls, api.ToolCall{ID: "x", Name: agents.ToolReadFile, Arguments: fmt.Sprintf(`{"path":%q}`, p)})
	}
	return api.CompleteChatResult{Message: api.ChatMessage{Role: api.RoleAssistant, ToolCalls: calls}}
}

func answer(s string) api.CompleteChatResult {
	return api.CompleteChatResult{Message: text(s)}
}

// toolMessages are the tool results the second model request carried, "id=content".
func (f *parFakes) toolMessages(t *testing.T) []string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) < 2 {
		t.Fatalf("the model got %d requests, want 2", len(f.requests))
	}
	var out []string
	for _, m := range f.requests[1].Messages {
		if m.Role == api.RoleTool {
			out = append(out, m.ToolCallID+"="+m.Content)
		}
	}
	return out
}

func eventTypes(rec api.Record, keep func(string) bool) string {
	var types []string
	for _, e := range rec.Events {
		if keep(e.Type) {
			types = append(types, e.Type)
		}
	}
	return strings.Join(types, " ")
}

func toolEvent(typ string) bool {
	return strings.HasPrefix(typ, "agent_tool_") || strings.HasPrefix(typ, "approval_")
}

// The results reach the model in the order it asked for them, whatever order the calls
// end in; every start is recorded up front.
func TestParallelToolsResultsInModelOrder(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &parFakes{spec: agents.Spec{Name: "reader", ToolConcurrency: 3},
		script: []api.CompleteChatResult{reads("a", "b", "c"), answer("done")},
		meet:   3, after: map[string][]string{"a": {"b", "c"}, "b": {"c"}}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "reader", Prompt: "read"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.maxIn != 3 {
		t.Errorf("at most %d calls ran at once, want 3", f.maxIn)
	}
	if got := strings.Join(f.ended, " "); got != "c b a" {
		t.Errorf("calls ended %s, want c b a", got)
	}
	want := "1.1=ok read_file a 1.2=ok read_file b 1.3=ok read_file c"
	if got := strings.Join(f.toolMessages(t), " "); got != want {
		t.Errorf("tool results sent to the model:\n got %s\nwant %s", got, want)
	}
	rec := queryRecord(t, env)
	if got, want := eventTypes(rec, toolEvent), "agent_tool_call agent_tool_call agent_tool_call agent_tool_result agent_tool_result agent_tool_result"; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	var ids []string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			var d struct {
				CallID string `json:"call_id"`
			}
			_ = json.Unmarshal(e.Data, &d)
			ids = append(ids, d.CallID)
		}
	}
	// Each result is recorded once, when the workflow sees it: calls that end close
	// together may reach one workflow task, so their order there is not the order the
	// calls ended in (the model's order is asserted above).
	slices.Sort(ids)
	if got := strings.Join(ids, " "); got != "1.1 1.2 1.3" {
		t.Errorf("results recorded for calls %s, want 1.1 1.2 1.3 once each", got)
	}
}

// Never more than tool_concurrency calls at once.
func TestParallelToolsBound(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &parFakes{spec: agents.Spec{Name: "reader", ToolConcurrency: 2},
		script: []api.CompleteChatResult{reads("a", "b", "c", "d", "e"), answer("done")}, meet: 2}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "reader", Prompt: "read"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.maxIn != 2 {
		t.Errorf("at most %d calls ran at once, want 2 (tool_concurrency 2)", f.maxIn)
	}
	if n := len(f.toolMessages(t)); n != 5 {
		t.Errorf("%d results, want 5", n)
	}
}

// tool_concurrency 1 (and 0) is the loop as it always was: one call, then its result, then
// the next, with no version marker asked.
func TestParallelToolsOneIsSequential(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			env := newEnv(t)
			env.OnGetVersion(ChangeParallelTools, workflow.DefaultVersion, 1).Panic("parallel-tools asked with tool_concurrency " + fmt.Sprint(n))
			f := &parFakes{spec: agents.Spec{Name: "reader", ToolConcurrency: n},
				script: []api.CompleteChatResult{reads("a", "b", "c"), answer("done")}, meet: 1}
			f.register(env)
			env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "reader", Prompt: "read"}))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if f.maxIn != 1 {
				t.Errorf("%d calls ran at once, want 1", f.maxIn)
			}
			rec := queryRecord(t, env)
			if got, want := eventTypes(rec, toolEvent), "agent_tool_call agent_tool_result agent_tool_call agent_tool_result agent_tool_call agent_tool_result"; got != want {
				t.Errorf("events:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// A call that needs approval waits for its own decision while the allowed calls run; it
// runs once approved, and its result still takes its place in the model's order.
func TestParallelToolsGatedCallWaits(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	reply := api.CompleteChatResult{Message: toolReply(
		api.ToolCall{Name: agents.ToolReadFile, Arguments: `{"path":"a"}`},
		api.ToolCall{Name: agents.ToolWriteFile, Arguments: `{"path":"w","content":"x"}`},
		api.ToolCall{Name: agents.ToolReadFile, Arguments: `{"path":"c"}`},
	)}
	f := &parFakes{spec: agents.Spec{Name: "scribe", ToolConcurrency: 3, Permissions: permissions.Policy{Mode: permissions.ModeApprove}},
		script: []api.CompleteChatResult{reply, answer("done")}, meet: 2}
	f.register(env)
	var atApproval []string
	var waiting api.Record
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		atApproval = append([]string(nil), f.ended...)
		f.mu.Unlock()
		waiting = queryRecord(t, env)
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.2", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "scribe", Prompt: "write"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if a, ok := waiting.Approval(); !ok || a.CallID != "1.2" || waiting.Status != api.StatusSuspended {
		t.Errorf("while waiting: status %s, __approval__ %+v (%v), want suspended on 1.2", waiting.Status, a, ok)
	}
	if got := strings.Join(atApproval, " "); got != "a c" && got != "c a" {
		t.Errorf("before the decision these calls had run: %q, want the two reads", got)
	}
	if got := strings.Join(f.started, " "); !strings.HasSuffix(got, " w") {
		t.Errorf("calls started %s, want the write last (after its approval)", got)
	}
	want := "1.1=ok read_file a 1.2=ok write_file w 1.3=ok read_file c"
	if got := strings.Join(f.toolMessages(t), " "); got != want {
		t.Errorf("tool results sent to the model:\n got %s\nwant %s", got, want)
	}
	rec := queryRecord(t, env)
	if rec.Status != api.StatusDone {
		t.Errorf("status %s, want done", rec.Status)
	}
	if countEvents(rec, "approval_requested") != 1 || countEvents(rec, "approval_decided") != 1 {
		t.Errorf("events: %s", eventTypes(rec, toolEvent))
	}
}

// A call whose activity fails cancels none of the others; the turn then fails naming it.
func TestParallelToolsFailureCancelsNothing(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &parFakes{spec: agents.Spec{Name: "reader", ToolConcurrency: 3},
		script: []api.CompleteChatResult{reads("a", "b", "c"), answer("done")},
		meet:   3, after: map[string][]string{"a": {"b"}, "c": {"b"}}, fail: map[string]bool{"b": true}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "reader", Prompt: "read"}))
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "tool call 1.2 (read_file)") || !strings.Contains(err.Error(), "sandbox gone for b") {
		t.Fatalf("err = %v, want tool call 1.2 failing", err)
	}
	if got := strings.Join(f.ended, " "); len(f.ended) != 3 || !strings.HasPrefix(got, "b ") {
		t.Errorf("calls ended %s, want all three, b first", got)
	}
	rec := queryRecord(t, env)
	if n := countEvents(rec, "agent_tool_result"); n != 2 {
		t.Errorf("%d results recorded, want the two that succeeded", n)
	}
}

// A model reply's reasoning is recorded as agent_thinking (runs), with the reference when
// it was stored; a reply without reasoning records none and asks no version.
func TestThinkingEvents(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	first := reads("a")
	first.Reasoning = "The user wants a; read it first."
	last := answer("done")
	last.Reasoning, last.ReasoningRef, last.ReasoningBytes = "long...", "abc123", 20000
	f := &parFakes{spec: agents.Spec{Name: "reader"}, script: []api.CompleteChatResult{first, last}, meet: 1}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "reader", Prompt: "read"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	rec := queryRecord(t, env)
	var got []string
	for _, e := range rec.Events {
		if e.Type == "agent_thinking" {
			got = append(got, string(e.Data))
		}
	}
	want := []string{`{"content":"The user wants a; read it first.","turn":1}`,
		`{"bytes":20000,"content":"long...","content_ref":"abc123","turn":2}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("agent_thinking events:\n got %s\nwant %s", got, want)
	}
	if i, j := eventIndex(rec, "agent_thinking"), eventIndex(rec, "agent_tool_call"); i < 0 || i > j {
		t.Errorf("thinking (#%d) should come before the tool call it led to (#%d)", i, j)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.requests[1].Messages {
		if strings.Contains(m.Content, "read it first") {
			t.Errorf("the reasoning was sent back to the model: %+v", m)
		}
	}
}

func eventIndex(rec api.Record, typ string) int {
	for i, e := range rec.Events {
		if e.Type == typ {
			return i
		}
	}
	return -1
}

// update_plan records the plan as agent_plan and acknowledges it; a malformed plan is an
// error result naming what is wrong.
func TestPlanTool(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	plan := api.CompleteChatResult{Message: toolReply(
		api.ToolCall{Name: agents.ToolUpdatePlan, Arguments: `{"steps":[{"step":"read the notes","status":"done"},{"step":"write the summary","status":"in_progress"}]}`},
		api.ToolCall{Name: agents.ToolUpdatePlan, Arguments: `{"steps":[{"step":"x","status":"maybe"}]}`},
	)}
	f := &parFakes{spec: agents.Spec{Name: "planner", Plan: true}, script: []api.CompleteChatResult{plan, answer("done")}, meet: 1}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "planner", Prompt: "plan"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	offered := false
	for _, d := range f.requests[0].Tools {
		offered = offered || d.Name == agents.ToolUpdatePlan
	}
	f.mu.Unlock()
	if !offered {
		t.Errorf("update_plan not offered with plan: true")
	}
	msgs := f.toolMessages(t)
	if len(msgs) != 2 || msgs[0] != "1.1=plan updated: 2 steps (1 done, 1 in progress, 0 pending)" ||
		!strings.Contains(msgs[1], `error: update_plan: steps[0].status "maybe" is not one of pending, in_progress, done`) {
		t.Errorf("tool results: %q", msgs)
	}
	if len(f.started) != 0 {
		t.Errorf("update_plan ran a sandbox activity: %v", f.started)
	}
	rec := queryRecord(t, env)
	if n := countEvents(rec, "agent_plan"); n != 1 {
		t.Fatalf("%d agent_plan events, want 1", n)
	}
	d := rec.Events[eventIndex(rec, "agent_plan")].Data
	if want := `{"call_id":"1.1","steps":[{"status":"done","step":"read the notes"},{"status":"in_progress","step":"write the summary"}]}`; string(d) != want {
		t.Errorf("agent_plan = %s, want %s", d, want)
	}
}

// CheckpointAllWith never runs more than MaxInFlight steps at once, and keeps
// CheckpointAll's partial-failure semantics: the first failure is returned, steps done
// before it stay stored, steps not yet started never start.
func TestCheckpointAllMaxInFlight(t *testing.T) {
	t.Parallel()
	type result struct {
		MaxIn  int               `json:"max_in"`
		Ran    []string          `json:"ran"`
		Stored map[string]string `json:"stored"`
		Err    string            `json:"err"`
	}
	bounded := func(ctx workflow.Context, in struct {
		Max  int    `json:"max"`
		Fail string `json:"fail"`
	}) (result, error) {
		var res result
		in0 := 0
		steps := map[string]StepFunc{}
		for i, name := range []string{"a", "b", "c", "d", "e"} {
			steps[name] = func(ctx workflow.Context) (any, error) {
				in0++
				res.MaxIn = max(res.MaxIn, in0)
				res.Ran = append(res.Ran, name)
				defer func() { in0-- }()
				if err := workflow.Sleep(ctx, time.Duration(i+1)*time.Minute); err != nil {
					return nil, err
				}
				if name == in.Fail {
					return nil, errors.New(name + " broke")
				}
				return name + "!", nil
			}
		}
		_, err := CheckpointAllWith(ctx, steps, CheckpointAllOptions{MaxInFlight: in.Max})
		if err != nil {
			res.Err = err.Error()
		}
		rt, _ := runtimeOf(ctx, "test")
		res.Stored = map[string]string{}
		for k, v := range rt.rec.State {
			res.Stored[k] = string(v)
		}
		return res, nil
	}
	for _, tc := range []struct {
		name      string
		max       int
		fail      string
		wantMax   int
		wantRan   string
		wantStore string
		wantErr   string
	}{
		{"two at a time", 2, "", 2, "a b c d e", "a b c d e", ""},
		{"no bound", 0, "", 5, "a b c d e", "a b c d e", ""},
		// a (1m) and b (2m) start; a ends, c (3m) starts; b fails at 2m: c is canceled,
		// d and e never start.
		{"failure", 2, "b", 2, "a b c", "a", "checkpoint b: b broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			Register(env, "Bounded", bounded, Options{})
			env.ExecuteWorkflow("Bounded", map[string]any{"max": tc.max, "fail": tc.fail})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res result
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			var stored []string
			for _, k := range []string{"a", "b", "c", "d", "e"} {
				if _, ok := res.Stored[k]; ok {
					stored = append(stored, k)
				}
			}
			if res.MaxIn != tc.wantMax || strings.Join(res.Ran, " ") != tc.wantRan || strings.Join(stored, " ") != tc.wantStore || res.Err != tc.wantErr {
				t.Errorf("max in flight %d, ran %v, stored %v, err %q; want %d, %s, %s, %q",
					res.MaxIn, res.Ran, stored, res.Err, tc.wantMax, tc.wantRan, tc.wantStore, tc.wantErr)
			}
		})
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env, "Bounded", bounded, Options{})
	env.ExecuteWorkflow("Bounded", map[string]any{"max": -1})
	var res result
	_ = env.GetWorkflowResult(&res)
	if !strings.Contains(res.Err, "MaxInFlight -1 is negative") {
		t.Errorf("MaxInFlight -1: err %q, want it named", res.Err)
	}
}
