package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// echoModel answers every request from the thread it is given: "You said: <last user>"
// or, for "What is my name?", the name given earlier in the thread.
type echoModel struct {
	requests []api.CompleteChatRequest
	failOn   string
	toolOn   string
}

func (m *echoModel) register(env *testsuite.TestWorkflowEnvironment, spec agents.Spec) {
	env.RegisterActivityWithOptions(func(context.Context, string) (agents.Spec, error) { return spec, nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		m.requests = append(m.requests, req)
		last := req.Messages[len(req.Messages)-1]
		if last.Role == api.RoleTool {
			return api.CompleteChatResult{Message: text("tool done")}, nil
		}
		switch {
		case m.failOn != "" && last.Content == m.failOn:
			return api.CompleteChatResult{}, temporal.NewNonRetryableApplicationError("model exploded", api.ErrTypeBadInput, nil)
		case m.toolOn != "" && last.Content == m.toolOn:
			big := strings.Repeat("x", 9000)
			return api.CompleteChatResult{Message: toolReply(api.ToolCall{Name: "glob", Arguments: `{"pattern":"` + big + `"}`})}, nil
		case last.Content == "What is my name?":
			for _, msg := range req.Messages {
				if name, ok := strings.CutPrefix(msg.Content, "My name is "); ok {
					return api.CompleteChatResult{Message: text("Your name is " + strings.TrimSuffix(name, "."))}, nil
				}
			}
			return api.CompleteChatResult{Message: text("I do not know.")}, nil
		}
		return api.CompleteChatResult{Message: text("You said: " + last.Content)}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		return api.RunToolResult{Content: "no files"}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		c := string(req.Content)
		return api.Artifact{Name: req.Name, Size: int64(len(c)), Content: &c}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
}

var sessionSpec = agents.Spec{Name: "assistant", Instructions: "Be brief.", Permissions: permissions.Policy{Mode: permissions.ModeAuto}}

type promptResult struct {
	reply api.PromptReply
	err   error
}

// prompt sends a nexo.prompt update at delay and records its outcome.
func prompt(env *testsuite.TestWorkflowEnvironment, delay time.Duration, text string, out *[]promptResult) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdatePrompt, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { *out = append(*out, promptResult{err: err}) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				r := promptResult{err: err}
				if rep, ok := v.(api.PromptReply); ok {
					r.reply = rep
				}
				*out = append(*out, r)
			},
		}, api.PromptRequest{Text: text})
	}, delay)
}

func closeSession(env *testsuite.TestWorkflowEnvironment, delay time.Duration) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateClose, "", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}})
	}, delay)
}

func sessionInput(t *testing.T, in api.SessionInput) json.RawMessage { return payload(t, in) }

func TestSessionRemembersAcrossPrompts(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	prompt(env, time.Minute, "My name is Mac.", &out)
	prompt(env, time.Hour, "What is my name?", &out)
	closeSession(env, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "u42"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[1].reply.Reply != "Your name is Mac" || out[1].reply.Turn != 2 {
		t.Fatalf("replies = %+v", out)
	}
	second := m.requests[1].Messages
	if len(second) != 3 || second[0].Content != "My name is Mac." || second[1].Role != api.RoleAssistant {
		t.Errorf("second request thread = %+v, want the first turn then the question", second)
	}
	for _, r := range m.requests {
		if r.System != "Be brief." {
			t.Errorf("system = %q", r.System)
		}
		for _, msg := range r.Messages {
			if msg.Role == api.RoleSystem {
				t.Error("instructions stored in the thread")
			}
		}
	}
	var carry api.SessionCarry
	if err := env.GetWorkflowResult(&carry); err != nil {
		t.Fatal(err)
	}
	if len(carry.Turns) != 2 || carry.ThreadRef == nil || carry.ThreadRef.Messages != 4 || len(carry.Thread) != 0 || len(carry.Recent) != 4 {
		t.Errorf("carry: %d turns, thread %+v, %d messages by value, %d recent; want the thread by reference", len(carry.Turns), carry.ThreadRef, len(carry.Thread), len(carry.Recent))
	}
	rec := queryRecord(t, env)
	var kinds []string
	for _, e := range rec.Events {
		if e.Type == api.StreamUserInput || e.Type == api.StreamText || e.Type == api.StreamTurnEnd {
			kinds = append(kinds, e.Type)
		}
	}
	if got := strings.Join(kinds, " "); got != "user_input text turn_end user_input text turn_end" {
		t.Errorf("stream = %s", got)
	}
	if rec.Status != api.StatusDone {
		t.Errorf("closed session status = %s", rec.Status)
	}
}

func TestSessionServesConcurrentPromptsInOrder(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	env.RegisterDelayedCallback(func() {
		for _, p := range []string{"one", "two", "three"} {
			env.UpdateWorkflow(api.UpdatePrompt, "", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {},
				OnComplete: func(v any, err error) {
					rep, _ := v.(api.PromptReply)
					out = append(out, promptResult{reply: rep, err: err})
				}}, api.PromptRequest{Text: p})
		}
	}, time.Minute)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "c"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range m.requests {
		order = append(order, r.Messages[len(r.Messages)-1].Content)
	}
	if strings.Join(order, ",") != "one,two,three" {
		t.Errorf("model saw %v", order)
	}
	if n := len(m.requests[2].Messages); n != 5 {
		t.Errorf("third prompt's thread has %d messages, want 5 (two whole turns before it)", n)
	}
	if len(out) != 3 || out[0].reply.Turn != 1 || out[2].reply.Turn != 3 {
		t.Errorf("replies = %+v", out)
	}
}

