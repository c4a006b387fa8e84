package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// agentFakes are the agent activities with a scripted model and recorded tool calls.
type agentFakes struct {
	spec     agents.Spec
	script   []api.ChatMessage // reply N answers a thread holding N assistant messages
	requests []api.CompleteChatRequest
	tools    []api.RunToolRequest
	outputs  []string
	// beforeTool, when set, runs at the start of every RunTool (a test waits there for
	// what must have happened before the tool runs).
	beforeTool func()
	// egress and egressDropped are what every RunTool says its commands asked of the
	// egress proxy.
	egress        []api.EgressRecord
	egressDropped int
	// hooked is what every RunTool says the tool hooks did to the call.
	hooked []api.ToolHookNote
}

func (f *agentFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (agents.Spec, error) {
		if name != f.spec.Name {
			return agents.Spec{}, fmt.Errorf("no agent %q", name)
		}
		return f.spec, nil
	}, activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		f.requests = append(f.requests, req)
		n := 0
		for _, m := range req.Messages {
			if m.Role == api.RoleAssistant {
				n++
			}
		}
		if n >= len(f.script) {
			return api.CompleteChatResult{}, fmt.Errorf("script has no reply %d", n+1)
		}
		return api.CompleteChatResult{Message: f.script[n], Model: "fake", Usage: api.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		if f.beforeTool != nil {
			f.beforeTool()
		}
		f.tools = append(f.tools, req)
		return api.RunToolResult{Content: req.Note + "ok: " + req.Tool, Stamp: &api.FileStamp{Size: 1, ModUnix: int64(len(f.tools))},
			Egress: f.egress, EgressDropped: f.egressDropped, Hooked: f.hooked}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.CollectOutputsRequest) ([]string, error) {
		return f.outputs, nil
	}, activity.RegisterOptions{Name: api.ActivityCollectOutputs})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		return api.Artifact{Name: req.Name}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
}

func call(name, args string) api.ToolCall {
	return api.ToolCall{ID: "call_0", Name: name, Arguments: args}
}

func toolReply(calls ...api.ToolCall) api.ChatMessage {
	return api.ChatMessage{Role: api.RoleAssistant, ToolCalls: calls}
}

func text(s string) api.ChatMessage { return api.ChatMessage{Role: api.RoleAssistant, Content: s} }

func agentInput(t *testing.T, name string) json.RawMessage {
	return payload(t, api.AgentRunInput{Agent: name, Prompt: "write notes.md"})
}

func approveSpec() agents.Spec {
	return agents.Spec{Name: "scribe", Instructions: "You write files.", Permissions: permissions.Policy{Mode: permissions.ModeApprove}}
}

func lastToolMessage(req api.CompleteChatRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == api.RoleTool {
			return req.Messages[i].Content
		}
	}
	return ""
}

