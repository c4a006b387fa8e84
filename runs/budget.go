package runs

import (
	"fmt"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// budgetMisfit refuses a budget raise where no budget pause waits, before anything is
// sent: the raise would be lost on a workflow's own pause.
func budgetMisfit(rec api.Record, d Decision) error {
	if d.Budget == nil {
		return nil
	}
	a, pending := rec.Approval()
	if pending && a.Capability == api.CapabilityBudget && (d.CallID == "" || d.CallID == a.CallID) {
		return nil
	}
	what := fmt.Sprintf("it is %s", rec.Status)
	switch {
	case pending:
		what = fmt.Sprintf("it waits for tool call %s (%s)", a.CallID, a.Tool)
	case rec.Status == api.StatusSuspended:
		if si, ok := rec.Suspend(); ok {
			what = fmt.Sprintf("it is paused by the workflow (%s)", si.Reason)
		}
	}
	return &BadRequestError{Msg: fmt.Sprintf("run %s does not wait on its budget (%s): a budget raise (--budget) applies to a budget pause only", rec.ID, what)}
}

// budgetDecided describes a recorded decision on a budget pause, or "" for a tool call's.
// pause is the pause as the decider read it (nil when unknown): a raise that leaves its
// reached bound still reached is said to be not enough, since the run then pauses again
// at once and a waiting prompt keeps waiting for the next decision.
func budgetDecided(id string, res api.DecideResult, pause *api.BudgetPause) string {
	if res.Tool != api.CapabilityBudget {
		return ""
	}
	if res.Action == api.DecideDeny {
		return fmt.Sprintf("denied more budget to run %s (%s): the agent stops with what it has", id, res.CallID)
	}
	var parts []string
	if r := res.Budget; r != nil {
		if r.Tokens > 0 {
			parts = append(parts, fmt.Sprintf("+%d tokens", r.Tokens))
		}
		if r.Cost > 0 {
			parts = append(parts, "+"+api.FormatCost(r.Cost))
		}
	}
	if p, r := pause, res.Budget; p != nil && r != nil {
		tokensShort := p.Tokens && p.MaxTokens > 0 && p.UsedTokens >= p.MaxTokens+r.Tokens
		costShort := p.Cost && p.MaxCost > 0 && p.UsedCost >= p.MaxCost+r.Cost
		if tokensShort || costShort {
			after := *p
			after.MaxTokens += r.Tokens
			after.MaxCost += r.Cost
			return fmt.Sprintf("raised the budget of run %s by %s (%s), which is not enough: agent %s %s, so it pauses again for another raise or a denial",
				id, strings.Join(parts, " and "), res.CallID, p.Agent, strings.TrimPrefix(after.Detail(), "agent "+p.Agent+" "))
		}
	}
	return fmt.Sprintf("raised the budget of run %s by %s (%s); the agent goes on", id, strings.Join(parts, " and "), res.CallID)
}
