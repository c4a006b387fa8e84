package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// delegateFakes register the agent activities for a lead agent and its delegates: the
// specs by name, and a model that answers each run (the parent, or a child named by its
// run id's suffix) from its own script, one reply per call, with pricedCall's usage.
type delegateFakes struct {
	specs map[string]agents.Spec
	// lead answers the parent run's calls in order; child the delegate's (nil: fail).
	lead, child []api.ChatMessage
	// leadReqs are the parent's requests, in order.
	leadReqs []api.CompleteChatRequest
	childErr error
}

func (f *delegateFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (agents.Spec, error) { return f.specs[name], nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		script := &f.lead
		if strings.HasSuffix(req.RunID, "-1.1") || strings.HasSuffix(req.RunID, "-1.2") {
			if f.childErr != nil {
				return api.CompleteChatResult{}, f.childErr
			}
			script = &f.child
		} else {
			f.leadReqs = append(f.leadReqs, req)
		}
		if len(*script) == 0 {
			return api.CompleteChatResult{}, temporal.NewNonRetryableApplicationError("script ended", api.ErrTypeBadInput, nil)
		}
		msg := (*script)[0]
		*script = (*script)[1:]
		return api.CompleteChatResult{Message: msg, Model: "fake", Usage: pricedCall}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
}

func delegateSpecs(lead agents.Spec) map[string]agents.Spec {
	return map[string]agents.Spec{
		"lead":   lead,
		"helper": {Name: "helper", Instructions: "Find things.", Permissions: permissions.Policy{Mode: permissions.ModeReadOnly}},
	}
}

func leadSpec() agents.Spec {
	return agents.Spec{Name: "lead", Instructions: "Delegate.", Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		Delegates: []string{"helper"}}
}

func delegateCall(prompt string) api.ToolCall {
	return api.ToolCall{Name: "agent_helper", Arguments: string(mustJSON(map[string]string{"prompt": prompt}))}
}

// lastToolResult is the last tool message of req's thread.
func lastToolResult(t *testing.T, req api.CompleteChatRequest) api.ChatMessage {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == api.RoleTool {
			return req.Messages[i]
		}
	}
	t.Fatalf("the request carries no tool result: %+v", req.Messages)
	return api.ChatMessage{}
}

func delegateEvents(t *testing.T, rec api.Record, typ string) []map[string]any {
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

// TestDelegateAnswerIsTheToolResult: the lead's agent_helper call runs helper as a child
// run; helper's answer is the result the lead's next model call sees, the events name
// the child, and the child's usage is counted into the lead's.
func TestDelegateAnswerIsTheToolResult(t *testing.T) {
	env := newEnv(t)
	f := &delegateFakes{specs: delegateSpecs(leadSpec()),
		lead:  []api.ChatMessage{toolReply(delegateCall("Find the launch date.")), text("Launch is on Monday, says helper.")},
		child: []api.ChatMessage{text("Monday.")}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "lead", Prompt: "When is the launch?"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res api.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil || res.Content != "Launch is on Monday, says helper." {
		t.Fatalf("result = %+v (%v)", res, err)
	}
	if len(f.leadReqs) != 2 {
		t.Fatalf("lead made %d model calls, want 2", len(f.leadReqs))
	}
	offered := false
	for _, d := range f.leadReqs[0].Tools {
		offered = offered || d.Name == "agent_helper"
	}
	if !offered && f.leadReqs[0].Context == "" {
		t.Errorf("lead's tools = %+v, want agent_helper among them", f.leadReqs[0].Tools)
	}
	if got := lastToolResult(t, f.leadReqs[1]); got.Content != "Monday." || got.ToolCallID != "1.1" {
		t.Errorf("tool result = %+v, want helper's answer for call 1.1", got)
	}
	rec := queryRecord(t, env)
	child := "default-test-workflow-id-1.1"
	started, done := delegateEvents(t, rec, api.EventDelegateStarted), delegateEvents(t, rec, api.EventDelegateDone)
	if len(started) != 1 || started[0]["child"] != child || started[0]["agent"] != "helper" {
		t.Errorf("delegate_started = %v, want one naming %s", started, child)
	}
	if len(done) != 1 || done[0]["status"] != string(api.StatusDone) || done[0]["child"] != child {
		t.Errorf("delegate_done = %v, want done for %s", done, child)
	}
	if u := rec.Usage.ByAgent["lead"]; u.TotalTokens != 45 {
		t.Errorf("lead's usage = %+v, want 45 tokens (two calls of its own and helper's one)", u)
	}
}

// TestDelegateFailureIsAnErrorResult: a child run that fails is an error result the
// lead's model sees, naming the agent and the child run; the lead goes on.
func TestDelegateFailureIsAnErrorResult(t *testing.T) {
	env := newEnv(t)
	f := &delegateFakes{specs: delegateSpecs(leadSpec()),
		lead:     []api.ChatMessage{toolReply(delegateCall("Find the launch date.")), text("helper could not say.")},
		childErr: temporal.NewNonRetryableApplicationError("model said 400", api.ErrTypeBadInput, nil)}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "lead", Prompt: "When is the launch?"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the lead failed with its delegate: %v", err)
	}
	got := lastToolResult(t, f.leadReqs[1])
	if !strings.HasPrefix(got.Content, "error: agent helper (run default-test-workflow-id-1.1) failed") || !strings.Contains(got.Content, "model said 400") {
		t.Errorf("tool result = %q, want an error naming helper, its run and the cause", got.Content)
	}
	if done := delegateEvents(t, queryRecord(t, env), api.EventDelegateDone); len(done) != 1 || done[0]["status"] != string(api.StatusFailed) {
		t.Errorf("delegate_done = %v, want one failed", done)
	}
}

// TestDelegateRefusedOnceTheBudgetIsSpent: the lead's first delegation spends its budget
// (its own call and helper's: 30 of 20 tokens), so the second call of the same reply is
// refused without a child run, and the lead then pauses on its budget.
func TestDelegateRefusedOnceTheBudgetIsSpent(t *testing.T) {
	env := newEnv(t)
	lead := leadSpec()
	lead.Budget = api.Budget{MaxTokens: 20}
	f := &delegateFakes{specs: delegateSpecs(lead),
		lead:  []api.ChatMessage{toolReply(delegateCall("one"), delegateCall("two"))},
		child: []api.ChatMessage{text("done one")}}
	f.register(env)
	var waiting api.Record
	env.RegisterDelayedCallback(func() {
		waiting = queryRecord(t, env)
		env.CancelWorkflow()
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "lead", Prompt: "Do two things."}))
	if len(delegateEvents(t, waiting, api.EventDelegateStarted)) != 1 {
		t.Errorf("delegate_started = %v, want the first call's only", delegateEvents(t, waiting, api.EventDelegateStarted))
	}
	if a, _ := pendingBudget(t, waiting); a.CallID != "budget-2" {
		t.Errorf("pending %s, want the budget pause before model call 2", a.CallID)
	}
	if !strings.Contains(string(mustJSON(waiting.Events)), "not delegating to helper: agent lead's budget is spent (used 30 of 20 tokens in this run)") {
		t.Errorf("no event carries the refusal of the second delegation:\n%s", mustJSON(waiting.Events))
	}
}

