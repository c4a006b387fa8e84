package runs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// TestBudgetMisfit: a raise is sent only to a run whose pending decision is a budget
// pause; anywhere else it is refused before anything reaches the run, naming what waits.
func TestBudgetMisfit(t *testing.T) {
	raise := Decision{Action: api.DecideApprove, Budget: &api.BudgetRaise{Tokens: 10}}
	state := func(a api.ApprovalInfo) map[string]json.RawMessage {
		b, _ := json.Marshal(a)
		s, _ := json.Marshal(api.SuspendInfo{Reason: "budget: ..."})
		return map[string]json.RawMessage{api.StateApproval: b, api.StateSuspend: s}
	}
	onBudget := api.Record{ID: "r1", Status: api.StatusSuspended, State: state(api.ApprovalInfo{CallID: "budget-3", Capability: api.CapabilityBudget})}
	if err := budgetMisfit(onBudget, raise); err != nil {
		t.Errorf("raise on a budget pause refused: %v", err)
	}
	onTool := api.Record{ID: "r2", Status: api.StatusSuspended, State: state(api.ApprovalInfo{CallID: "1.1", Tool: "write_file", Capability: "write"})}
	paused := api.Record{ID: "r3", Status: api.StatusSuspended, State: map[string]json.RawMessage{api.StateSuspend: json.RawMessage(`{"reason":"awaiting approval"}`)}}
	done := api.Record{ID: "r4", Status: api.StatusDone}
	for rec, want := range map[*api.Record]string{
		&onTool: "it waits for tool call 1.1 (write_file)", &paused: "paused by the workflow (awaiting approval)", &done: "it is done",
	} {
		err := budgetMisfit(*rec, raise)
		var br *BadRequestError
		if !errors.As(err, &br) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "does not wait on its budget") {
			t.Errorf("%s: %v, want a bad request saying %q", rec.ID, err, want)
		}
	}
	if err := budgetMisfit(onTool, Decision{Action: api.DecideApprove}); err != nil {
		t.Errorf("a decision without a raise is not budgetMisfit's: %v", err)
	}
	if got := budgetDecided("r1", api.DecideResult{CallID: "budget-3", Tool: api.CapabilityBudget, Action: api.DecideApprove,
		Budget: &api.BudgetRaise{Tokens: 50000, Cost: 2.5}}, nil); got != "raised the budget of run r1 by +50000 tokens and +$2.5000 (budget-3); the agent goes on" {
		t.Errorf("budgetDecided = %q", got)
	}
	// A raise that leaves the reached bound reached says so: the run pauses again at once.
	pause := &api.BudgetPause{Agent: "counter", Scope: api.BudgetScopeTurn, UsedTokens: 36, MaxTokens: 1, Tokens: true}
	short := api.DecideResult{CallID: "budget-1.2", Tool: api.CapabilityBudget, Action: api.DecideApprove, Budget: &api.BudgetRaise{Tokens: 5}}
	if got, want := budgetDecided("s", short, pause), "raised the budget of run s by +5 tokens (budget-1.2), which is not enough: agent counter used 36 of 6 tokens in this turn, so it pauses again for another raise or a denial"; got != want {
		t.Errorf("budgetDecided of a short raise\n got %q\nwant %q", got, want)
	}
	short.Budget.Tokens = 36
	if got := budgetDecided("s", short, pause); !strings.HasSuffix(got, "; the agent goes on") {
		t.Errorf("a raise to a bound of 37 over 36 used: %q, want it to go on", got)
	}
}
