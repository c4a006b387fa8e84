package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// optsModel answers from the whole thread: reply decides each answer; every request and
// every tool call is kept.
type optsModel struct {
	spec     agents.Spec
	reply    func(thread []api.ChatMessage) api.ChatMessage
	requests [][]api.ChatMessage
	tools    []api.RunToolRequest
}

func (m *optsModel) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(context.Context, string) (agents.Spec, error) { return m.spec, nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		m.requests = append(m.requests, req.Messages)
		return api.CompleteChatResult{Message: m.reply(req.Messages)}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		m.tools = append(m.tools, req)
		return api.RunToolResult{Content: "ok"}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		c := string(req.Content)
		return api.Artifact{Name: req.Name, Size: int64(len(c)), Content: &c}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
}

// lastUser is the newest user message of thread.
func lastUser(thread []api.ChatMessage) string {
	for i := len(thread) - 1; i >= 0; i-- {
		if thread[i].Role == api.RoleUser {
			return thread[i].Content
		}
	}
	return ""
}

// updateResult is the outcome of one update: rejected by its validator, or completed.
type updateResult struct {
	value    any
	err      error
	rejected bool
}

// sendUpdate sends update name with args at delay and records its outcome in out[key].
func sendUpdate(env *testsuite.TestWorkflowEnvironment, delay time.Duration, name string, out map[string]updateResult, key string, args ...any) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { out[key] = updateResult{err: err, rejected: true} },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { out[key] = updateResult{value: v, err: err} },
		}, args...)
	}, delay)
}

func runOptsSession(t *testing.T, env *testsuite.TestWorkflowEnvironment, instance string) api.Record {
	t.Helper()
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: instance}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	return queryRecord(t, env)
}

