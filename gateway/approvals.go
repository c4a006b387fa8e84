package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// ApprovalList is the answer of GET /v1/approvals: every tool call waiting for a decision,
// in every open run and session, oldest first.
type ApprovalList struct {
	Approvals []runs.Pending `json:"approvals"`
}

// approvalsRequest reads the ?agent= filter of the endpoint and the page.
func approvalsRequest(q url.Values) (runs.ApprovalsRequest, error) {
	var req runs.ApprovalsRequest
	if q.Has("agent") {
		if err := checkAgentName(q.Get("agent")); err != nil {
			return req, err
		}
		req.Agent = q.Get("agent")
	}
	return req, nil
}

// listApprovals answers GET /v1/approvals[?agent=A].
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	req, err := approvalsRequest(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := s.runsFor(r.Context()).Approvals(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rows == nil {
		rows = []runs.Pending{}
	}
	s.writeJSON(w, r, http.StatusOK, ApprovalList{Approvals: rows})
}

// approvalRow is one row of the Approvals view.
type approvalRow struct {
	runs.Pending
	// Page is the run's (or the session's) page; Decide the endpoint the row's form posts to.
	Page   string
	Decide string
	// Budget is set when the call is a budget pause: the row shows what was spent and a
	// raise form instead of the tool call's.
	Budget *budgetView
}

// budgetView is a budget pause as the pages show it: what its scope spent of its bounds,
// and which bound (tokens, cost or both) a raise must add to, as the run checks it.
type budgetView struct {
	api.BudgetPause
	// Spent reads like the run's reason: "used 1250 of 1000 tokens in this run".
	Spent string
	// Decide is the endpoint the raise form posts to (the decision endpoint the CLI's
	// approve --budget uses); ArgsSHA256 the pause's, which the decision carries.
	Decide, ArgsSHA256 string
}

// budgetOf reads the budget pause of a pending decision, or nil for a tool call (or a
// pause whose args are not a budget pause's: the row then shows them as they are).
func budgetOf(capability string, args json.RawMessage, decide, argsSHA256 string) *budgetView {
	if capability != api.CapabilityBudget {
		return nil
	}
	var p api.BudgetPause
	if err := json.Unmarshal(args, &p); err != nil || (!p.Tokens && !p.Cost) {
		return nil
	}
	return &budgetView{BudgetPause: p, Spent: p.Spent(), Decide: decide, ArgsSHA256: argsSHA256}
}

type approvalsView struct {
	Agent string
	Rows  []approvalRow
	Error string
	// Notifications are the approval notifications not delivered yet or given up, by
	// receiver; NotificationsError why they could not be read.
	Notifications      []notificationRow
	NotificationsError string
	CanApprove         bool
}

// approvalsPage is the Approvals view: the inbox of every pending call with approve / deny
// per call (the run page's decision endpoint), and a raise / deny for a budget pause;
// app.js keeps it current.
func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	v := approvalsView{CanApprove: principalFrom(r.Context()).has(api.ScopeApprove)}
	status := http.StatusOK
	req, err := approvalsRequest(r.URL.Query())
	v.Agent = req.Agent
	var rows []runs.Pending
	if err == nil {
		rows, err = s.runsFor(r.Context()).Approvals(r.Context(), req)
	}
	if err != nil {
		v.Error, status = err.Error(), statusOf(err)
	}
	for _, p := range rows {
		page := "/runs/" + url.PathEscape(p.Run)
		if agent, inst, ok := api.ParseSessionID(p.Run); ok {
			page = sessionPagePath(agent, inst)
		}
		decide := "/v1/runs/" + url.PathEscape(p.Run) + "/approvals/" + url.PathEscape(p.CallID)
		v.Rows = append(v.Rows, approvalRow{Pending: p, Page: page, Decide: decide,
			Budget: budgetOf(p.Capability, p.Args, decide, p.ArgsSHA256)})
	}
	if outboxes, err := s.runsFor(r.Context()).Notifications(r.Context()); err != nil {
		v.NotificationsError = err.Error()
	} else {
		for _, o := range outboxes {
			for _, it := range append(append([]api.NotifyItem(nil), o.Pending...), o.Failed...) {
				page := "/runs/" + url.PathEscape(it.RunID)
				if agent, inst, ok := api.ParseSessionID(it.RunID); ok {
					page = sessionPagePath(agent, inst)
				}
				v.Notifications = append(v.Notifications, notificationRow{NotifyItem: it, Receiver: o.Receiver, Page: page})
			}
		}
	}
	s.render(w, r, status, "approvals", "Approvals", v)
}

// notificationRow is one notification of the Approvals page's outbox table.
type notificationRow struct {
	api.NotifyItem
	Receiver, Page string
}

// Next is when a pending notification's next attempt is due, or nothing.
func (n notificationRow) Next() time.Time {
	if n.NextAttempt == nil {
		return time.Time{}
	}
	return *n.NextAttempt
}
