package api

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Budget is an agent definition's `budget:` setting: the tokens and cost (USD, from the
// worker's llm.prices) the agent may spend before a human decides whether it goes on.
// MaxTokens and MaxCost bound a run (a session's turn, for a session); SessionMaxTokens
// and SessionMaxCost bound a whole session across its turns and continue-as-new. Zero
// means no bound.
//
// The rule: before each model call, when what was spent so far has reached a bound, the
// run suspends with reason "budget: ..." and a pending decision of capability
// CapabilityBudget. The next call's size is unknown before it is made, so a bound is
// checked against what was spent, and one call may pass it.
type Budget struct {
	MaxTokens        int     `json:"max_tokens,omitempty" mapstructure:"max_tokens" yaml:"max_tokens"`
	MaxCost          float64 `json:"max_cost,omitempty" mapstructure:"max_cost" yaml:"max_cost"`
	SessionMaxTokens int     `json:"session_max_tokens,omitempty" mapstructure:"session_max_tokens" yaml:"session_max_tokens"`
	SessionMaxCost   float64 `json:"session_max_cost,omitempty" mapstructure:"session_max_cost" yaml:"session_max_cost"`
}

// IsZero reports whether the budget bounds nothing.
func (b Budget) IsZero() bool {
	return b.MaxTokens == 0 && b.MaxCost == 0 && b.SessionMaxTokens == 0 && b.SessionMaxCost == 0
}

// Validate names every negative or non-finite bound.
func (b Budget) Validate() []string {
	var bad []string
	for _, f := range []struct {
		name string
		v    float64
	}{{"max_tokens", float64(b.MaxTokens)}, {"max_cost", b.MaxCost},
		{"session_max_tokens", float64(b.SessionMaxTokens)}, {"session_max_cost", b.SessionMaxCost}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			bad = append(bad, fmt.Sprintf("budget.%s: %v is not a bound (want a positive number, or leave it out)", f.name, f.v))
		}
	}
	return bad
}

// CapabilityBudget is the capability (and tool) of the pending decision a budget pause
// records under StateApproval: the inbox, the record and the decide path show it like a
// tool call's approval, and its call id starts with BudgetCallPrefix.
const (
	CapabilityBudget = "budget"
	BudgetCallPrefix = "budget-"
)

// Budget events.
const (
	EventBudgetExceeded = "budget_exceeded"
	EventBudgetRaised   = "budget_raised"
	EventBudgetDenied   = "budget_denied"
)

// Budget scopes: what a pause's bound covers.
const (
	BudgetScopeRun     = "run"
	BudgetScopeTurn    = "turn"
	BudgetScopeSession = "session"
)

// BudgetRaise is what approving a budget pause adds to the bound that was reached:
// Tokens to its token bound, Cost (USD) to its cost bound. It travels in
// DecideRequest.Budget.
type BudgetRaise struct {
	Tokens int     `json:"tokens,omitempty"`
	Cost   float64 `json:"cost,omitempty"`
}

// The bounds of one raise, and of what a decision carries (DecideRequest.Problem): a raise
// adds one amount, never enough to overflow a bound, and a decision's texts and edited
// arguments stay small in history.
const (
	MaxRaiseTokens  = 1_000_000_000 // tokens one raise adds
	MaxRaiseCost    = 1_000_000.0   // USD one raise adds
	MaxDecisionText = 64 << 10      // bytes of a decision's reason or answer
	MaxDecisionArgs = 64 << 10      // bytes of a decision's edited arguments
)

// Problem says what is wrong with the raise ("" when nothing is): it adds exactly one
// positive amount, tokens or USD, within MaxRaiseTokens / MaxRaiseCost.
func (r BudgetRaise) Problem() string {
	switch {
	case r.Tokens < 0 || r.Cost < 0 || math.IsNaN(r.Cost) || math.IsInf(r.Cost, 0):
		return fmt.Sprintf("a raise adds a positive amount, got %+d tokens and %v USD", r.Tokens, r.Cost)
	case r.Tokens > 0 && r.Cost > 0:
		return "a raise adds one amount, tokens or USD, not both (raise again for the other)"
	case r.Tokens > MaxRaiseTokens:
		return fmt.Sprintf("a raise of %d tokens is over the %d one raise may add", r.Tokens, MaxRaiseTokens)
	case r.Cost > MaxRaiseCost:
		return fmt.Sprintf("a raise of %s is over the %s one raise may add", FormatCost(r.Cost), FormatCost(MaxRaiseCost))
	}
	return ""
}