func streamData(t *testing.T, rec api.Record, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range rec.Events {
		if e.Type == typ {
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// A prompt's max_turns bounds that turn's model calls with the agent loop's turn-limit
// error and event; the next prompt has the agent's bound again; a bound out of range is
// refused before anything runs.
func TestSessionPromptMaxTurns(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := sessionSpec
	spec.MaxTurns = 4
	m := &optsModel{spec: spec, reply: func(thread []api.ChatMessage) api.ChatMessage {
		if lastUser(thread) == "hi" {
			return text("hello")
		}
		return toolReply(call("glob", `{"pattern":"*"}`)) // never done
	}}
	m.register(env)
	out := map[string]updateResult{}
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "two", api.PromptRequest{Text: "loop", MaxTurns: 2})
	sendUpdate(env, time.Hour, api.UpdatePrompt, out, "default", api.PromptRequest{Text: "loop"})
	sendUpdate(env, 2*time.Hour, api.UpdatePrompt, out, "too many", api.PromptRequest{Text: "hi", MaxTurns: api.MaxPromptTurns + 1})
	sendUpdate(env, 2*time.Hour+time.Minute, api.UpdatePrompt, out, "negative", api.PromptRequest{Text: "hi", MaxTurns: -1})
	closeSession(env, 3*time.Hour)
	rec := runOptsSession(t, env, "mt")

	if r := out["two"]; r.err == nil || !strings.Contains(r.err.Error(), ErrTurnLimit.Error()) || !strings.Contains(r.err.Error(), "max_turns 2") {
		t.Errorf("prompt with max_turns 2: %+v, want the turn-limit error naming max_turns 2", r)
	}
	if r := out["default"]; r.err == nil || !strings.Contains(r.err.Error(), "max_turns 4") {
		t.Errorf("prompt without max_turns: %+v, want the agent's max_turns 4", r)
	}
	if len(m.requests) != 2+4 {
		t.Errorf("model calls = %d, want 2 for the bounded turn and 4 for the agent's bound", len(m.requests))
	}
	for _, key := range []string{"too many", "negative"} {
		if r := out[key]; !r.rejected || !strings.Contains(r.err.Error(), "max_turns") || !strings.Contains(r.err.Error(), "1 to 1000") {
			t.Errorf("prompt %s: %+v, want refused naming max_turns and its range", key, r)
		}
	}
	limits := streamData(t, rec, "turn_limit_exceeded")
	if len(limits) != 2 || limits[0]["max_turns"] != float64(2) || limits[1]["max_turns"] != float64(4) {
		t.Errorf("turn_limit_exceeded events = %v, want max_turns 2 then 4", limits)
	}
	if in := streamData(t, rec, api.StreamUserInput); len(in) != 2 || in[0]["max_turns"] != float64(2) || in[1]["max_turns"] != nil {
		t.Errorf("user_input events = %v, want the first to show max_turns 2", in)
	}
}

// A prompt's dir is the working directory of that turn's tools: file paths and glob
// patterns are joined with it before permissions decide, shell gets it as its directory;
// the next prompt works in the workspace again; a dir out of the workspace is refused.
func TestSessionPromptDir(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &optsModel{spec: sessionSpec, reply: func(thread []api.ChatMessage) api.ChatMessage {
		if thread[len(thread)-1].Role == api.RoleTool {
			return text("done")
		}
		return toolReply(call("read_file", `{"path":"a.txt"}`), call("shell", `{"command":"ls"}`),
			call("glob", `{"pattern":"**/*.go"}`), call("read_file", `{"path":"/workspace/b.txt"}`))
	}}
	m.register(env)
	out := map[string]updateResult{}
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "sub", api.PromptRequest{Text: "look", Dir: "src/api/"})
	sendUpdate(env, time.Hour, api.UpdatePrompt, out, "root", api.PromptRequest{Text: "look again"})
	sendUpdate(env, 2*time.Hour, api.UpdatePrompt, out, "up", api.PromptRequest{Text: "look", Dir: "src/../../etc"})
	sendUpdate(env, 2*time.Hour+time.Minute, api.UpdatePrompt, out, "abs", api.PromptRequest{Text: "look", Dir: "/etc"})
	closeSession(env, 3*time.Hour)
	rec := runOptsSession(t, env, "dir")

	if out["sub"].err != nil || out["root"].err != nil {
		t.Fatalf("prompts failed: %+v", out)
	}
	if len(m.tools) != 8 {
		t.Fatalf("tool calls = %d, want 4 per turn", len(m.tools))
	}
	type seen struct{ tool, args, dir string }
	want := []seen{
		{"read_file", `{"path":"src/api/a.txt"}`, "src/api"}, {"shell", `{"command":"ls"}`, "src/api"},
		{"glob", `{"pattern":"src/api/**/*.go"}`, "src/api"}, {"read_file", `{"path":"/workspace/b.txt"}`, "src/api"},
		{"read_file", `{"path":"a.txt"}`, ""}, {"shell", `{"command":"ls"}`, ""},
		{"glob", `{"pattern":"**/*.go"}`, ""}, {"read_file", `{"path":"/workspace/b.txt"}`, ""},
	}
	for i, w := range want {
		got := seen{m.tools[i].Tool, string(m.tools[i].Args), m.tools[i].Dir}
		if got != w {
			t.Errorf("tool call %d = %+v, want %+v", i+1, got, w)
		}
	}
	for key, msg := range map[string]string{"up": "leads outside the workspace", "abs": "is absolute"} {
		if r := out[key]; !r.rejected || !strings.Contains(r.err.Error(), msg) {
			t.Errorf("prompt with dir %s: %+v, want refused: %s", key, r, msg)
		}
	}
	if in := streamData(t, rec, api.StreamUserInput); len(in) != 2 || in[0]["dir"] != "src/api" {
		t.Errorf("user_input events = %v, want the first to show dir src/api", in)
	}
}

// nexo.interrupt cancels the tool call in flight: the turn ends at once with an
// interrupted turn_end, the prompt's reply says so, the thread stays as before the turn,
// and the session serves the next prompt. With no turn running it is refused.
func TestSessionInterruptCancelsToolCall(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &optsModel{spec: sessionSpec, reply: func(thread []api.ChatMessage) api.ChatMessage {
		if last := thread[len(thread)-1]; last.Role == api.RoleUser && last.Content == "build" {
			return toolReply(call("shell", `{"command":"make"}`))
		}
		return text("You said: " + lastUser(thread))
	}}
	m.register(env)
	toolDone := false
	env.OnActivity(api.ActivityRunTool, mockAny, mockAny).After(5 * time.Hour).Return(
		func(context.Context, api.RunToolRequest) (api.RunToolResult, error) {
			toolDone = true
			return api.RunToolResult{Content: "built"}, nil
		})
	out := map[string]updateResult{}
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "build", api.PromptRequest{Text: "build"})
	sendUpdate(env, 10*time.Minute, api.UpdateInterrupt, out, "interrupt")
	sendUpdate(env, time.Hour, api.UpdatePrompt, out, "next", api.PromptRequest{Text: "hello"})
	sendUpdate(env, 2*time.Hour, api.UpdateInterrupt, out, "idle")
	closeSession(env, 3*time.Hour)
	start := env.Now()
	rec := runOptsSession(t, env, "int")

	if r, ok := out["build"].value.(api.PromptReply); !ok || out["build"].err != nil || !r.Interrupted || r.Turn != 1 || r.Reply != "" {
		t.Errorf("interrupted prompt = %+v, want turn 1 interrupted, no reply, no error", out["build"])
	}
	if r, ok := out["interrupt"].value.(api.InterruptReply); !ok || out["interrupt"].err != nil || r.Turn != 1 {
		t.Errorf("interrupt = %+v, want turn 1", out["interrupt"])
	}
	if toolDone || env.Now().Sub(start) > 4*time.Hour {
		t.Errorf("the shell call ran to its end (done %v, session lasted %s); the interrupt should have cancelled it", toolDone, env.Now().Sub(start))
	}
	if r, ok := out["next"].value.(api.PromptReply); !ok || r.Reply != "You said: hello" || r.Turn != 2 {
		t.Errorf("prompt after the interrupt = %+v", out["next"])
	}
	if r := out["idle"]; !r.rejected || !strings.Contains(r.err.Error(), "no turn running") {
		t.Errorf("interrupt with no turn = %+v, want refused: no turn running", r)
	}
	ends := streamData(t, rec, api.StreamTurnEnd)
	if len(ends) != 2 || ends[0]["interrupted"] != true || ends[0]["error"] != nil || ends[1]["interrupted"] != nil {
		t.Errorf("turn_end events = %v, want the first interrupted", ends)
	}
	// The interrupted turn left nothing in the thread: turn 2 sees only its own prompt.
	if last := m.requests[len(m.requests)-1]; len(last) != 1 || last[0].Content != "hello" {
		t.Errorf("turn 2's thread = %+v, want only its prompt", last)
	}
	var carry api.SessionCarry
	if err := env.GetWorkflowResult(&carry); err != nil {
		t.Fatal(err)
	}
	if len(carry.Turns) != 2 || !carry.Turns[0].Interrupted || carry.Turns[0].Error != "" {
		t.Errorf("turns = %+v, want turn 1 recorded as interrupted", carry.Turns)
	}
}

