package workflows

import (
	"fmt"
	"math"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// budgetState is what a run knows of its budgets beyond its usage (rt.rec.Usage): the
// version once asked, and what humans raised each bound by.
type budgetState struct {
	v *workflow.Version
	// raised: by scope key (budgetKey); the session's raise is carried across
	// continue-as-new (SessionCarry.BudgetRaised).
	raised map[string]api.BudgetRaise
}

// budgetKey names the bound a raise applies to: the agent's run bound, one turn's bound
// (a session's, by its call id prefix), or the session's.
func budgetKey(scope, agent, turn string) string {
	switch scope {
	case api.BudgetScopeTurn:
		return scope + ":" + turn
	case api.BudgetScopeSession:
		return scope
	}
	return scope + ":" + agent
}

// budgetDenied is the content of an agent result whose budget raise a human denied.
func budgetDenied(p api.BudgetPause, reason string) string {
	s := fmt.Sprintf("Stopped at its budget: agent %s %s, and a human denied more", p.Agent, p.Spent())
	if strings.TrimSpace(reason) != "" {
		s += ": " + reason
	}
	return s + "."
}

// countUsage adds one model call to the run's usage (the record's) and to sum, the
// loop's own (the agent result's, a session turn's). first says sum holds no call yet:
// a sum is priced when every call in it was.
func (rt *runtime) countUsage(agent, model string, u api.Usage, sum *api.Usage, first bool) {
	if rt.rec.Usage == nil {
		rt.rec.Usage = &api.RunUsage{}
	}
	rt.rec.Usage.Add(agent, model, u)
	sum.Cost += u.Cost
	sum.Priced = (first || sum.Priced) && u.Priced
}

// usageEvent is the data of an agent_usage event, with the call's cost when it is priced.
func usageEvent(turn int, out api.CompleteChatResult) map[string]any {
	data := map[string]any{"turn": turn, "model": out.Model,
		"prompt_tokens": out.Usage.PromptTokens, "completion_tokens": out.Usage.CompletionTokens,
		"total_tokens": out.Usage.TotalTokens}
	if out.Usage.Priced {
		data["cost"] = out.Usage.Cost
	}
	return data
}

// budgetGate runs before each model call of an agent with a budget. While a bound is
// reached it suspends the run for a human: approved with a raise, the bound grows and the
// loop goes on (pausing again if the raise was not enough); denied, it returns the
// content the agent ends with (stopped, not failed). turn is the loop's usage so far
// (the run's, or the session turn's); callTag names the model call about to be made.
func (rt *runtime) budgetGate(ctx workflow.Context, spec agents.Spec, style loopStyle, turn api.Usage, calls int, callTag string) (stopped string, err error) {
	if spec.Budget.IsZero() {
		return "", nil
	}
	if rt.budget.v == nil {
		v := workflow.GetVersion(ctx, ChangeBudget, workflow.DefaultVersion, 1)
		rt.budget.v = &v
	}
	if *rt.budget.v < 1 {
		return "", nil
	}
	for {
		p, ok := rt.budgetReached(spec, style, turn)
		if !ok {
			return "", nil
		}
		d, err := rt.awaitBudget(ctx, p, callTag)
		if err != nil {
			return "", err
		}
		if d.Action != api.DecideApprove {
			msg := budgetDenied(p, d.Reason)
			rt.emit(ctx, api.EventBudgetDenied, map[string]any{"call_id": d.CallID, "agent": p.Agent, "scope": p.Scope,
				"used_tokens": p.UsedTokens, "used_cost": p.UsedCost, "reason": d.Reason, "by": d.By})
			if !style.session {
				rt.emit(ctx, api.EventAgentDone, map[string]any{"content": msg, "turns": calls, "stopped": api.CapabilityBudget})
			}
			return msg, nil
		}
		key := budgetKey(p.Scope, p.Agent, style.idPrefix)
		if rt.budget.raised == nil {
			rt.budget.raised = map[string]api.BudgetRaise{}
		}
		r := rt.budget.raised[key]
		r.Tokens += d.Budget.Tokens
		r.Cost += d.Budget.Cost
		rt.budget.raised[key] = r
		maxTokens, maxCost := p.MaxTokens, p.MaxCost
		if p.MaxTokens > 0 {
			maxTokens += d.Budget.Tokens
		}
		if p.MaxCost > 0 {
			maxCost += d.Budget.Cost
		}
		raised := map[string]any{"call_id": d.CallID, "agent": p.Agent, "scope": p.Scope, "by": d.By, "reason": d.Reason}
		if d.Budget.Tokens > 0 {
			raised["tokens"], raised["max_tokens"] = d.Budget.Tokens, maxTokens
		}
		if d.Budget.Cost > 0 {
			raised["cost"], raised["max_cost"] = d.Budget.Cost, maxCost
		}
		rt.emit(ctx, api.EventBudgetRaised, raised)
	}
}

// budgetReached is the first bound of spec's budget that what was spent has reached:
// the run's (or, in a session, the turn's), then the session's.
func (rt *runtime) budgetReached(spec agents.Spec, style loopStyle, turn api.Usage) (api.BudgetPause, bool) {
	b := spec.Budget
	type scope struct {
		name      string
		maxTokens int
		maxCost   float64
		tokens    int
		cost      float64
	}
	var scopes []scope
	if style.session {
		scopes = append(scopes, scope{api.BudgetScopeTurn, b.MaxTokens, b.MaxCost, turn.TotalTokens, turn.Cost})
		var all api.UsageSum
		if rt.rec.Usage != nil {
			all = rt.rec.Usage.UsageSum
		}
		scopes = append(scopes, scope{api.BudgetScopeSession, b.SessionMaxTokens, b.SessionMaxCost, all.TotalTokens, all.Cost})
	} else {
		var mine api.UsageSum
		if rt.rec.Usage != nil {
			mine = rt.rec.Usage.ByAgent[spec.Name]
		}
		scopes = append(scopes, scope{api.BudgetScopeRun, b.MaxTokens, b.MaxCost, mine.TotalTokens, mine.Cost})
	}
	for _, s := range scopes {
		r := rt.budget.raised[budgetKey(s.name, spec.Name, style.idPrefix)]
		p := api.BudgetPause{Agent: spec.Name, Scope: s.name, UsedTokens: s.tokens, UsedCost: roundCost(s.cost)}
		if s.maxTokens > 0 {
			p.MaxTokens = s.maxTokens + r.Tokens
			p.Tokens = s.tokens >= p.MaxTokens
		}
		if s.maxCost > 0 {
			p.MaxCost = roundCost(s.maxCost + r.Cost)
			p.Cost = s.cost >= s.maxCost+r.Cost
		}
		if p.Tokens || p.Cost {
			return p, true
		}
	}
	return api.BudgetPause{}, false
}

// roundCost keeps a cost readable in the record (float sums leave 0.30000000000000004).
func roundCost(c float64) float64 { return math.Round(c*1e9) / 1e9 }

// awaitBudget records a budget pause as the run's pending decision (state __approval__
// with capability budget, and __suspend__ with reason "budget: ..."), suspends until
// nexo.decide decides it, and returns the decision.
func (rt *runtime) awaitBudget(ctx workflow.Context, p api.BudgetPause, callTag string) (api.DecideRequest, error) {
	callID := api.BudgetCallPrefix + callTag
	for n := 2; rt.decided[callID] != ""; n++ {
		callID = fmt.Sprintf("%s%s-%d", api.BudgetCallPrefix, callTag, n)
	}
	now := workflow.Now(ctx).UTC()
	args := compactJSON(mustJSON(p))
	sum := api.ArgsSHA256(args)
	reason := "budget: agent " + p.Agent + " " + p.Spent()
	rt.setState(ctx, api.StateApproval, api.ApprovalInfo{CallID: callID, Capability: api.CapabilityBudget, Tool: api.CapabilityBudget,
		Args: args, ArgsSHA256: sum, At: now})
	rt.setState(ctx, api.StateSuspend, api.SuspendInfo{Reason: reason, ResumeKey: callID, At: now})
	pause := p
	rt.pending = &approvalWaiter{callID: callID, tool: api.CapabilityBudget, argsSHA: sum, budget: &pause}
	rt.emit(ctx, api.EventBudgetExceeded, map[string]any{"call_id": callID, "agent": p.Agent, "scope": p.Scope,
		"used_tokens": p.UsedTokens, "max_tokens": p.MaxTokens, "used_cost": p.UsedCost, "max_cost": p.MaxCost, "reason": reason})
	rt.setStatus(ctx, api.StatusSuspended)

	if err := rt.waitForHuman(ctx, func() bool { return rt.pending.decision != nil }); err != nil {
		rt.pending = nil
		return api.DecideRequest{}, err
	}
	d := *rt.pending.decision
	d.CallID = callID
	rt.pending = nil
	delete(rt.rec.State, api.StateApproval)
	delete(rt.rec.State, api.StateSuspend)
	how := "denied"
	if d.Action == api.DecideApprove {
		how = "raised by " + raiseText(*d.Budget)
	}
	if d.By != "" {
		how += " by " + d.By
	}
	rt.rememberDecided(callID, how)
	rt.setStatus(ctx, api.StatusRunning)
	return d, nil
}

// raiseText renders a raise: "+50000 tokens", "+$2.5000", or both.
func raiseText(r api.BudgetRaise) string {
	var parts []string
	if r.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("+%d tokens", r.Tokens))
	}
	if r.Cost > 0 {
		parts = append(parts, "+"+api.FormatCostRecorded(r.Cost))
	}
	return strings.Join(parts, " and ")
}