func TestSessionFailedTurnStillEndsAndSessionGoesOn(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{failOn: "boom", toolOn: "look"}
	m.register(env, sessionSpec)
	var out []promptResult
	prompt(env, time.Minute, "boom", &out)
	prompt(env, time.Hour, "look", &out)
	prompt(env, 2*time.Hour, "after", &out)
	closeSession(env, 3*time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "f"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].err == nil || !strings.Contains(out[0].err.Error(), "model exploded") || out[2].reply.Reply != "You said: after" {
		t.Fatalf("replies = %+v", out)
	}
	rec := queryRecord(t, env)
	var ends []string
	var toolCalls []map[string]any
	for _, e := range rec.Events {
		switch e.Type {
		case api.StreamTurnEnd:
			ends = append(ends, string(e.Data))
		case api.StreamToolCall:
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			toolCalls = append(toolCalls, d)
		}
	}
	if len(ends) != 3 || !strings.Contains(ends[0], "model exploded") {
		t.Errorf("turn_end events = %v, want one per turn, the first with the error", ends)
	}
	if len(toolCalls) != 2 || toolCalls[0]["status"] != "started" || toolCalls[1]["status"] != "completed" || toolCalls[0]["id"] != toolCalls[1]["id"] {
		t.Errorf("tool_call events = %v, want a start and an update with the same id", toolCalls)
	}
	if args, _ := toolCalls[0]["args"].(map[string]any); args["pattern"] != Omitted {
		t.Errorf("a 9 KB argument was not sanitised: %v", toolCalls[0]["args"])
	}
	// The failed turn left no trace in the thread.
	if n := len(m.requests[len(m.requests)-1].Messages); n != 5 {
		t.Errorf("last thread has %d messages, want 5 (look + tool turn, then after)", n)
	}
}

// continuedAfterOneTurn runs a session of instance for one prompt with ContinueAfterTurns 1
// and returns the input of the run it continues as.
func continuedAfterOneTurn(t *testing.T, instance string) api.SessionInput {
	t.Helper()
	return continuedAfterOneTurnWith(t, instance, sessionSegmentBytes)
}

// continuedAfterOneTurnWith is continuedAfterOneTurn with stream segments of at most
// segmentBytes.
func continuedAfterOneTurnWith(t *testing.T, instance string, segmentBytes int) api.SessionInput {
	t.Helper()
	env := newEnv(t)
	if segmentBytes != sessionSegmentBytes {
		env.RegisterWorkflowWithOptions(Wrap(api.WorkflowSession, func(ctx workflow.Context, in api.SessionInput) (api.SessionCarry, error) {
			return runSession(ctx, in, segmentBytes)
		}, Options{}), workflow.RegisterOptions{Name: api.WorkflowSession, DisableAlreadyRegisteredCheck: true})
	}
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	prompt(env, time.Minute, "My name is Mac.", &out)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: instance, ContinueAfterTurns: 1}))
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("err = %v, want continue-as-new after one turn", err)
	}
	var next json.RawMessage
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	var in api.SessionInput
	if err := json.Unmarshal(next, &in); err != nil || in.Carry == nil {
		t.Fatalf("continued input = %s (%v)", next, err)
	}
	return in
}

