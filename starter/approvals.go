package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// approvalsCmd is the approvals inbox: every tool call waiting for a decision, in every
// run and session, found by one visibility query.
func approvalsCmd() *command {
	return &command{
		name: "approvals", args: "",
		summary: "List every tool call waiting for a decision, in every run and session, oldest first.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("agent", "", "only calls of this agent")
			fs.Bool("json", false, "print JSON (an array)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			agent, _ := fs.GetString("agent")
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			rows, err := rc.Approvals(ctx, runs.ApprovalsRequest{Agent: agent})
			if err != nil {
				return err
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return e.printJSON(rows)
			}
			if len(rows) == 0 {
				if agent != "" {
					fmt.Fprintf(e.stdout, "no tool call of agent %s waits for a decision\n", agent)
				} else {
					fmt.Fprintln(e.stdout, "no tool call waits for a decision")
				}
				return nil
			}
			// EXPIRES only when some call has a deadline, so inboxes without deadlines read
			// as before.
			expires := false
			for _, p := range rows {
				expires = expires || p.ExpiresAt != nil || p.Escalated
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			head := "AGENT\tRUN\tCALL\tTOOL\tCAPABILITY\tDETAIL\tARGS\tWAITING SINCE"
			if expires {
				head += "\tEXPIRES"
			}
			fmt.Fprintln(tw, head)
			calls, budgets := false, false
			for _, p := range rows {
				if p.Error != "" {
					fmt.Fprintf(tw, "%s\t%s\t?\t?\t?\t%s\t\t\n", p.Agent, p.Run, p.Error)
					continue
				}
				args := string(p.Args)
				if p.Capability == api.CapabilityBudget {
					// A budget pause's args are its figures, not a call's arguments.
					budgets = true
					var bp api.BudgetPause
					if err := json.Unmarshal(p.Args, &bp); err == nil {
						args = bp.Figures()
					}
				} else {
					calls = true
				}
				agent := p.Agent
				if p.Parent != "" {
					agent += " (delegate of " + p.Parent + ")" // agents as tools: the run that delegated
				}
				line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", agent, p.Run, p.CallID, p.Tool, p.Capability,
					cell(p.Detail, 60), cell(args, 60), p.Since.Format(time.RFC3339))
				if expires {
					line += "\t" + expiryCell(p.ExpiresAt, p.OnTimeout, p.Escalated)
				}
				fmt.Fprintln(tw, line)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if calls || !budgets {
				fmt.Fprintln(e.stdout, "decide with: starter approve <run> --call <call>  or  starter deny <run> --call <call> --reason TEXT")
			}
			if budgets {
				// A budget pause is approved with a raise only (approve --call alone is refused).
				fmt.Fprintln(e.stdout, "budget pauses: starter approve <run> --budget +N (tokens) or --budget +$X (USD)  or  starter deny <run> --reason TEXT")
			}
			return nil
		},
	}
}

// cell fits s on one table line of at most n runes.
func cell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// expiryCell says when a pending call's deadline passes and what happens then:
// "2026-12-01T14:02:00Z (deny)", "escalated" once it passed under escalate, "" without one.
func expiryCell(at *time.Time, onTimeout string, escalated bool) string {
	switch {
	case escalated:
		return "escalated"
	case at == nil:
		return ""
	}
	return fmt.Sprintf("%s (%s)", at.UTC().Format(time.RFC3339), onTimeout)
}
