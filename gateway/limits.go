package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// Limits confine a token to some runs: those of the agents and workflow types it names
// (names or path.Match globs). A nil list means all. A run's workflow is its type; its
// agent is the session's (workflow id session:<agent>:<instance>) or, for an AgentRun,
// input.agent. The agent of any other run cannot be known, so a token with Agents never
// sees it.
//
// Limits are the first of a token's confinements; a tenant (a Temporal fairness key and
// quota) is meant to be the next field here, checked at the same place (limitedRuns).
type Limits struct {
	Agents    []string
	Workflows []string
}

// Unlimited reports whether the limits admit every run.
func (l Limits) Unlimited() bool { return l.Agents == nil && l.Workflows == nil }

// String names the limits as an error shows them: "agents support-*, triage; workflows all".
func (l Limits) String() string {
	list := func(ps []string) string {
		if ps == nil {
			return "all"
		}
		return strings.Join(ps, ", ")
	}
	return "agents " + list(l.Agents) + "; workflows " + list(l.Workflows)
}

// check refuses a malformed limit: an empty list (it would match nothing) or a bad glob.
func (l Limits) check() error {
	for _, lim := range []struct {
		key  string
		list []string
	}{{"agents", l.Agents}, {"workflows", l.Workflows}} {
		if lim.list != nil && len(lim.list) == 0 {
			return fmt.Errorf("%s: an empty list matches nothing; leave it nil for all", lim.key)
		}
		for i, p := range lim.list {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return fmt.Errorf("%s[%d] %q: want a name or a path.Match glob", lim.key, i, p)
			}
		}
	}
	return nil
}

func matchAny(patterns []string, name string) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// admits reports whether a run of this workflow type and agent ("" when it cannot be
// known) is within the limits.
func (l Limits) admits(workflow, agent string) bool {
	if !matchAny(l.Workflows, workflow) {
		return false
	}
	if l.Agents == nil {
		return true
	}
	return agent != "" && matchAny(l.Agents, agent)
}

// runAgent is the agent of a run, or "" when it cannot be known: a session's from its id,
// an AgentRun's from its input. The id counts for sessions only: an AgentRun started with
// the id session:<a>:<i> runs the agent its input names, whatever its id says.
func runAgent(id, workflow string, payload json.RawMessage) string {
	switch workflow {
	case api.WorkflowSession:
		if agent, _, ok := api.ParseSessionID(id); ok {
			return agent
		}
	case api.WorkflowAgentRun:
		var in api.AgentRunInput
		if json.Unmarshal(payload, &in) == nil {
			return in.Agent
		}
	}
	return ""
}

func (l Limits) admitsRecord(rec api.Record) bool {
	return l.admits(rec.Workflow, runAgent(rec.ID, rec.Workflow, rec.Payload))
}

// runsFor is the Runs a request acts through: the gateway's own for an unlimited token
// (or an open gateway), else one that shows and drives only the runs the token's limits
// admit.
func (s *Server) runsFor(ctx context.Context) Runs {
	p := principalFrom(ctx)
	if p == nil || p.limits.Unlimited() {
		return s.runs
	}
	return &limitedRuns{inner: s.runs, lim: p.limits, token: p.name}
}

// limitedRuns is a Runs that admits only the runs of lim. A run outside them is answered
// with the very error an unknown id gets (runs.NotFoundError), so a limited token learns
// nothing of its existence; starting one is refused (403) naming the limits, which leaks
// nothing either: the answer depends on the request alone.
type limitedRuns struct {
	inner Runs
	lim   Limits
	token string
}

var _ Runs = (*limitedRuns)(nil)

// forbidden is the 403 of a start outside the limits.
func (l *limitedRuns) forbidden(workflow, agent string) error {
	what := "workflow " + workflow
	if agent != "" {
		what += " of agent " + agent
	} else if l.lim.Agents != nil {
		what += " (whose agent cannot be known)"
	}
	return &inputError{status: http.StatusForbidden,
		msg: fmt.Sprintf("token %s may not start a run of %s: it is limited to %s", l.token, what, l.lim)}
}

// admit answers whether the limits admit run id, judged by what it was started as (read
// without a worker): an unknown id and a run outside the limits are the same
// NotFoundError. A run whose input cannot be read has no agent that can be known.
func (l *limitedRuns) admit(ctx context.Context, id string) (runs.Origin, error) {
	o, err := l.inner.Origin(ctx, id)
	if err != nil {
		return runs.Origin{}, err
	}
	if !l.lim.admits(o.Workflow, runAgent(o.ID, o.Workflow, o.Input)) {
		return runs.Origin{}, &runs.NotFoundError{ID: id}
	}
	return o, nil
}