func TestAgentApprovalThenWrite(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Wrote notes.md."),
	}}
	f.register(env)
	var waiting api.Record
	env.RegisterDelayedCallback(func() {
		waiting = queryRecord(t, env)
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if waiting.Status != api.StatusSuspended {
		t.Fatalf("status while waiting = %s", waiting.Status)
	}
	a, ok := waiting.Approval()
	if !ok || a.CallID != "1.1" || a.Tool != "write_file" || a.Capability != "write" || a.Detail != "notes.md" || !strings.Contains(string(a.Args), `"notes.md"`) {
		t.Errorf("__approval__ = %+v (present %v)", a, ok)
	}
	if si, _ := waiting.Suspend(); si.Reason != "approval: write_file notes.md" {
		t.Errorf("suspend reason = %q", si.Reason)
	}
	if len(f.tools) != 1 || f.tools[0].Tool != "write_file" {
		t.Fatalf("tool calls = %+v, want one write_file after the approval", f.tools)
	}
	var res api.AgentResult
	_ = env.GetWorkflowResult(&res)
	if res.Content != "Wrote notes.md." || res.Turns != 2 || res.Usage.TotalTokens != 30 {
		t.Errorf("result = %+v", res)
	}
	rec := queryRecord(t, env)
	if rec.Status != api.StatusDone {
		t.Errorf("status = %s", rec.Status)
	}
	var types []string
	for _, e := range rec.Events {
		types = append(types, e.Type)
	}
	want := "checkpoint agent_start agent_usage agent_tool_call approval_requested approval_decided agent_tool_result agent_usage agent_done done"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if _, ok := rec.State[api.StateApproval]; ok {
		t.Error("__approval__ left in state")
	}
	// Instructions travel as System, never inside the stored thread.
	for _, m := range f.requests[1].Messages {
		if m.Role == api.RoleSystem {
			t.Error("the thread carries a system message")
		}
	}
	if f.requests[1].System != "You write files." {
		t.Errorf("system = %q", f.requests[1].System)
	}
}

func TestAgentDeniedCallGivesModelTheReason(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Understood, not writing."),
	}}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: false, Reason: "not today"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 0 {
		t.Errorf("denied call ran: %+v", f.tools)
	}
	if got := lastToolMessage(f.requests[1]); !strings.Contains(got, "not today") {
		t.Errorf("model got %q, want the denial reason", got)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusDone {
		t.Errorf("status = %s, want done", rec.Status)
	}
}

func TestAgentSeveralGatedCallsAndAlways(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("shell", `{"command":"ls"}`), call("write_file", `{"path":"a","content":"1"}`), call("write_file", `{"path":"b","content":"2"}`)),
		text("done"),
	}}
	f.register(env)
	var pending []string
	decide := func(sig api.ApprovalSignal) func() {
		return func() {
			if a, ok := queryRecord(t, env).Approval(); ok {
				pending = append(pending, a.CallID+" "+a.Tool)
			}
			env.SignalWorkflow(api.SignalApproval, sig)
		}
	}
	env.RegisterDelayedCallback(decide(api.ApprovalSignal{CallID: "1.1", Approved: false, Reason: "no shell"}), time.Hour)
	env.RegisterDelayedCallback(decide(api.ApprovalSignal{CallID: "1.2", Approved: true, Always: true}), 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(pending, ", ") != "1.1 shell, 1.2 write_file" {
		t.Errorf("pending calls seen = %q; want shell then the first write (the second is remembered)", pending)
	}
	if len(f.tools) != 2 || f.tools[0].Args == nil || !strings.Contains(string(f.tools[1].Args), `"b"`) {
		t.Errorf("tools run = %+v, want both writes and no shell", f.tools)
	}
}

func TestAgentReadOnlyOffersNoPrivilegedTools(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: agents.Spec{Name: "reader"}, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"x","content":"y"}`)),
		toolReply(call("read_file", `{not json`)),
		text("ok"),
	}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "reader"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, d := range f.requests[0].Tools {
		offered = append(offered, d.Name)
	}
	if strings.Join(offered, ",") != "read_file,glob" {
		t.Errorf("offered = %v, want only read_file and glob under read_only", offered)
	}
	if got := lastToolMessage(f.requests[1]); !strings.Contains(got, `unknown tool "write_file"`) {
		t.Errorf("model got %q for a tool it was not offered", got)
	}
	if got := lastToolMessage(f.requests[2]); !strings.Contains(got, "not a JSON object") {
		t.Errorf("model got %q for malformed arguments", got)
	}
	if len(f.tools) != 0 {
		t.Errorf("tools ran: %+v", f.tools)
	}
}

func TestAgentTurnLimit(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "looper", MaxTurns: 3, Produces: []string{"out.txt"}}
	loop := toolReply(call("glob", `{"pattern":"*"}`))
	f := &agentFakes{spec: spec, script: []api.ChatMessage{loop, loop, loop, loop, loop}, outputs: []string{"out.txt"}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "looper"))
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "3 model calls without a final answer (max_turns 3)") {
		t.Fatalf("err = %v", err)
	}
	if len(f.requests) != 3 {
		t.Errorf("model calls = %d, want 3", len(f.requests))
	}
	rec := queryRecord(t, env)
	if countEvents(rec, "turn_limit_exceeded") != 1 || rec.Status != api.StatusFailed {
		t.Errorf("status %s, turn_limit_exceeded events %d", rec.Status, countEvents(rec, "turn_limit_exceeded"))
	}
	if len(rec.Artifacts) != 1 || rec.Artifacts[0].Name != "out.txt" {
		t.Errorf("declared output not collected on failure: %+v", rec.Artifacts)
	}
}

func TestAgentApprovalSignalForAnotherCallIsIgnored(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"n","content":"x"}`)), text("ok"),
	}}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "9.9", Approved: true})
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true})
	}, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	rec := queryRecord(t, env)
	var reasons []string
	for _, e := range rec.Events {
		if e.Type == "signal_ignored" {
			reasons = append(reasons, string(e.Data))
		}
	}
	if len(reasons) != 2 || !strings.Contains(reasons[0], `call \"9.9\" is not pending`) || !strings.Contains(reasons[1], "waits for approval of tool call 1.1") {
		t.Errorf("ignored signals = %v", reasons)
	}
	if len(f.tools) != 1 {
		t.Errorf("tools run = %d, want 1", len(f.tools))
	}
}