// TestDelegateToolsStopAtMaxDepth: a run is offered its delegates below its max_depth
// (default 3) only, and never under permissions that could not allow capability agent.
func TestDelegateToolsStopAtMaxDepth(t *testing.T) {
	spec := leadSpec()
	for _, tc := range []struct {
		maxDepth, depth int
		mode            permissions.Mode
		want            bool
	}{
		{0, 0, permissions.ModeAuto, true}, {0, 2, permissions.ModeAuto, true}, {0, 3, permissions.ModeAuto, false},
		{1, 0, permissions.ModeApprove, true}, {1, 1, permissions.ModeApprove, false},
		{0, 0, permissions.ModeReadOnly, false},
	} {
		spec.MaxDepth, spec.Permissions.Mode = tc.maxDepth, tc.mode
		got := delegateTools(spec, tc.depth)
		if (len(got) == 1 && got[0].Name == "agent_helper") != tc.want || len(got) > 1 {
			t.Errorf("max_depth %d, depth %d, %s: tools %v, want offered %v", tc.maxDepth, tc.depth, tc.mode, got, tc.want)
		}
	}
}

// TestTypedDelegateOutputFollowsTheToolResultRule: a typed child's output (output_schema)
// over api.DefaultStoreOver reaches the lead as any long tool output does: by reference to
// the blob of the child's reply, with a preview in the thread and the event, and the whole
// JSON for the model; a short one stays inline.
func TestTypedDelegateOutputFollowsTheToolResultRule(t *testing.T) {
	long := `{"notes":"` + strings.Repeat("n", api.DefaultStoreOver+100) + `"}`
	for _, tc := range []struct {
		name   string
		output string
		byRef  bool
	}{
		{"short output inline", `{"notes":"Monday."}`, false},
		{"long output by reference", long, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			specs := delegateSpecs(leadSpec())
			helper := specs["helper"]
			helper.OutputSchema = map[string]any{"type": "object", "required": []any{"notes"}}
			specs["helper"] = helper
			reply := text(tc.output)
			if len(tc.output) > api.TextInlineMax { // the worker keeps a typed reply whole and stores it (KeepReply)
				reply.ContentRef, reply.ContentBytes = memBlob(tc.output), len(tc.output)
			}
			f := &delegateFakes{specs: specs,
				lead:  []api.ChatMessage{toolReply(delegateCall("Take notes.")), text("Noted.")},
				child: []api.ChatMessage{reply}}
			f.register(env)
			env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "lead", Prompt: "Notes, please."}))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if got := lastToolResult(t, f.leadReqs[1]); got.Content != tc.output {
				t.Errorf("the lead's model got %d bytes, want the child's whole %d-byte output", len(got.Content), len(tc.output))
			}
			results := delegateEvents(t, queryRecord(t, env), "agent_tool_result")
			if len(results) != 1 {
				t.Fatalf("agent_tool_result events = %v, want 1", results)
			}
			content, _ := results[0]["content"].(string)
			ref, _ := results[0]["content_ref"].(string)
			if !tc.byRef {
				if content != tc.output || ref != "" {
					t.Errorf("event content %q ref %q, want the output inline", content, ref)
				}
				return
			}
			if ref == "" || ref != memSum(tc.output) || results[0]["bytes"] != float64(len(tc.output)) {
				t.Errorf("event ref %q bytes %v, want the reply's blob %s and its %d bytes", ref, results[0]["bytes"], memSum(tc.output), len(tc.output))
			}
			if len(content) > api.PreviewBytes+200 || !strings.HasPrefix(content, `{"notes":"nnn`) ||
				!strings.Contains(content, fmt.Sprintf("[… %d bytes in all; the model received the whole output]", len(tc.output))) {
				t.Errorf("event content is %d bytes (%.80q…), want a preview naming the whole size", len(content), content)
			}
		})
	}
}