func (l *limitedRuns) Origin(ctx context.Context, id string) (runs.Origin, error) {
	return l.admit(ctx, id)
}

func (l *limitedRuns) Start(ctx context.Context, req runs.StartRequest) (string, error) {
	agent := runAgent(req.ID, req.Workflow, req.Payload)
	if !l.lim.admits(req.Workflow, agent) {
		return "", l.forbidden(req.Workflow, agent)
	}
	return l.inner.Start(ctx, req)
}

func (l *limitedRuns) Get(ctx context.Context, id string) (api.Record, error) {
	if _, err := l.admit(ctx, id); err != nil {
		return api.Record{}, err
	}
	rec, err := l.inner.Get(ctx, id)
	if err == nil && !l.lim.admitsRecord(rec) {
		// The id was reused by a run outside the limits since admit looked.
		return api.Record{}, &runs.NotFoundError{ID: id}
	}
	return rec, err
}

// listWorkers bounds the record reads List makes to learn the agents of AgentRun rows.
const listWorkers = 8

// List filters a page of runs. The agent of an AgentRun is in its input, which the
// visibility rows do not hold, so with Agents set each such row costs a read of its
// start; a page may then hold fewer rows than asked for (the page token still leads on).
func (l *limitedRuns) List(ctx context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error) {
	rows, next, err := l.inner.List(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	keep := make([]bool, len(rows))
	var wg sync.WaitGroup
	sem := make(chan struct{}, listWorkers)
	for i, row := range rows {
		switch {
		case !matchAny(l.lim.Workflows, row.Workflow):
		case l.lim.Agents == nil:
			keep[i] = true
		case row.Workflow == api.WorkflowAgentRun:
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				_, err := l.admit(ctx, row.ID)
				keep[i] = err == nil
			}()
		default:
			keep[i] = l.lim.admits(row.Workflow, runAgent(row.ID, row.Workflow, nil))
		}
	}
	wg.Wait()
	out := make([]runs.Summary, 0, len(rows))
	for i, row := range rows {
		if keep[i] {
			out = append(out, row)
		}
	}
	return out, next, nil
}

func (l *limitedRuns) Follow(ctx context.Context, id string, fn func(rec api.Record) bool) (api.Record, error) {
	if _, err := l.admit(ctx, id); err != nil {
		return api.Record{}, err
	}
	return l.inner.Follow(ctx, id, fn)
}

func (l *limitedRuns) Resume(ctx context.Context, id string, req runs.ResumeRequest) error {
	if _, err := l.admit(ctx, id); err != nil {
		return err
	}
	return l.inner.Resume(ctx, id, req)
}

func (l *limitedRuns) Decide(ctx context.Context, id string, d runs.Decision) (string, api.Record, error) {
	if _, err := l.admit(ctx, id); err != nil {
		return "", api.Record{}, err
	}
	return l.inner.Decide(ctx, id, d)
}

func (l *limitedRuns) DecideRecord(ctx context.Context, rec api.Record, d runs.Decision) (string, error) {
	if !l.lim.admitsRecord(rec) {
		return "", &runs.NotFoundError{ID: rec.ID}
	}
	return l.inner.DecideRecord(ctx, rec, d)
}

func (l *limitedRuns) Cancel(ctx context.Context, id string) (string, error) {
	if _, err := l.admit(ctx, id); err != nil {
		return "", err
	}
	return l.inner.Cancel(ctx, id)
}

// Rerun of a visible run: a new payload may name another agent, which is a start.
func (l *limitedRuns) Rerun(ctx context.Context, id string, payload json.RawMessage) (string, error) {
	o, err := l.admit(ctx, id)
	if err != nil {
		return "", err
	}
	if len(payload) > 0 {
		if agent := runAgent("", o.Workflow, payload); !l.lim.admits(o.Workflow, agent) {
			return "", l.forbidden(o.Workflow, agent)
		}
	}
	return l.inner.Rerun(ctx, id, payload)
}

// Fork starts an AgentRun of the source run's agent, which the limits admit once the
// source is visible.
func (l *limitedRuns) Fork(ctx context.Context, st runs.WorkspaceStore, req runs.ForkRequest) (string, error) {
	o, err := l.admit(ctx, req.Run)
	if err != nil {
		return "", err
	}
	if agent := runAgent(o.ID, o.Workflow, o.Input); !l.lim.admits(api.WorkflowAgentRun, agent) {
		return "", l.forbidden(api.WorkflowAgentRun, agent)
	}
	return l.inner.Fork(ctx, st, req)
}