// An interrupt of a turn waiting for an approval ends the wait: the session is running
// again (not suspended), nothing waits in its record, and a decision on the call is
// refused as already decided.
func TestSessionInterruptDuringApproval(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := sessionSpec
	spec.Permissions = permissions.Policy{Mode: permissions.ModeApprove}
	m := &optsModel{spec: spec, reply: func(thread []api.ChatMessage) api.ChatMessage {
		if lastUser(thread) == "write" && thread[len(thread)-1].Role == api.RoleUser {
			return toolReply(call("write_file", `{"path":"a.txt","content":"x"}`))
		}
		return text("You said: " + lastUser(thread))
	}}
	m.register(env)
	out := map[string]updateResult{}
	var waiting, after api.Record
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "write", api.PromptRequest{Text: "write"})
	env.RegisterDelayedCallback(func() { waiting = queryRecord(t, env) }, 5*time.Minute)
	sendUpdate(env, 10*time.Minute, api.UpdateInterrupt, out, "interrupt")
	env.RegisterDelayedCallback(func() { after = queryRecord(t, env) }, 20*time.Minute)
	sendUpdate(env, 30*time.Minute, api.UpdateDecide, out, "decide", api.DecideRequest{CallID: "1.1.1", Action: api.DecideApprove})
	closeSession(env, time.Hour)
	runOptsSession(t, env, "apr")

	if waiting.Status != api.StatusSuspended {
		t.Fatalf("before the interrupt the session is %s, want suspended on the approval", waiting.Status)
	}
	if r, ok := out["write"].value.(api.PromptReply); !ok || !r.Interrupted {
		t.Errorf("prompt = %+v, want interrupted", out["write"])
	}
	if _, ok := after.Approval(); ok || after.Status != api.StatusRunning {
		t.Errorf("after the interrupt: status %s, approval pending %v; want running with nothing pending", after.Status, ok)
	}
	if r := out["decide"]; r.err == nil || !strings.Contains(r.err.Error(), "interrupt") {
		t.Errorf("decision after the interrupt = %+v, want refused naming the interrupt", r)
	}
	if len(m.tools) != 0 {
		t.Errorf("the write ran %d times after its turn was interrupted", len(m.tools))
	}
}

