package workflows

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// pricedCall is the usage every scripted model call of these tests reports: 15 tokens
// at $0.001, as the worker's price table would have priced it.
var pricedCall = api.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Cost: 0.001, Priced: true}

// budgetFakes register the agent activities with a model that answers from script by
// the number of assistant messages in the turn, and reports pricedCall.
type budgetFakes struct {
	spec  agents.Spec
	calls int
	// reply answers a request; nil: tools until the last, then text.
	reply func(req api.CompleteChatRequest) api.ChatMessage
}

func (f *budgetFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(context.Context, string) (agents.Spec, error) { return f.spec, nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		f.calls++
		return api.CompleteChatResult{Message: f.reply(req), Model: "fake", Usage: pricedCall}, nil
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

// globsThenText answers with a glob call until the turn holds n tool results, then text.
func globsThenText(n int, final string) func(req api.CompleteChatRequest) api.ChatMessage {
	return func(req api.CompleteChatRequest) api.ChatMessage {
		tools := 0
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != api.RoleUser; i-- {
			if req.Messages[i].Role == api.RoleTool {
				tools++
			}
		}
		if tools < n {
			return toolReply(api.ToolCall{Name: "glob", Arguments: `{"pattern":"*.md"}`})
		}
		return text(final)
	}
}

func budgetSpec(b api.Budget) agents.Spec {
	return agents.Spec{Name: "scribe", Instructions: "Be brief.", Permissions: permissions.Policy{Mode: permissions.ModeReadOnly}, Budget: b}
}

func pendingBudget(t *testing.T, rec api.Record) (api.ApprovalInfo, api.BudgetPause) {
	t.Helper()
	a, ok := rec.Approval()
	if !ok || a.Capability != api.CapabilityBudget {
		t.Fatalf("pending = %+v (%v), want a budget pause; status %s", a, ok, rec.Status)
	}
	var p api.BudgetPause
	if err := json.Unmarshal(a.Args, &p); err != nil {
		t.Fatal(err)
	}
	return a, p
}

// TestBudgetSuspendsThenRaiseFinishes: a run whose agent spent its max_tokens suspends
// before the next model call with a budget pause (reason, inbox state); decisions that
// do not fit are refused naming why; a raise lets it finish, with usage and cost in the
// record and the result.
func TestBudgetSuspendsThenRaiseFinishes(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &budgetFakes{spec: budgetSpec(api.Budget{MaxTokens: 20}), reply: globsThenText(2, "Found nothing.")}
	f.register(env)
	var (
		waiting   api.Record
		refusals  []*decideOutcome
		ok, twice *decideOutcome
		callsThen int
		signalled int
	)
	env.RegisterDelayedCallback(func() {
		waiting = queryRecord(t, env)
		callsThen = f.calls
		a, _ := pendingBudget(t, waiting)
		for _, bad := range []api.DecideRequest{
			{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256},
			{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Cost: 1}},
			{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Tokens: -5}},
			{CallID: a.CallID, Action: api.DecideAnswer, ArgsSHA256: a.ArgsSHA256, Result: "go on"},
			{CallID: "2.1", Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Tokens: 10}},
			// Hardening round two, items 1 and 3: a raw update used to overflow the bound
			// (2^63-1 tokens) and to write a 3 MB reason into history.
			{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Tokens: math.MaxInt}},
			{CallID: a.CallID, Action: api.DecideDeny, ArgsSHA256: a.ArgsSHA256, Reason: strings.Repeat("r", 3<<20)},
		} {
			refusals = append(refusals, update(env, bad))
		}
		// The legacy signal cannot decide a budget pause: ignored, with the reason.
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: a.CallID, Approved: true})
		signalled = 1
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		a, _ := pendingBudget(t, queryRecord(t, env))
		ok = update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256,
			Budget: &api.BudgetRaise{Tokens: 100}, By: "ada"})
		twice = update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256,
			Budget: &api.BudgetRaise{Tokens: 100}})
	}, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}

	if waiting.Status != api.StatusSuspended || callsThen != 2 {
		t.Fatalf("while waiting: status %s after %d model calls, want suspended after 2 (30 tokens ≥ 20)", waiting.Status, callsThen)
	}
	a, p := pendingBudget(t, waiting)
	if a.CallID != "budget-3" || p.Scope != api.BudgetScopeRun || p.UsedTokens != 30 || p.MaxTokens != 20 || !p.Tokens {
		t.Errorf("pause = %s %+v, want budget-3 for the run: 30 of 20 tokens", a.CallID, p)
	}
	si, _ := waiting.Suspend()
	if si.Reason != "budget: agent scribe used 30 of 20 tokens in this run" {
		t.Errorf("suspend reason = %q", si.Reason)
	}
	want := []string{
		"approve it with a raise",
		"its token bound was reached, so the raise needs tokens",
		"a raise adds a positive amount",
		"approve it with a raise or deny it (not answer)",
		`a budget raise goes with a budget pause only, and "2.1" is none (pending: budget-3 (budget))`,
		"a raise of 9223372036854775807 tokens is over the 1000000000 one raise may add",
		"the reason is 3145728 bytes, over the 65536 a decision may carry",
	}
	for i, w := range want {
		if o := refusals[i]; !o.done || o.err == nil || !strings.Contains(o.err.Error(), w) {
			t.Errorf("refusal %d: done %v err %v, want %q", i, o.done, o.err, w)
		}
	}
	if ok == nil || !ok.done || ok.err != nil || ok.res.Budget == nil || ok.res.Budget.Tokens != 100 || ok.res.Tool != api.CapabilityBudget {
		t.Fatalf("raise: %+v", ok)
	}
	if twice == nil || twice.err == nil || !strings.Contains(twice.err.Error(), "budget-3 was already decided (raised by +100 tokens by ada)") {
		t.Errorf("second raise: %+v", twice)
	}
	var res api.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Content != "Found nothing." || res.Stopped != "" || res.Usage.TotalTokens != 45 || math.Abs(res.Usage.Cost-0.003) > 1e-12 || !res.Usage.Priced {
		t.Errorf("result = %+v, want the final answer, 45 tokens, $0.003, priced", res)
	}
	rec := queryRecord(t, env)
	if rec.Status != api.StatusDone || rec.Usage == nil {
		t.Fatalf("record: %s, usage %+v", rec.Status, rec.Usage)
	}
	u := rec.Usage
	if u.Calls != 3 || u.TotalTokens != 45 || u.PromptTokens != 30 || math.Abs(u.Cost-0.003) > 1e-12 || u.UnpricedCalls != 0 ||
		u.ByAgent["scribe"].Calls != 3 || u.ByModel["fake"].TotalTokens != 45 {
		t.Errorf("record usage = %+v", u)
	}
	if signalled != 1 || countEvents(rec, "signal_ignored") != 1 {
		t.Errorf("the approval signal on a budget pause: %d signal_ignored", countEvents(rec, "signal_ignored"))
	}
	ex, raised := eventsOf(rec, api.EventBudgetExceeded), eventsOf(rec, api.EventBudgetRaised)
	if len(ex) != 1 || len(raised) != 1 || raised[0]["tokens"] != float64(100) || raised[0]["max_tokens"] != float64(120) || raised[0]["by"] != "ada" {
		t.Errorf("budget events: exceeded %v raised %v", ex, raised)
	}
	if us := eventsOf(rec, "agent_usage"); len(us) != 3 || us[0]["cost"] != 0.001 {
		t.Errorf("agent_usage events = %v, want 3 with their cost", us)
	}
	if _, waitingStill := rec.State[api.StateApproval]; waitingStill {
		t.Error("__approval__ left in the record after the raise")
	}
}

