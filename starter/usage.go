package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// usageCmd sums what the task queue's runs spent, by agent or model, over a time range.
func usageCmd() *command {
	return &command{
		name: "usage", args: "",
		summary: "Sum the tokens and cost of the runs started in a time range, by agent or by model.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("since", "", "only runs started at or after this time: RFC 3339 (2026-12-01T09:00:00Z), a date (2026-12-01, UTC) or a duration ago (24h, 7d)")
			fs.String("until", "", "only runs started before this time (same forms as --since)")
			fs.String("by", runs.UsageByAgent, "group by agent or model")
			fs.Bool("json", false, "print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			now := time.Now()
			var req runs.UsageRequest
			for _, f := range []struct {
				name string
				to   *time.Time
			}{{"since", &req.Since}, {"until", &req.Until}} {
				v, _ := fs.GetString(f.name)
				t, err := parseWhen(v, now)
				if err != nil {
					return usagef("--%s: %v", f.name, err)
				}
				*f.to = t
			}
			req.By, _ = fs.GetString("by")
			if req.By != runs.UsageByAgent && req.By != runs.UsageByModel {
				return usagef("--by %q: want %s or %s", req.By, runs.UsageByAgent, runs.UsageByModel)
			}
			if !req.Since.IsZero() && !req.Until.IsZero() && !req.Until.After(req.Since) {
				return usagef("--until %s is not after --since %s", req.Until.UTC().Format(time.RFC3339), req.Since.UTC().Format(time.RFC3339))
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			rep, err := rc.Usage(ctx, req)
			if err != nil {
				return err
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return e.printJSON(rep)
			}
			printUsageReport(e, rep)
			return nil
		},
	}
}

func printUsageReport(e *env, rep runs.UsageReport) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tRUNS\tCALLS\tPROMPT\tCOMPLETION\tTOTAL\tCOST\n", strings.ToUpper(rep.By))
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Name, r.Runs, r.Calls, r.PromptTokens, r.CompletionTokens, r.TotalTokens, r.CostText())
	}
	t := rep.Total
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%s\n", rep.Runs, t.Calls, t.PromptTokens, t.CompletionTokens, t.TotalTokens, t.CostText())
	tw.Flush()
	span := "all time"
	switch {
	case rep.Since != nil && rep.Until != nil:
		span = "started " + rep.Since.Format(time.RFC3339) + " to " + rep.Until.Format(time.RFC3339)
	case rep.Since != nil:
		span = "started since " + rep.Since.Format(time.RFC3339)
	case rep.Until != nil:
		span = "started before " + rep.Until.Format(time.RFC3339)
	}
	fmt.Fprintf(e.stdout, "%d runs (%s)\n", rep.Runs, span)
	// Say why the RUNS column does not add up to the total, when it does not.
	inRows := 0
	for _, r := range rep.Rows {
		inRows += r.Runs
	}
	if rep.NoUsage > 0 {
		fmt.Fprintf(e.stdout, "%d of them made no model call and are in no row\n", rep.NoUsage)
	}
	if inRows > rep.Runs-rep.NoUsage {
		fmt.Fprintf(e.stdout, "a run whose calls went to several %ss counts in each of their rows\n", rep.By)
	}
	if rep.Truncated {
		fmt.Fprintf(e.stdout, "only the newest %d runs are counted; narrow the range\n", runs.MaxUsageRuns)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(e.stderr, "warning: run %s not counted: %s\n", s.ID, s.Error)
	}
}

// parseWhen reads a --since/--until time: RFC 3339, a date (midnight UTC), or a duration
// before now ("24h", "90m", "7d"). "" is no bound.
func parseWhen(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-12-01T09:00:00Z), a date (2026-12-01) or a duration ago (24h, 7d)", v)
}

// parseRaise reads --budget: one "+50000" (tokens, k and M allowed: "+50k") or one
// "+$2.50" (USD), within what one raise may add (api.BudgetRaise.Problem).
func parseRaise(v string) (*api.BudgetRaise, error) {
	var r api.BudgetRaise
	part := strings.TrimSpace(v)
	p, signed := strings.CutPrefix(part, "+")
	if !signed || strings.ContainsAny(p, ",+ ") {
		return nil, fmt.Errorf("%q is not a raise: want one +N tokens (+50000, +50k, +1.5M) or one +$X (+$2.50)", v)
	}
	if usd, ok := strings.CutPrefix(p, "$"); ok {
		c, err := strconv.ParseFloat(usd, 64)
		if err != nil || !(c > 0) {
			return nil, fmt.Errorf("%q is not a cost raise: want +$X with X > 0, such as +$2.50", part)
		}
		r.Cost = c
	} else {
		mult := 1.0
		switch {
		case strings.HasSuffix(p, "k"), strings.HasSuffix(p, "K"):
			mult, p = 1e3, p[:len(p)-1]
		case strings.HasSuffix(p, "M"), strings.HasSuffix(p, "m"):
			mult, p = 1e6, p[:len(p)-1]
		}
		n, err := strconv.ParseFloat(p, 64)
		if err != nil || !(n*mult >= 1) || n*mult > api.MaxRaiseTokens {
			return nil, fmt.Errorf("%q is not a token raise: want +N tokens with 1 ≤ N ≤ %d, such as +50000 or +50k (or +$X for USD)", part, api.MaxRaiseTokens)
		}
		r.Tokens = int(n * mult)
	}
	if problem := r.Problem(); problem != "" {
		return nil, fmt.Errorf("%q: %s", part, problem)
	}
	return &r, nil
}

// printRunUsage adds the record's usage to `starter show`.
func printRunUsage(row func(k, v string), u *api.RunUsage) {
	if u == nil {
		return
	}
	row("Usage", u.Summary())
	if len(u.ByAgent) > 1 {
		for _, l := range api.Breakdown(u.ByAgent) {
			row("  agent", l)
		}
	}
	for _, l := range api.Breakdown(u.ByModel) {
		row("  model", l)
	}
}