// nexo.steer hands a message to the running turn: its next model call has it as a user
// message after the tool result, the stream shows it, and the steer answers with the
// turn. With no turn running it is refused.
func TestSessionSteer(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &optsModel{spec: sessionSpec, reply: func(thread []api.ChatMessage) api.ChatMessage {
		if last := thread[len(thread)-1]; last.Role == api.RoleUser && last.Content == "work" {
			return toolReply(call("shell", `{"command":"make"}`))
		}
		return text("last said: " + lastUser(thread))
	}}
	m.register(env)
	env.OnActivity(api.ActivityRunTool, mockAny, mockAny).After(30*time.Minute).Return(api.RunToolResult{Content: "built"}, nil)
	out := map[string]updateResult{}
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "work", api.PromptRequest{Text: "work"})
	sendUpdate(env, 10*time.Minute, api.UpdateSteer, out, "steer", api.SteerRequest{Text: "also run the tests"})
	sendUpdate(env, 2*time.Hour, api.UpdateSteer, out, "idle", api.SteerRequest{Text: "anyone?"})
	sendUpdate(env, 2*time.Hour+time.Minute, api.UpdateSteer, out, "empty", api.SteerRequest{Text: " "})
	closeSession(env, 3*time.Hour)
	rec := runOptsSession(t, env, "steer")

	if r, ok := out["work"].value.(api.PromptReply); !ok || r.Reply != "last said: also run the tests" {
		t.Errorf("prompt = %+v, want the answer to the steered message", out["work"])
	}
	if r, ok := out["steer"].value.(api.SteerReply); !ok || out["steer"].err != nil || r.Turn != 1 {
		t.Errorf("steer = %+v, want taken by turn 1", out["steer"])
	}
	if len(m.requests) != 2 {
		t.Fatalf("model calls = %d, want 2", len(m.requests))
	}
	second := m.requests[1]
	if n := len(second); n < 2 || second[n-2].Role != api.RoleTool || second[n-1].Role != api.RoleUser || second[n-1].Content != "also run the tests" {
		t.Errorf("second model call's thread ends %+v, want the tool result then the steered message", second)
	}
	if r := out["idle"]; !r.rejected || !strings.Contains(r.err.Error(), "no turn running") {
		t.Errorf("steer with no turn = %+v, want refused: no turn running", r)
	}
	if r := out["empty"]; !r.rejected || !strings.Contains(r.err.Error(), "empty") {
		t.Errorf("empty steer = %+v, want refused as empty", r)
	}
	if s := streamData(t, rec, api.StreamSteer); len(s) != 1 || s[0]["text"] != "also run the tests" || s[0]["turn"] != float64(1) {
		t.Errorf("steer events = %v", s)
	}
}