// checkBudgetDecision says why req cannot decide the budget pause it names (handled),
// or lets the common checks (call id, args_sha256) run (handled false). A raise on
// anything but a budget pause is refused here too.
func (rt *runtime) checkBudgetDecision(req api.DecideRequest) (err error, handled bool) {
	w := rt.pending
	onBudget := w != nil && w.decision == nil && w.budget != nil && req.CallID == w.callID
	if !onBudget {
		if how, ok := rt.decided[req.CallID]; ok && req.Budget != nil {
			return fmt.Errorf("%s was already decided (%s)", req.CallID, how), true
		}
		if w != nil && w.budget != nil && w.callID == req.CallID {
			return fmt.Errorf("%s was already decided", req.CallID), true
		}
		if req.Budget != nil {
			return fmt.Errorf("a budget raise goes with a budget pause only, and %q is none (pending: %s)", req.CallID, rt.pendingName()), true
		}
		return nil, false
	}
	p := *w.budget
	what := fmt.Sprintf("%s is a budget pause (agent %s %s)", w.callID, p.Agent, p.Spent())
	switch req.Action {
	case api.DecideDeny:
		if req.Budget != nil {
			return fmt.Errorf("%s: a denial raises nothing; leave out the raise", what), true
		}
	case api.DecideApprove:
		r := req.Budget
		switch {
		case r == nil || (r.Tokens == 0 && r.Cost == 0):
			return fmt.Errorf("%s: approve it with a raise (starter approve <run> --budget +N for tokens, --budget +$X for USD), or deny it", what), true
		case r.Tokens < 0 || r.Cost < 0 || math.IsNaN(r.Cost) || math.IsInf(r.Cost, 0):
			return fmt.Errorf("%s: a raise adds a positive amount, got %+d tokens and %v USD", what, r.Tokens, r.Cost), true
		case p.Tokens && r.Tokens == 0:
			return fmt.Errorf("%s: its token bound was reached, so the raise needs tokens (--budget +N)", what), true
		case p.Cost && r.Cost == 0:
			return fmt.Errorf("%s: its cost bound was reached, so the raise needs USD (--budget +$X)", what), true
		case len(req.Args) > 0 || req.Always:
			return fmt.Errorf("%s: edited args and always go with tool calls only", what), true
		}
	default:
		return fmt.Errorf("%s: approve it with a raise or deny it (not %s)", what, req.Action), true
	}
	return nil, false
}