// TestBudgetDenyEndsTheAgentDone: denying more budget ends the agent with a result that
// says it stopped at its budget; the run is done, not failed, and no further call is made.
func TestBudgetDenyEndsTheAgentDone(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &budgetFakes{spec: budgetSpec(api.Budget{MaxTokens: 10}), reply: globsThenText(5, "never")}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		a, _ := pendingBudget(t, queryRecord(t, env))
		update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideDeny, ArgsSHA256: a.ArgsSHA256, Reason: "enough for today", By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a denied budget failed the run: %v", err)
	}
	var res api.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	want := "Stopped at its budget: agent scribe used 15 of 10 tokens in this run, and a human denied more: enough for today."
	if res.Stopped != api.CapabilityBudget || res.Content != want || res.Turns != 1 {
		t.Errorf("result = %+v, want stopped at budget with %q", res, want)
	}
	if f.calls != 1 {
		t.Errorf("model calls = %d, want 1 (none after the denial)", f.calls)
	}
	rec := queryRecord(t, env)
	denied := eventsOf(rec, api.EventBudgetDenied)
	if rec.Status != api.StatusDone || len(denied) != 1 || denied[0]["reason"] != "enough for today" || countEvents(rec, "agent_done") != 1 {
		t.Errorf("record %s, budget_denied %v, agent_done %d", rec.Status, denied, countEvents(rec, "agent_done"))
	}
}