// An interrupt during the model call cancels the call: the turn ends interrupted long
// before the model would have answered, and the session answers the next prompt.
func TestSessionInterruptCancelsModelCall(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &optsModel{spec: sessionSpec, reply: func(thread []api.ChatMessage) api.ChatMessage { return text("late") }}
	m.register(env)
	calls := 0
	env.OnActivity(api.ActivityCompleteChat, mockAny, mockAny).After(5 * time.Hour).Return(
		func(context.Context, api.CompleteChatRequest) (api.CompleteChatResult, error) {
			calls++
			return api.CompleteChatResult{Message: text("late")}, nil
		})
	out := map[string]updateResult{}
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "slow", api.PromptRequest{Text: "think hard"})
	sendUpdate(env, 10*time.Minute, api.UpdateInterrupt, out, "interrupt")
	closeSession(env, time.Hour)
	start := env.Now()
	rec := runOptsSession(t, env, "intm")
	if r, ok := out["slow"].value.(api.PromptReply); !ok || !r.Interrupted || r.Reply != "" {
		t.Errorf("prompt = %+v, want interrupted with no reply", out["slow"])
	}
	if d := env.Now().Sub(start); d > 4*time.Hour || calls != 0 {
		t.Errorf("the model call ran to its end (%d answers, session lasted %s)", calls, d)
	}
	if ends := streamData(t, rec, api.StreamTurnEnd); len(ends) != 1 || ends[0]["interrupted"] != true {
		t.Errorf("turn_end events = %v, want one, interrupted", ends)
	}
	if texts := streamData(t, rec, api.StreamText); len(texts) != 0 {
		t.Errorf("an interrupted model call left text events: %v", texts)
	}
}

// A steer that reaches the turn during its last model call (the answer) is not sent: the
// steer fails naming the turn, and the message is in no model call.
func TestSessionSteerAfterLastCallIsRefused(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &optsModel{spec: sessionSpec, reply: func([]api.ChatMessage) api.ChatMessage { return text("done") }}
	m.register(env)
	var seen [][]api.ChatMessage
	env.OnActivity(api.ActivityCompleteChat, mockAny, mockAny).After(time.Hour).Return(
		func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
			seen = append(seen, req.Messages)
			return api.CompleteChatResult{Message: text("done")}, nil
		})
	out := map[string]updateResult{}
	sendUpdate(env, time.Minute, api.UpdatePrompt, out, "p", api.PromptRequest{Text: "answer at once"})
	sendUpdate(env, 10*time.Minute, api.UpdateSteer, out, "late", api.SteerRequest{Text: "too late"})
	closeSession(env, 3*time.Hour)
	rec := runOptsSession(t, env, "late")
	if r := out["late"]; r.rejected || r.err == nil || !strings.Contains(r.err.Error(), "turn 1 ended before another model call took the message") {
		t.Errorf("late steer = %+v, want accepted, then failed naming turn 1", r)
	}
	if r, ok := out["p"].value.(api.PromptReply); !ok || r.Reply != "done" {
		t.Errorf("prompt = %+v", out["p"])
	}
	for _, msgs := range seen {
		for _, msg := range msgs {
			if msg.Content == "too late" {
				t.Errorf("the refused steer reached a model call: %+v", msgs)
			}
		}
	}
	if s := streamData(t, rec, api.StreamSteer); len(s) != 0 {
		t.Errorf("steer events = %v, want none", s)
	}
}