func TestSessionContinueAsNewKeepsThreadAndOffsets(t *testing.T) {
	t.Parallel()
	in := continuedAfterOneTurn(t, "can")
	if in.Carry.ThreadRef == nil || in.Carry.ThreadRef.Messages != 2 || len(in.Carry.Thread) != 0 || in.Carry.StreamOffset == 0 || len(in.Carry.Segments) != 1 {
		t.Fatalf("carry = %+v", in.Carry)
	}

	env2 := newEnv(t)
	m2 := &echoModel{}
	m2.register(env2, sessionSpec)
	var out2 []promptResult
	in.ContinueAfterTurns = 0
	prompt(env2, time.Minute, "What is my name?", &out2)
	closeSession(env2, time.Hour)
	env2.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, in))
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out2) != 1 || out2[0].reply.Reply != "Your name is Mac" || out2[0].reply.Turn != 2 {
		t.Errorf("reply after continue-as-new = %+v", out2)
	}
	rec := queryRecord(t, env2)
	if rec.Events[0].Seq != in.Carry.StreamOffset+1 {
		t.Errorf("first seq after continue-as-new = %d, want %d", rec.Events[0].Seq, in.Carry.StreamOffset+1)
	}
	if _, ok := rec.FindArtifact(in.Carry.Segments[0].Name); !ok {
		t.Errorf("archived segment %s not in the new run's record", in.Carry.Segments[0].Name)
	}
}

// Sessions recorded before threads were stored stream through nexo.stream signals.
func TestSessionStreamedTextIsNotDuplicated(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnGetVersion(ChangeThreadByRef, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.RegisterActivityWithOptions(func(context.Context, string) (agents.Spec, error) { return sessionSpec, nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		if req.StreamTo == "" || req.StreamCall != "1.1" {
			return api.CompleteChatResult{}, errors.New("no stream target")
		}
		return api.CompleteChatResult{Message: text("Hello there")}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
	// Chunks signalled while the call is in progress (the activity above only returns
	// after the test has sent them, because the testsuite runs callbacks first).
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == api.ActivityCompleteChat {
			env.SignalWorkflow(api.SignalStream, api.StreamChunk{Call: "1.1", Kind: "text", Text: "Hello "})
			env.SignalWorkflow(api.SignalStream, api.StreamChunk{Call: "1.1", Kind: "text", Text: "there"})
		}
	})
	var out []promptResult
	prompt(env, time.Minute, "hi", &out)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "s"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range queryRecord(t, env).Events {
		if e.Type == api.StreamText {
			var d map[string]string
			_ = json.Unmarshal(e.Data, &d)
			texts = append(texts, d["content"])
		}
	}
	if strings.Join(texts, "") != "Hello there" {
		t.Errorf("text events = %q, want the streamed chunks once", texts)
	}
}

// A run's stream larger than a segment is archived in several segments that together hold
// every event once, in order.
func TestSessionArchivesTheStreamInSegments(t *testing.T) {
	t.Parallel()
	const segmentBytes = 300 // a few events each
	in := continuedAfterOneTurnWith(t, "seg", segmentBytes)
	if len(in.Carry.Segments) < 2 {
		t.Fatalf("segments = %d, want several of at most %d bytes", len(in.Carry.Segments), segmentBytes)
	}
	want := int64(1)
	for _, a := range in.Carry.Segments {
		var first, last int64
		if _, err := fmt.Sscanf(a.Name, "stream-%d-%d.jsonl", &first, &last); err != nil || first != want || last < first {
			t.Fatalf("segment %s: want one starting at seq %d", a.Name, want)
		}
		want = last + 1
	}
}

// A session's model call streams live text through its heartbeat (StreamLive): no signal
// is expected, and the whole text is recorded once as a text event.
func TestSessionLiveTextRecordedOnce(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.RegisterActivityWithOptions(func(context.Context, string) (agents.Spec, error) { return sessionSpec, nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	var reqs []api.CompleteChatRequest
	env.RegisterActivityWithOptions(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		reqs = append(reqs, req)
		return api.CompleteChatResult{Message: text("Hello there"), Thread: &api.ThreadRef{Head: "h1", Messages: 2}}, nil
	}, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
	var out []promptResult
	prompt(env, time.Minute, "hi", &out)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "live"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || !reqs[0].StreamLive || reqs[0].StreamTo != "" || reqs[0].StreamCall != "1.1" {
		t.Fatalf("requests = %+v, want one live stream of call 1.1 and no signal target", reqs)
	}
	var texts []string
	for _, e := range queryRecord(t, env).Events {
		if e.Type == api.StreamText {
			var d map[string]string
			_ = json.Unmarshal(e.Data, &d)
			texts = append(texts, d["content"]+"@"+d["call"])
		}
	}
	if len(texts) != 1 || texts[0] != "Hello there@1.1" {
		t.Errorf("text events = %q, want the whole text once", texts)
	}
}

// A session run from before threads were stored continues as new with its thread by
// value; the continuation stores it with its first model call and carries a reference.
func TestSessionLegacyCarryIsStored(t *testing.T) {
	t.Parallel()
	legacy := api.SessionInput{Agent: "assistant", Instance: "old", Carry: &api.SessionCarry{
		Thread: []api.ChatMessage{{Role: api.RoleUser, Content: "My name is Mac."}, {Role: api.RoleAssistant, Content: "Noted."}},
		Turns:  []api.SessionTurn{{N: 1, Prompt: "My name is Mac.", Reply: "Noted."}}, StreamOffset: 4, Runs: 1,
	}}
	env := newEnv(t)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	prompt(env, time.Minute, "What is my name?", &out)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, legacy))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].reply.Reply != "Your name is Mac" || out[0].reply.Turn != 2 {
		t.Fatalf("reply = %+v", out)
	}
	var carry api.SessionCarry
	if err := env.GetWorkflowResult(&carry); err != nil {
		t.Fatal(err)
	}
	if carry.ThreadRef == nil || carry.ThreadRef.Messages != 4 || len(carry.Thread) != 0 || carry.TurnCount() != 2 {
		t.Errorf("carry = %+v, want the 4 messages by reference and 2 turns", carry)
	}
}