// TestBudgetCostBound: max_cost pauses on the priced cost; the raise must add USD.
func TestBudgetCostBound(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &budgetFakes{spec: budgetSpec(api.Budget{MaxCost: 0.0015}), reply: globsThenText(2, "Done.")}
	f.register(env)
	var refused *decideOutcome
	var reason string
	env.RegisterDelayedCallback(func() {
		rec := queryRecord(t, env)
		si, _ := rec.Suspend()
		reason = si.Reason
		a, _ := pendingBudget(t, rec)
		refused = update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Tokens: 100}})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		a, _ := pendingBudget(t, queryRecord(t, env))
		update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Cost: 1}})
	}, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if reason != "budget: agent scribe spent $0.0020 of $0.0015 in this run" {
		t.Errorf("reason = %q", reason)
	}
	if refused == nil || refused.err == nil || !strings.Contains(refused.err.Error(), "cost bound was reached, so the raise needs USD") {
		t.Errorf("token raise on a cost pause: %+v", refused)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusDone || f.calls != 3 {
		t.Errorf("status %s after %d calls", rec.Status, f.calls)
	}
}

// TestBudgetUnpricedModelCountsTokens: a model with no price has its tokens in the usage
// and no cost (an unpriced call, not a free one).
func TestBudgetUnpricedModelCountsTokens(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: budgetSpec(api.Budget{}), script: []api.ChatMessage{text("Hi.")}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	u := queryRecord(t, env).Usage
	if u == nil || u.TotalTokens != 15 || u.Cost != 0 || u.UnpricedCalls != 1 || u.CostText() != "unpriced" {
		t.Errorf("usage = %+v", u)
	}
	var res api.AgentResult
	_ = env.GetWorkflowResult(&res)
	if res.Usage.Priced || res.Usage.TotalTokens != 15 {
		t.Errorf("result usage = %+v, want 15 tokens, not priced", res.Usage)
	}
}

// TestBudgetSessionTurnAndSession: in a session, max_tokens bounds each turn and
// session_max_tokens the whole session; usage is in each turn and in the session total,
// and the session's usage and raise are carried (the close's carry).
func TestBudgetSessionTurnAndSession(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := budgetSpec(api.Budget{MaxTokens: 20, SessionMaxTokens: 40})
	spec.Name = "assistant"
	f := &budgetFakes{spec: spec, reply: func(req api.CompleteChatRequest) api.ChatMessage {
		last := req.Messages[len(req.Messages)-1]
		if strings.HasPrefix(last.Content, "look") || last.Role == api.RoleTool {
			return globsThenText(2, "Nothing there.")(req)
		}
		return text("Hello.")
	}}
	f.register(env)
	var out []promptResult
	var pauses []api.BudgetPause
	var reasons []string
	decideBudget := func(delay time.Duration, raise int) {
		env.RegisterDelayedCallback(func() {
			rec := queryRecord(t, env)
			a, p := pendingBudget(t, rec)
			si, _ := rec.Suspend()
			pauses, reasons = append(pauses, p), append(reasons, si.Reason)
			update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideApprove, ArgsSHA256: a.ArgsSHA256, Budget: &api.BudgetRaise{Tokens: raise}})
		}, delay)
	}
	prompt(env, time.Minute, "look around", &out)
	decideBudget(time.Hour, 100) // turn 1: 30 of 20 tokens before its third call
	prompt(env, 2*time.Hour, "hi", &out)
	decideBudget(3*time.Hour, 50) // turn 2: the session spent 45 of 40 before its first call
	prompt(env, 4*time.Hour, "hi again", &out)
	closeSession(env, 5*time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "b1"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].reply.Reply != "Nothing there." || out[1].reply.Reply != "Hello." || out[2].reply.Reply != "Hello." {
		t.Fatalf("replies = %+v", out)
	}
	if len(pauses) != 2 || pauses[0].Scope != api.BudgetScopeTurn || pauses[0].UsedTokens != 30 ||
		pauses[1].Scope != api.BudgetScopeSession || pauses[1].UsedTokens != 45 || pauses[1].MaxTokens != 40 {
		t.Fatalf("pauses = %+v", pauses)
	}
	if reasons[0] != "budget: agent assistant used 30 of 20 tokens in this turn" || reasons[1] != "budget: agent assistant used 45 of 40 tokens in this session" {
		t.Errorf("reasons = %q", reasons)
	}
	var carry api.SessionCarry
	if err := env.GetWorkflowResult(&carry); err != nil {
		t.Fatal(err)
	}
	if len(carry.Turns) != 3 || carry.Turns[0].Usage.TotalTokens != 45 || carry.Turns[1].Usage.TotalTokens != 15 ||
		math.Abs(carry.Turns[0].Usage.Cost-0.003) > 1e-12 {
		t.Errorf("turn usage = %+v", carry.Turns)
	}
	if carry.Usage == nil || carry.Usage.TotalTokens != 75 || carry.Usage.Calls != 5 || carry.BudgetRaised == nil || carry.BudgetRaised.Tokens != 50 {
		t.Errorf("carried usage %+v, raise %+v; want 75 tokens in 5 calls and the session's +50", carry.Usage, carry.BudgetRaised)
	}
	if rec := queryRecord(t, env); rec.Usage == nil || rec.Usage.TotalTokens != 75 {
		t.Errorf("session record usage = %+v", rec.Usage)
	}
	v, err := env.QueryWorkflow(api.QuerySession)
	var view api.SessionView
	if err != nil || v.Get(&view) != nil || view.Usage == nil || view.Usage.TotalTokens != 75 || view.Turns[0].Usage.TotalTokens != 45 {
		t.Errorf("session view usage = %+v (%v)", view.Usage, err)
	}
}

