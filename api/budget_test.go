package api

import "testing"

// TestFormatCost (issue 29 item 7): money reads the same everywhere and a per-call cost
// keeps its figures: no float noise, no cost rounded to $0.0005.
func TestFormatCost(t *testing.T) {
	for c, want := range map[float64]string{
		0:                     "$0.0000",
		0.0005059999999999999: "$0.000506",
		0.000506:              "$0.000506",
		0.0000012:             "$0.00000120",
		0.0015:                "$0.0015",
		0.0123:                "$0.0123",
		2.5:                   "$2.5000",
		0.30000000000000004:   "$0.3000",
	} {
		if got := FormatCost(c); got != want {
			t.Errorf("FormatCost(%v) = %q, want %q", c, got, want)
		}
	}
	if got := FormatCostRecorded(0.000506); got != "$0.0005" {
		t.Errorf("FormatCostRecorded(0.000506) = %q: recorded histories hold the four-decimal form", got)
	}
	if got := (ModelPrice{InputPerMTok: 1, OutputPerMTok: 2}).Cost(306, 100); got != 0.000506 {
		t.Errorf("Cost = %v, want 0.000506 exactly", got)
	}
}

// TestBudgetPauseForPeople: the inbox's detail and figures of a budget pause.
func TestBudgetPauseForPeople(t *testing.T) {
	p := BudgetPause{Agent: "counter", Scope: BudgetScopeTurn, UsedTokens: 36, MaxTokens: 1, UsedCost: 0.0005059999999999999, Tokens: true}
	if got, want := p.Detail(), "agent counter used 36 of 1 tokens in this turn"; got != want {
		t.Errorf("Detail = %q, want %q", got, want)
	}
	if got, want := p.Figures(), "tokens 36 of 1 (reached), cost $0.000506"; got != want {
		t.Errorf("Figures = %q, want %q", got, want)
	}
	c := BudgetPause{Agent: "scribe", Scope: BudgetScopeRun, UsedTokens: 900, UsedCost: 0.02, MaxCost: 0.01, Cost: true}
	if got, want := c.Detail(), "agent scribe spent $0.0200 of $0.0100 in this run"; got != want {
		t.Errorf("Detail = %q, want %q", got, want)
	}
	if got, want := c.Figures(), "tokens 900, cost $0.0200 of $0.0100 (reached)"; got != want {
		t.Errorf("Figures = %q, want %q", got, want)
	}
}
