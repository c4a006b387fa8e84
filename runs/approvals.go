package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/nexo-temporal/nexo/api"
)

// Pending is one tool call waiting for a human decision: a row of the approvals inbox.
type Pending struct {
	// Agent is the agent whose call waits; Run the run's id (for a session its workflow id,
	// session:<agent>:<instance>), Workflow its type, Instance the session's instance id.
	Agent    string `json:"agent"`
	Run      string `json:"run"`
	Workflow string `json:"workflow"`
	Instance string `json:"instance,omitempty"`
	// Parent is the run that started this one as a delegate (an agent_<name> call of its
	// agent's delegates), from visibility; empty for a top run.
	Parent string `json:"parent,omitempty"`
	// CallID is what approve and deny name with --call.
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Capability string          `json:"capability"`
	Detail     string          `json:"detail"`
	Args       json.RawMessage `json:"args"`
	// ArgsSHA256 is what a decision on the call carries (nexo.decide refuses it when the
	// arguments changed since).
	ArgsSHA256 string    `json:"args_sha256,omitempty"`
	Since      time.Time `json:"waiting_since"`
	// ExpiresAt is when the call's approval_timeout passes and OnTimeout what happens then;
	// both absent for a call without a deadline (or one that escalated, Escalated true).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	OnTimeout string     `json:"on_timeout,omitempty"`
	Escalated bool       `json:"escalated,omitempty"`
	// Error says why the run's record could not be read (no worker answered its query):
	// the run waits, its call is unknown until a worker is back.
	Error string `json:"error,omitempty"`
}

// ApprovalsRequest filters Approvals.
type ApprovalsRequest struct {
	Agent string // empty: every agent
	// Limit bounds how many waiting runs are read (<= 0: 500).
	Limit int
}

// maxApprovalReads is how many waiting runs' records Approvals reads at once.
const maxApprovalReads = 8

// Approvals lists every tool call waiting for a decision, in every open run and session
// (of one agent when req.Agent is set), oldest first. The runs are found by one visibility
// query on the NexoApprovalAgent search attribute the workflow keeps current, never by
// scanning runs; then each found run's pending call is read from the run itself (the
// nexo.events query, which carries what it waits for and no events), so a call decided
// since visibility indexed it is left out.
func (c *Client) Approvals(ctx context.Context, req ApprovalsRequest) ([]Pending, error) {
	if strings.ContainsAny(req.Agent, `'"\`) {
		return nil, &BadRequestError{Msg: fmt.Sprintf("agent name %q contains a quote", req.Agent)}
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 500
	}
	q := fmt.Sprintf("ExecutionStatus = 'Running' AND %s IS NOT NULL", api.SearchAttributeApprovalAgent)
	if req.Agent != "" {
		q = fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s'", api.SearchAttributeApprovalAgent, req.Agent)
	}
	var rows []Pending
	var token []byte
	for len(rows) < limit {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, PageSize: int32(min(limit-len(rows), 100)), NextPageToken: token, Query: q,
		})
		var ia *serviceerror.InvalidArgument
		if errors.As(err, &ia) {
			return nil, fmt.Errorf("list approvals (query %q): %s; does namespace %s have the search attribute %s?",
				q, ia.Message, c.namespace, api.SearchAttributeApprovalAgent)
		}
		if err != nil {
			return nil, fmt.Errorf("list approvals (query %q): %w", q, err)
		}
		for _, e := range resp.GetExecutions() {
			p := Pending{Run: e.GetExecution().GetWorkflowId(), Workflow: e.GetType().GetName(),
				Parent: e.GetParentExecution().GetWorkflowId()}
			if raw := e.GetSearchAttributes().GetIndexedFields()[api.SearchAttributeApprovalAgent]; raw != nil {
				_ = converter.GetDefaultDataConverter().FromPayload(raw, &p.Agent)
			}
			if _, inst, ok := api.ParseSessionID(p.Run); ok {
				p.Instance = inst
			}
			rows = append(rows, p)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}

	keep := make([]bool, len(rows))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxApprovalReads)
	for i := range rows {
		g.Go(func() error {
			keep[i] = c.readPending(gctx, &rows[i])
			return nil
		})
	}
	_ = g.Wait() // readPending records its failure in the row
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]Pending, 0, len(rows))
	for i, p := range rows {
		if keep[i] {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Run < out[j].Run
	})
	return out, nil
}

// readPending fills p with the call its run waits for and reports whether there is one.
func (c *Client) readPending(ctx context.Context, p *Pending) bool {
	// After the last seq: the page carries no events, only what the run waits for.
	page, err := c.queryEvents(ctx, p.Run, math.MaxInt64)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return false // closed and gone since the listing
		}
		p.Error = fmt.Sprintf("read run %s: %v", p.Run, err)
		return true
	}
	rec := api.Record{State: page.Waiting}
	a, ok := rec.Approval()
	if !ok {
		return false // decided since visibility indexed the run
	}
	p.CallID, p.Tool, p.Capability, p.Args, p.Since = a.CallID, a.Tool, a.Capability, a.Args, a.At
	p.ExpiresAt, p.OnTimeout, p.Escalated, p.ArgsSHA256 = a.ExpiresAt, a.OnTimeout, a.Escalated, a.ArgsSHA256
	p.Detail = a.Detail
	if a.Capability == api.CapabilityBudget {
		// A budget pause has no tool detail: its suspend reason ("budget: agent ...")
		// would leave ": agent ..." once the tool name is cut off.
		var bp api.BudgetPause
		if err := json.Unmarshal(a.Args, &bp); err == nil && bp.Agent != "" {
			p.Detail = bp.Detail()
		} else if s, ok := rec.Suspend(); ok {
			p.Detail = strings.TrimPrefix(s.Reason, "budget: ")
		}
	}
	if s, ok := rec.Suspend(); ok && p.Detail == "" {
		// A run recorded before __approval__ had a detail: its suspend reason reads
		// "approval: <tool> <detail>" (see the agent's gate).
		d := strings.TrimPrefix(s.Reason, "approval: ")
		p.Detail = strings.TrimSpace(strings.TrimPrefix(d, a.Tool))
	}
	return true
}