// BudgetPause is the Args of a budget pause's ApprovalInfo: which bound was reached and
// how much was spent. A raise must add to the kind that was reached (tokens or cost).
type BudgetPause struct {
	Agent string `json:"agent"`
	// Scope is BudgetScopeRun, BudgetScopeTurn or BudgetScopeSession.
	Scope string `json:"scope"`
	// UsedTokens and UsedCost are what the scope has spent; MaxTokens and MaxCost its
	// bounds now (raises included; 0: none).
	UsedTokens int     `json:"used_tokens"`
	MaxTokens  int     `json:"max_tokens,omitempty"`
	UsedCost   float64 `json:"used_cost,omitempty"`
	MaxCost    float64 `json:"max_cost,omitempty"`
	// Tokens and Cost say which bound was reached.
	Tokens bool `json:"tokens_reached,omitempty"`
	Cost   bool `json:"cost_reached,omitempty"`
}

// Spent says what a pause's scope spent of its bounds: "used 1200 of 1000 tokens in this
// run" (and the cost, when a cost bound was reached). Workflows put it in the pause's
// reason, so its wording is part of recorded histories: change it only with a version.
func (p BudgetPause) Spent() string { return p.spent(FormatCostRecorded) }

func (p BudgetPause) spent(cost func(float64) string) string {
	var parts []string
	if p.Tokens || !p.Cost {
		parts = append(parts, fmt.Sprintf("used %d of %d tokens", p.UsedTokens, p.MaxTokens))
	}
	if p.Cost {
		parts = append(parts, fmt.Sprintf("spent %s of %s", cost(p.UsedCost), cost(p.MaxCost)))
	}
	where := map[string]string{BudgetScopeRun: "this run", BudgetScopeTurn: "this turn", BudgetScopeSession: "this session"}[p.Scope]
	return strings.Join(parts, " and ") + " in " + where
}

// Detail is the pause for people, as the approvals inbox lists it: "agent counter used 36
// of 1 tokens in this turn" (costs as FormatCost prints them).
func (p BudgetPause) Detail() string { return "agent " + p.Agent + " " + p.spent(FormatCost) }

// Figures are the pause's spend against its bounds on one line, the reached bound marked:
// "tokens 36 of 1 (reached), cost $0.000506".
func (p BudgetPause) Figures() string {
	mark := func(reached bool) string {
		if reached {
			return " (reached)"
		}
		return ""
	}
	var parts []string
	if p.MaxTokens > 0 || p.UsedTokens > 0 {
		s := fmt.Sprintf("tokens %d", p.UsedTokens)
		if p.MaxTokens > 0 {
			s += fmt.Sprintf(" of %d", p.MaxTokens)
		}
		parts = append(parts, s+mark(p.Tokens))
	}
	if p.MaxCost > 0 || p.UsedCost > 0 {
		s := "cost " + FormatCost(p.UsedCost)
		if p.MaxCost > 0 {
			s += " of " + FormatCost(p.MaxCost)
		}
		parts = append(parts, s+mark(p.Cost))
	}
	return strings.Join(parts, ", ")
}

