package runs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/nexo-temporal/nexo/api"
)

// Usage groupings.
const (
	UsageByAgent = "agent"
	UsageByModel = "model"
)

// MaxUsageRuns bounds the runs one Usage call reads (each is a record read).
const MaxUsageRuns = 10_000

// UsageRequest asks what the runs of the task queue spent, started in [Since, Until).
type UsageRequest struct {
	// Since and Until bound the runs' start time; zero: unbounded.
	Since, Until time.Time
	// By is UsageByAgent (default) or UsageByModel.
	By string
}

// UsageRow is one agent's (or model's) spending over the runs read.
type UsageRow struct {
	Name string `json:"name"`
	Runs int    `json:"runs"`
	api.UsageSum
}

// UsageSkip is a run whose record could not be read; its spending is not in the sums.
type UsageSkip struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// UsageReport is the answer of Usage.
type UsageReport struct {
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	By    string     `json:"by"`
	// Runs counts the runs (sessions once each) read; NoUsage those of them that made no
	// model call (a workflow without agents, a run that failed first), which are in no row,
	// so the rows' runs add up to Runs - NoUsage (more when a run's calls went to several
	// agents or models: it counts in each of their rows).
	Runs    int          `json:"runs"`
	NoUsage int          `json:"runs_without_usage"`
	Total   api.UsageSum `json:"total"`
	Rows    []UsageRow   `json:"rows"`
	Skipped []UsageSkip  `json:"skipped,omitempty"`
	// Truncated says more than MaxUsageRuns runs matched; the sums cover the newest.
	Truncated bool `json:"truncated,omitempty"`
}

// Usage sums the usage of the task queue's runs started in the request's range: a
// visibility query lists them, and each one's record (the stored record of a closed run,
// the query of an open one) gives its usage. A session is counted once, with its
// whole usage (carried across continue-as-new), when its newest execution started in the
// range. Runs are grouped by agent or by model; the total is over every run.
func (c *Client) Usage(ctx context.Context, req UsageRequest) (UsageReport, error) {
	by := req.By
	if by == "" {
		by = UsageByAgent
	}
	if by != UsageByAgent && by != UsageByModel {
		return UsageReport{}, &BadRequestError{Msg: fmt.Sprintf("usage by %q: want %s or %s", req.By, UsageByAgent, UsageByModel)}
	}
	if !req.Since.IsZero() && !req.Until.IsZero() && !req.Until.After(req.Since) {
		return UsageReport{}, &BadRequestError{Msg: fmt.Sprintf("usage range: until %s is not after since %s",
			req.Until.UTC().Format(time.RFC3339), req.Since.UTC().Format(time.RFC3339))}
	}
	rep := UsageReport{By: by, Rows: []UsageRow{}}
	if !req.Since.IsZero() {
		t := req.Since.UTC()
		rep.Since = &t
	}
	if !req.Until.IsZero() {
		t := req.Until.UTC()
		rep.Until = &t
	}
	q := usageQuery(c.taskQueue, req)
	seen := map[string]bool{}
	var ids []string
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, PageSize: 500, NextPageToken: token, Query: q})
		var ia *serviceerror.InvalidArgument
		if errors.As(err, &ia) {
			return UsageReport{}, &BadRequestError{Msg: fmt.Sprintf("list runs for usage: %s", ia.Message)}
		}
		if err != nil {
			return UsageReport{}, fmt.Errorf("list runs for usage (query %q): %w", q, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if seen[id] {
				continue // an earlier execution of a session: its newest carries the totals
			}
			seen[id] = true
			if len(ids) == MaxUsageRuns {
				rep.Truncated = true
				break
			}
			ids = append(ids, id)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 || rep.Truncated {
			break
		}
	}
	rows := map[string]*UsageRow{}
	for _, id := range ids {
		rec, err := c.Get(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return UsageReport{}, ctx.Err()
			}
			rep.Skipped = append(rep.Skipped, UsageSkip{ID: id, Error: err.Error()})
			continue
		}
		rep.Runs++
		if rec.Usage == nil || rec.Usage.Calls == 0 {
			rep.NoUsage++
			continue
		}
		rep.Total.Merge(rec.Usage.UsageSum)
		groups := rec.Usage.ByAgent
		if by == UsageByModel {
			groups = rec.Usage.ByModel
		}
		for name, sum := range groups {
			r := rows[name]
			if r == nil {
				r = &UsageRow{Name: name}
				rows[name] = r
			}
			r.Runs++
			r.Merge(sum)
		}
	}
	// Sums of float prices carry noise (0.0005059999999999999): report nano-dollars.
	rep.Total.Cost = api.RoundCost(rep.Total.Cost)
	for _, r := range rows {
		r.Cost = api.RoundCost(r.Cost)
		rep.Rows = append(rep.Rows, *r)
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rep.Rows[i].Name < rep.Rows[j].Name })
	return rep, nil
}

// usageQuery lists the task queue's runs (not its registry nor its token limiters)
// started in the range.
func usageQuery(taskQueue string, req UsageRequest) string {
	parts := []string{fmt.Sprintf("WorkflowType != '%s' AND WorkflowType != '%s' AND WorkflowType != '%s'", api.WorkflowRegistry, api.WorkflowTokenLimiter, api.WorkflowNotifier),
		fmt.Sprintf("TaskQueue = '%s'", strings.ReplaceAll(taskQueue, "'", ""))}
	if !req.Since.IsZero() {
		parts = append(parts, fmt.Sprintf("StartTime >= '%s'", req.Since.UTC().Format(time.RFC3339Nano)))
	}
	if !req.Until.IsZero() {
		parts = append(parts, fmt.Sprintf("StartTime < '%s'", req.Until.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(parts, " AND ")
}
