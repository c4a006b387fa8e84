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
}

func (f *agentFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (agents.Spec, error) {
		if name != f.spec.Name {
			return agents.Spec{}, fmt.Errorf("no agent %q", name)
		}
		return f.spec, nil
	}, activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
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
	}, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		f.tools = append(f.tools, req)
		return api.RunToolResult{Content: "ok: " + req.Tool, Stamp: &api.FileStamp{Size: 1, ModUnix: int64(len(f.tools))}}, nil
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
	if !ok || a.CallID != "1.1" || a.Tool != "write_file" || a.Capability != "write" || !strings.Contains(string(a.Args), `"notes.md"`) {
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

// A model call whose input would pass Temporal's payload limit fails the run with a message
// that says so, and is never sent.
func TestModelCallTooLargeFailsClearly(t *testing.T) {
	env := newEnv(t)
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