func TestReadBeforeWriteStampTravels(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "editor", Permissions: permissions.Policy{Mode: permissions.ModeAuto}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("read_file", `{"path":"a.txt"}`)),
		toolReply(call("write_file", `{"path":"a.txt","content":"new"}`), call("write_file", `{"path":"b.txt","content":"new"}`)),
		text("ok"),
	}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "editor"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 3 {
		t.Fatalf("tools = %d", len(f.tools))
	}
	if f.tools[1].Seen == nil || f.tools[1].Seen.ModUnix != 1 {
		t.Errorf("write after read carries stamp %+v, want the read's", f.tools[1].Seen)
	}
	if f.tools[2].Seen != nil {
		t.Errorf("write of an unread file carries a stamp %+v", f.tools[2].Seen)
	}
}

// In a run from before threads were stored, a model call whose input would pass Temporal's
// payload limit fails the run with a message that says so, and is never sent.
func TestModelCallTooLargeFailsClearly(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	// Its workflow task builds a 1.8 MB model input, which under -race on a loaded machine
	// can take longer than the SDK's 1 s deadlock detector allows; this test is about size.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.OnGetVersion(ChangeThreadByRef, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	spec := approveSpec()
	spec.Instructions = strings.Repeat("x", maxModelCallInput)
	f := &agentFakes{spec: spec, script: []api.ChatMessage{text("done")}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "over the 1800000 a workflow may pass to an activity") {
		t.Fatalf("run error = %v, want the model call refused for its size", err)
	}
	if len(f.requests) != 0 {
		t.Fatalf("the model was called %d times, want 0", len(f.requests))
	}
}