// pendingName names what the run waits for, for a refusal.
func (rt *runtime) pendingName() string {
	if w := rt.pending; w != nil && w.decision == nil {
		return w.callID + " (" + w.tool + ")"
	}
	return "nothing"
}

// restoreBudget takes a session's carried budget raise (continue-as-new, reopening).
func (rt *runtime) restoreBudget(c api.SessionCarry) {
	rt.rec.Usage = c.Usage.Clone()
	if c.BudgetRaised != nil {
		rt.budget.raised = map[string]api.BudgetRaise{budgetKey(api.BudgetScopeSession, "", ""): *c.BudgetRaised}
	}
}

// carryBudget puts the session's usage and budget raise in its carry.
func (rt *runtime) carryBudget(c *api.SessionCarry) {
	c.Usage = rt.rec.Usage.Clone()
	c.BudgetRaised = nil
	if r, ok := rt.budget.raised[budgetKey(api.BudgetScopeSession, "", "")]; ok {
		c.BudgetRaised = &r
	}
}

// orModel is the model a call's usage is counted under: the provider's answer, else the
// model the call asked for ("" when the worker's llm.model was used and not reported).
func orModel(answered, asked string) string {
	if answered != "" {
		return answered
	}
	return asked
}

// countCompaction adds a compaction's summary request to the run's usage (the record's,
// hence the run's and the session's budgets; not a session turn's).
func (rt *runtime) countCompaction(spec agents.Spec, res api.CompactThreadResult) {
	if res.Usage.TotalTokens == 0 && res.Usage.Cost == 0 {
		return
	}
	var ignored api.Usage
	rt.countUsage(spec.Name, orModel(res.Model, spec.Model), res.Usage, &ignored, true)
}