// What a human decided for the rest of the session (--always, never) and the file versions
// the agent read survive continue-as-new and close + reopen: a write approved "always"
// before runs without asking after, with the stamp of the earlier read.
func TestSessionCarriesDecisionsAndStamps(t *testing.T) {
	t.Parallel()
	approvals := json.RawMessage(`{"always":[{"capability":"write","tool":"write_file"}]}`)
	stamps := map[string]api.FileStamp{"notes.md": {Size: 5, ModUnix: 42}}
	in := api.SessionInput{Agent: "scribe", Instance: "keep", Carry: &api.SessionCarry{
		ThreadRef: &api.ThreadRef{}, Approvals: approvals, Stamps: stamps, StreamOffset: 3, Runs: 1}}
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"again"}`)), text("written")}}
	f.register(env)
	var out []promptResult
	prompt(env, time.Minute, "write it again", &out)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, in))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].reply.Reply != "written" {
		t.Fatalf("replies = %+v, want the write done without asking", out)
	}
	if len(f.tools) != 1 || f.tools[0].Seen == nil || *f.tools[0].Seen != stamps["notes.md"] {
		t.Errorf("write_file ran %d times with stamp %+v, want once with the carried stamp", len(f.tools), f.tools)
	}
	var carry api.SessionCarry
	if err := env.GetWorkflowResult(&carry); err != nil {
		t.Fatal(err)
	}
	if string(carry.Approvals) != string(approvals) || carry.Stamps["notes.md"].ModUnix != 1 {
		t.Errorf("carry approvals %s, stamps %v; want the grant and the write's new stamp", carry.Approvals, carry.Stamps)
	}
}

// TestPromptDuringHandoverIsTypedRefusal: a prompt that arrives while the session hands over
// to its continue-as-new run (here: while its stream is being archived) is refused with an
// ApplicationError of type NexoSessionHandover naming the session and run, which clients
// match by type and send again.
func TestPromptDuringHandoverIsTypedRefusal(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var (
		once     sync.Once
		refusal  error
		accepted bool
		decided  = make(chan struct{})
	)
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		// The archive runs only during the handover: a prompt now must be refused.
		once.Do(func() {
			env.UpdateWorkflow(api.UpdatePrompt, "during-handover", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { refusal = err; close(decided) }, OnAccept: func() { accepted = true; close(decided) },
				OnComplete: func(any, error) {},
			}, api.PromptRequest{Text: "Are you there?"})
			select {
			case <-decided:
			case <-time.After(5 * time.Second):
			}
		})
		c := string(req.Content)
		return api.Artifact{Name: req.Name, Size: int64(len(c)), Content: &c}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
	var out []promptResult
	prompt(env, time.Minute, "My name is Mac.", &out)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: api.SessionID("assistant", "ho")})
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "ho", ContinueAfterTurns: 1}))
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("err = %v, want continue-as-new after one turn", err)
	}
	if accepted {
		t.Fatal("a prompt during the handover was accepted; it would be lost with the run")
	}
	var app *temporal.ApplicationError
	if !errors.As(refusal, &app) || app.Type() != api.ErrTypeSessionHandover {
		t.Fatalf("refusal = %v, want an ApplicationError of type %s", refusal, api.ErrTypeSessionHandover)
	}
	var detail api.SessionHandover
	if err := app.Details(&detail); err != nil || detail.Session != api.SessionID("assistant", "ho") || detail.RunID == "" {
		t.Errorf("detail = %+v (%v), want the session id and the refusing run", detail, err)
	}
}

// TestSessionRemembersDecidedCallsAcrossContinueAsNew (hardening round two, item 13): a
// decision on a call decided before the session continued as new is refused as "already
// decided (how)", as it is within one run, not as an unknown call; the memory is carried,
// bounded to the newest api.MaxCarriedDecisions calls.
func TestSessionRemembersDecidedCallsAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)), text("written")}}
	f.register(env)
	var out []promptResult
	prompt(env, time.Minute, "write it", &out)
	decideOnce(t, env, api.DecideRequest{Action: api.DecideApprove, By: "ada"})
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "scribe", Instance: "decided", ContinueAfterTurns: 1}))
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("err = %v, want continue-as-new after one turn", err)
	}
	var next json.RawMessage
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	var in api.SessionInput
	if err := json.Unmarshal(next, &in); err != nil || in.Carry == nil {
		t.Fatalf("continued input = %s (%v)", next, err)
	}
	if len(in.Carry.Decided) != 1 || in.Carry.Decided[0].How != "approved by ada" {
		t.Fatalf("carried decisions = %+v, want the approved call", in.Carry.Decided)
	}
	decidedID := in.Carry.Decided[0].CallID

	env2 := newEnv(t)
	f2 := &agentFakes{spec: approveSpec()}
	f2.register(env2)
	var stale *decideOutcome
	env2.RegisterDelayedCallback(func() {
		stale = update(env2, api.DecideRequest{CallID: decidedID, Action: api.DecideApprove, ArgsSHA256: strings.Repeat("0", 64)})
	}, time.Minute)
	closeSession(env2, time.Hour)
	in.ContinueAfterTurns = 0
	env2.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, in))
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if stale == nil || stale.err == nil || !strings.Contains(stale.err.Error(), "tool call "+decidedID+" was already decided (approved by ada)") {
		t.Errorf("a decision on %s after continue-as-new = %+v, want it refused as already decided (approved by ada)", decidedID, stale)
	}
	var carry api.SessionCarry
	if err := env2.GetWorkflowResult(&carry); err != nil || len(carry.Decided) != 1 || carry.Decided[0].CallID != decidedID {
		t.Errorf("the closed session's carry keeps decisions %+v (%v), want %s still", carry.Decided, err, decidedID)
	}

	// Bounded: the newest MaxCarriedDecisions, oldest first.
	var rt runtime
	var many []api.DecidedCall
	for i := range api.MaxCarriedDecisions + 44 {
		many = append(many, api.DecidedCall{CallID: fmt.Sprintf("%d.1", i+1), How: "denied"})
	}
	rt.restoreDecided(many)
	rt.rememberDecided("budget-301.2", "raised by +5 tokens")
	got := rt.carryDecided()
	if len(got) != api.MaxCarriedDecisions || got[0].CallID != "46.1" || got[len(got)-1].CallID != "budget-301.2" {
		t.Errorf("carried %d decisions, first %+v last %+v; want the newest %d", len(got), got[0], got[len(got)-1], api.MaxCarriedDecisions)
	}
}