// TestBudgetSessionCarriesUsage: a session that continues as new starts from its
// carried usage, so session_max_tokens bounds the whole session, not one run.
func TestBudgetSessionCarriesUsage(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := budgetSpec(api.Budget{SessionMaxTokens: 20})
	spec.Name = "assistant"
	f := &budgetFakes{spec: spec, reply: func(api.CompleteChatRequest) api.ChatMessage { return text("Hello.") }}
	f.register(env)
	carry := &api.SessionCarry{Runs: 1, Usage: &api.RunUsage{UsageSum: api.UsageSum{Calls: 2, TotalTokens: 30, Cost: 0.002}}}
	var out []promptResult
	var paused api.BudgetPause
	prompt(env, time.Minute, "hi", &out)
	env.RegisterDelayedCallback(func() {
		rec := queryRecord(t, env)
		a, p := pendingBudget(t, rec)
		paused = p
		update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideDeny, ArgsSHA256: a.ArgsSHA256, Reason: "over"})
	}, time.Hour)
	closeSession(env, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "b2", Carry: carry}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if paused.Scope != api.BudgetScopeSession || paused.UsedTokens != 30 {
		t.Errorf("pause = %+v, want the session's carried 30 tokens", paused)
	}
	if len(out) != 1 || out[0].err != nil || !strings.HasPrefix(out[0].reply.Reply, "Stopped at its budget") || f.calls != 0 {
		t.Errorf("denied turn: %+v after %d calls, want a reply saying it stopped, no model call", out, f.calls)
	}
}

// TestBudgetSpecValidation: bad bounds are named.
func TestBudgetSpecValidation(t *testing.T) {
	t.Parallel()
	for _, b := range []api.Budget{{MaxTokens: -1}, {MaxCost: -0.5}, {SessionMaxCost: math.Inf(1)}} {
		s := budgetSpec(b)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "budget.") {
			t.Errorf("%+v: err %v, want one naming the budget key", b, err)
		}
	}
	if err := budgetSpec(api.Budget{MaxTokens: 1000, MaxCost: 2, SessionMaxTokens: 5000}).Validate(); err != nil {
		t.Errorf("valid budget refused: %v", err)
	}
}

// TestCompactionCountsInUsage: a compaction's summary request is in the run's usage,
// under the model that wrote it, with its cost.
func TestCompactionCountsInUsage(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "reader", Permissions: permissions.Policy{Mode: permissions.ModeAuto},
		Context: api.ContextPolicy{MaxTokens: 5_000, KeepRecent: 2}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{toolReply(call("read_file", `{"path":"a"}`)), text("done")}}
	f.register(env)
	calls := 0
	model := fullThread(func(context.Context, api.CompleteChatRequest) (api.CompleteChatResult, error) {
		calls++
		return api.CompleteChatResult{Message: f.script[calls-1], Model: "chat", Usage: api.Usage{PromptTokens: 100, TotalTokens: 100}}, nil
	})
	env.RegisterActivityWithOptions(model, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		return api.RunToolResult{Content: "preview", ContentRef: memBlob(strings.Repeat("z", 40_000)), ContentBytes: 40_000}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.CompactThreadRequest) (api.CompactThreadResult, error) {
		return api.CompactThreadResult{Thread: api.ThreadRef{Head: req.Thread.Head, Messages: 3, Tokens: 900},
			TokensBefore: 10_050, TokensAfter: 900, Summarised: 1, Model: "summarizer",
			Usage: api.Usage{PromptTokens: 300, CompletionTokens: 50, TotalTokens: 350, Cost: 0.01, Priced: true}}, nil
	}, activity.RegisterOptions{Name: api.ActivityCompactThread})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "reader"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	u := queryRecord(t, env).Usage
	if u == nil || u.Calls != 3 || u.TotalTokens != 550 || u.Cost != 0.01 || u.UnpricedCalls != 2 ||
		u.ByModel["summarizer"].TotalTokens != 350 || u.ByModel["chat"].Calls != 2 || u.ByAgent["reader"].Calls != 3 {
		t.Errorf("usage = %+v", u)
	}
}