func (l *limitedRuns) admitsSession(agent string) bool {
	return l.lim.admits(api.WorkflowSession, agent)
}

// Prompt may start the session: outside the limits it is a 403, whether or not the
// session exists.
func (l *limitedRuns) Prompt(ctx context.Context, agent, instance, text string, o runs.PromptOptions) (api.PromptReply, error) {
	if !l.admitsSession(agent) {
		return api.PromptReply{}, l.forbidden(api.WorkflowSession, agent)
	}
	return l.inner.Prompt(ctx, agent, instance, text, o)
}

func (l *limitedRuns) Session(ctx context.Context, agent, instance string) (api.SessionView, error) {
	if !l.admitsSession(agent) {
		return api.SessionView{}, &runs.NotFoundError{ID: api.SessionID(agent, instance)}
	}
	return l.inner.Session(ctx, agent, instance)
}

func (l *limitedRuns) ListSessions(ctx context.Context, limit int) ([]runs.SessionSummary, error) {
	rows, err := l.inner.ListSessions(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]runs.SessionSummary, 0, len(rows))
	for _, row := range rows {
		if l.admitsSession(row.Agent) {
			out = append(out, row)
		}
	}
	return out, nil
}

func (l *limitedRuns) CloseSession(ctx context.Context, agent, instance string) error {
	if !l.admitsSession(agent) {
		return &runs.NotFoundError{ID: api.SessionID(agent, instance)}
	}
	return l.inner.CloseSession(ctx, agent, instance)
}

func (l *limitedRuns) Interrupt(ctx context.Context, agent, instance string) (api.InterruptReply, error) {
	if !l.admitsSession(agent) {
		return api.InterruptReply{}, &runs.NotFoundError{ID: api.SessionID(agent, instance)}
	}
	return l.inner.Interrupt(ctx, agent, instance)
}

func (l *limitedRuns) Steer(ctx context.Context, agent, instance, text string) (api.SteerReply, error) {
	if !l.admitsSession(agent) {
		return api.SteerReply{}, &runs.NotFoundError{ID: api.SessionID(agent, instance)}
	}
	return l.inner.Steer(ctx, agent, instance, text)
}

func (l *limitedRuns) FollowSessionLive(ctx context.Context, agent, instance string, fn func(rec api.Record) bool, live func(api.LiveText)) error {
	if !l.admitsSession(agent) {
		return &runs.NotFoundError{ID: api.SessionID(agent, instance)}
	}
	return l.inner.FollowSessionLive(ctx, agent, instance, fn, live)
}

// Approvals keeps the calls of the runs the limits admit. A row's agent is the one whose
// call waits (NexoApprovalAgent): a session's or an AgentRun's is the run's own; in any
// other workflow the run's agent cannot be known, so the row is kept only without Agents.
func (l *limitedRuns) Approvals(ctx context.Context, req runs.ApprovalsRequest) ([]runs.Pending, error) {
	rows, err := l.inner.Approvals(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]runs.Pending, 0, len(rows))
	for _, p := range rows {
		agent := ""
		switch p.Workflow {
		case api.WorkflowSession:
			agent = runAgent(p.Run, p.Workflow, nil)
		case api.WorkflowAgentRun:
			agent = p.Agent
		}
		if l.lim.admits(p.Workflow, agent) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Notifications keeps, in each receiver's outbox, the notifications of the runs the
// limits admit (an item names its run's workflow and agent); the counts of the others are
// not shown either, so Delivered is left out.
func (l *limitedRuns) Notifications(ctx context.Context) ([]api.NotifierStatus, error) {
	outboxes, err := l.inner.Notifications(ctx)
	if err != nil {
		return nil, err
	}
	keep := func(items []api.NotifyItem) []api.NotifyItem {
		var out []api.NotifyItem
		for _, it := range items {
			if l.lim.admits(it.Workflow, it.Agent) {
				out = append(out, it)
			}
		}
		return out
	}
	var out []api.NotifierStatus
	for _, o := range outboxes {
		if o.Error != "" {
			continue
		}
		o.Pending, o.Failed, o.Delivered = keep(o.Pending), keep(o.Failed), 0
		if len(o.Pending)+len(o.Failed) > 0 {
			out = append(out, o)
		}
	}
	return out, nil
}