// By reference, a model call carries the thread's head and only what is new: the second
// call names the first call's thread and holds just the tool result, large outputs travel
// as a preview plus a reference, and the instructions are sent once.
func TestAgentThreadTravelsByReference(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "reader", Instructions: strings.Repeat("Read carefully. ", 200), Permissions: permissions.Policy{Mode: permissions.ModeAuto}}
	var raw []api.CompleteChatRequest
	script := []api.ChatMessage{toolReply(call("read_file", `{"path":"big.txt"}`)), toolReply(call("read_file", `{"path":"big.txt"}`)), text("done")}
	model := fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == api.RoleAssistant {
				n++
			}
		}
		if n == 1 && !strings.HasPrefix(req.Messages[2].Content, "BIG") {
			return api.CompleteChatResult{}, fmt.Errorf("the model got %q, not the whole output", req.Messages[2].Content[:20])
		}
		return api.CompleteChatResult{Message: script[n]}, nil
	})
	f := &agentFakes{spec: spec}
	f.register(env)
	env.RegisterActivityWithOptions(func(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		raw = append(raw, req)
		return model(ctx, req)
	}, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	big := "BIG" + strings.Repeat("y", 300_000)
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		if req.StoreOver != api.DefaultStoreOver {
			return api.RunToolResult{}, fmt.Errorf("store_over = %d", req.StoreOver)
		}
		return api.RunToolResult{Content: big[:100] + " [preview]", ContentRef: memBlob(big), ContentBytes: len(big)}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "reader"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 3 {
		t.Fatalf("model calls = %d, want 3", len(raw))
	}
	first, second := raw[0], raw[1]
	if first.Thread == nil || first.Thread.Head != "" || len(first.Messages) != 1 || !first.StoreContext || first.System == "" {
		t.Errorf("first call = %+v, want an empty thread, the prompt, and the context by value to store", first)
	}
	if second.Thread == nil || second.Thread.Head == "" || len(second.Messages) != 1 || second.Messages[0].ContentRef == "" ||
		second.System != "" || second.Context == "" || len(second.Tools) != 0 {
		t.Errorf("second call = %+v, want the stored head, only the tool result (by reference) and the context by name", second)
	}
	for i, r := range raw {
		if n := len(mustJSON(r)); n > 8_000 {
			t.Errorf("model call %d carries %d bytes, want a few KB whatever the thread holds", i+1, n)
		}
	}
	for _, e := range queryRecord(t, env).Events {
		if e.Type == "agent_tool_result" && len(e.Data) > 4_000 {
			t.Errorf("tool result event holds %d bytes, want the preview", len(e.Data))
		}
	}
}

// With context.max_tokens, a thread whose next request would pass the budget is compacted
// first (an activity), and the run records context_compacted with the token counts.
func TestAgentCompactsWhenContextWouldOverflow(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "reader", Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		Context: api.ContextPolicy{MaxTokens: 5_000, KeepRecent: 2}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{toolReply(call("read_file", `{"path":"a"}`)), text("done")}}
	f.register(env)
	var raw []api.CompleteChatRequest
	replies := f.script
	model := fullThread(func(context.Context, api.CompleteChatRequest) (api.CompleteChatResult, error) {
		return api.CompleteChatResult{Message: replies[len(raw)-1], Usage: api.Usage{PromptTokens: 100}}, nil
	})
	env.RegisterActivityWithOptions(func(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		raw = append(raw, req)
		return model(ctx, req)
	}, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		return api.RunToolResult{Content: "preview", ContentRef: memBlob(strings.Repeat("z", 40_000)), ContentBytes: 40_000}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	var compactions []api.CompactThreadRequest
	env.RegisterActivityWithOptions(func(_ context.Context, req api.CompactThreadRequest) (api.CompactThreadResult, error) {
		compactions = append(compactions, req)
		return api.CompactThreadResult{Thread: api.ThreadRef{Head: req.Thread.Head, Messages: 3, Tokens: 900},
			TokensBefore: 10_050, TokensAfter: 900, Summarised: 1}, nil
	}, activity.RegisterOptions{Name: api.ActivityCompactThread})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "reader"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(compactions) != 1 || len(compactions[0].Messages) != 1 || compactions[0].MaxTokens != 5_000 || compactions[0].KeepRecent != 2 {
		t.Fatalf("compactions = %+v, want one, of the pending tool result, with the agent's budget", compactions)
	}
	if len(raw) != 2 {
		t.Fatalf("model calls = %d, want 2", len(raw))
	}
	if last := raw[1]; len(last.Messages) != 0 {
		t.Errorf("the call after compaction sends %d new messages, want 0 (they went into the compacted thread)", len(last.Messages))
	}
	var got []string
	for _, e := range queryRecord(t, env).Events {
		if e.Type == "context_compacted" {
			got = append(got, string(e.Data))
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], `"tokens_before":10050`) || !strings.Contains(got[0], `"tokens_after":900`) {
		t.Errorf("context_compacted events = %v", got)
	}
}