// UsageSum adds up model calls: their count, tokens and cost (USD). UnpricedCalls counts
// the calls whose model has no price in llm.prices: their tokens are in the sum, their
// cost is not, so Cost is then a lower bound.
type UsageSum struct {
	Calls            int     `json:"calls"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	TotalTokens      int     `json:"total_tokens"`
	Cost             float64 `json:"cost"`
	UnpricedCalls    int     `json:"unpriced_calls,omitempty"`
}

// Add counts one model call.
func (s *UsageSum) Add(u Usage) {
	s.Calls++
	s.PromptTokens += u.PromptTokens
	s.CompletionTokens += u.CompletionTokens
	s.TotalTokens += u.TotalTokens
	s.Cost += u.Cost
	if !u.Priced {
		s.UnpricedCalls++
	}
}

// Merge adds another sum.
func (s *UsageSum) Merge(o UsageSum) {
	s.Calls += o.Calls
	s.PromptTokens += o.PromptTokens
	s.CompletionTokens += o.CompletionTokens
	s.TotalTokens += o.TotalTokens
	s.Cost += o.Cost
	s.UnpricedCalls += o.UnpricedCalls
}

// CostText renders a cost for people: "$0.0123", with "≥" when some calls were unpriced
// and "unpriced" when none was priced.
func (s UsageSum) CostText() string {
	switch {
	case s.Calls > 0 && s.UnpricedCalls == s.Calls:
		return "unpriced"
	case s.UnpricedCalls > 0:
		return fmt.Sprintf("≥ %s (%d unpriced calls)", FormatCost(s.Cost), s.UnpricedCalls)
	}
	return FormatCost(s.Cost)
}

// FormatCost renders USD for people, the same way wherever a cost is printed (show, usage,
// the inbox, the web page): four decimals from $0.001 up ("$0.0123", "$2.5000"), and
// three significant digits below, where four decimals would round a per-call cost away
// ("$0.000506", not "$0.0005" nor 0.0005059999999999999).
func FormatCost(c float64) string {
	c = RoundCost(c)
	if c == 0 || math.Abs(c) >= 0.001 || math.IsNaN(c) || math.IsInf(c, 0) {
		return fmt.Sprintf("$%.4f", c)
	}
	decimals := 2 - int(math.Floor(math.Log10(math.Abs(c))))
	return fmt.Sprintf("$%.*f", decimals, c)
}

// FormatCostRecorded is the four-decimal form ("$0.0005") that workflows write into the
// texts they record (a budget pause's reason, a raise): recorded histories hold it, so it
// does not change with FormatCost.
func FormatCostRecorded(c float64) string { return fmt.Sprintf("$%.4f", c) }

// RoundCost drops the float noise of summing prices (0.0005059999999999999 is $0.000506):
// a cost is kept to the nano-dollar.
func RoundCost(c float64) float64 {
	if math.IsNaN(c) || math.IsInf(c, 0) {
		return c
	}
	return math.Round(c*1e9) / 1e9
}

// RunUsage is the record's `usage`: every model call of the run (of the whole session,
// across turns and continue-as-new, for a session), in total and by agent and model.
type RunUsage struct {
	UsageSum
	ByAgent map[string]UsageSum `json:"by_agent,omitempty"`
	ByModel map[string]UsageSum `json:"by_model,omitempty"`
}

// Add counts one model call of agent with model.
func (r *RunUsage) Add(agent, model string, u Usage) {
	r.UsageSum.Add(u)
	if r.ByAgent == nil {
		r.ByAgent = map[string]UsageSum{}
	}
	if r.ByModel == nil {
		r.ByModel = map[string]UsageSum{}
	}
	a := r.ByAgent[agent]
	a.Add(u)
	r.ByAgent[agent] = a
	m := r.ByModel[model]
	m.Add(u)
	r.ByModel[model] = m
}

// Clone is a deep copy.
func (r *RunUsage) Clone() *RunUsage {
	if r == nil {
		return nil
	}
	c := &RunUsage{UsageSum: r.UsageSum, ByAgent: map[string]UsageSum{}, ByModel: map[string]UsageSum{}}
	for k, v := range r.ByAgent {
		c.ByAgent[k] = v
	}
	for k, v := range r.ByModel {
		c.ByModel[k] = v
	}
	return c
}

// Summary is one line for people: "3 calls, 1200 tokens (900 in, 300 out), $0.0042".
func (s UsageSum) Summary() string {
	calls := "calls"
	if s.Calls == 1 {
		calls = "call"
	}
	return fmt.Sprintf("%d %s, %d tokens (%d in, %d out), %s", s.Calls, calls, s.TotalTokens, s.PromptTokens, s.CompletionTokens, s.CostText())
}

// Breakdown renders a map of sums as "name: summary" lines, sorted by name.
func Breakdown(m map[string]UsageSum) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if strings.TrimSpace(name) == "" {
			name = "(unnamed)"
		}
		out = append(out, name+": "+m[k].Summary())
	}
	return out
}
