package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

func inboxFake(got *runs.ApprovalsRequest) *fakeRuns {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	expires := at.Add(24 * time.Hour)
	return &fakeRuns{approvals: func(_ context.Context, req runs.ApprovalsRequest) ([]runs.Pending, error) {
		*got = req
		return []runs.Pending{
			{Agent: "scribe", Run: "r1", Workflow: "AgentRun", CallID: "1.1", Tool: "write_file", Capability: "write",
				Detail: "notes.md", Args: json.RawMessage(`{"path":"notes.md","content":"<script>alert(1)</script>"}`), Since: at,
				ExpiresAt: &expires, OnTimeout: "deny", ArgsSHA256: "ab12"},
			{Agent: "scribe", Run: "session:scribe:u1", Workflow: "Session", Instance: "u1", CallID: "1.1.1", Tool: "shell",
				Capability: "shell", Detail: "ls", Args: json.RawMessage(`{"command":"ls"}`), Since: at.Add(time.Minute)},
		}, nil
	}}
}

func TestListApprovalsEndpoint(t *testing.T) {
	t.Parallel()
	var got runs.ApprovalsRequest
	s := newServer(t, inboxFake(&got), Options{})
	resp := do(t, s, request{method: "GET", path: "/v1/approvals?agent=scribe"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d: %s", resp.StatusCode, readBody(t, resp))
	}
	var list ApprovalList
	if err := json.Unmarshal([]byte(readBody(t, resp)), &list); err != nil {
		t.Fatal(err)
	}
	if got.Agent != "scribe" || len(list.Approvals) != 2 || list.Approvals[1].Instance != "u1" || list.Approvals[0].CallID != "1.1" {
		t.Errorf("agent filter %q, list %+v", got.Agent, list)
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/approvals?agent=a%2Fb"}), http.StatusBadRequest, `agent "a/b"`)
}

func TestApprovalsPageListsCallsWithDecisionForms(t *testing.T) {
	t.Parallel()
	var got runs.ApprovalsRequest
	s := newServer(t, inboxFake(&got), Options{})
	resp := do(t, s, request{method: "GET", path: "/approvals"})
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`href="/approvals">Approvals</a>`,
		`action="/v1/runs/r1/approvals/1.1"`,
		`action="/v1/runs/session:scribe:u1/approvals/1.1.1"`,
		`href="/sessions/scribe/u1"`,
		`&#34;path&#34;:&#34;notes.md&#34;`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`, // a model's markup, as text
		`expires 2026-12-02 09:00:00 UTC (then deny)`,
		`data-args-sha256="ab12"`, // the decision is checked against the arguments shown
		`value="edit"`, `value="answer"`, `name="args"`, `name="result"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("the page carries a call's markup unescaped")
	}
}

// A token without scope approve sees the inbox but no decision buttons.
func TestApprovalsPageForAReader(t *testing.T) {
	t.Parallel()
	var got runs.ApprovalsRequest
	s := newServer(t, inboxFake(&got), Options{Tokens: testTokens})
	c := login(t, s, readerSecret)
	page := readBody(t, do(t, s, request{method: "GET", path: "/approvals?agent=scribe", header: map[string]string{"Cookie": c.Name + "=" + c.Value}}))
	if got.Agent != "scribe" || !strings.Contains(page, "notes.md") || strings.Contains(page, `class="decide"`) || !strings.Contains(page, "needs scope approve") {
		t.Errorf("a reader's Approvals view (agent %q):\n%s", got.Agent, page)
	}
}

// budgetRows are two budget pauses: a run's token bound and a session turn's cost bound.
func budgetRows() []runs.Pending {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	return []runs.Pending{
		{Agent: "counter", Run: "r-budget", Workflow: "AgentRun", CallID: "budget-2", Tool: api.CapabilityBudget, Capability: api.CapabilityBudget,
			Args:       mustJSON(api.BudgetPause{Agent: "counter", Scope: api.BudgetScopeRun, UsedTokens: 1250, MaxTokens: 1000, UsedCost: 0.0042, Tokens: true}),
			ArgsSHA256: "sha-budget-2", Since: at},
		{Agent: "scribe", Run: "session:scribe:u1", Workflow: "Session", Instance: "u1", CallID: "budget-1.3", Tool: api.CapabilityBudget,
			Capability: api.CapabilityBudget, Args: mustJSON(api.BudgetPause{Agent: "scribe", Scope: api.BudgetScopeTurn, UsedTokens: 300, UsedCost: 0.015, MaxCost: 0.01, Cost: true}),
			ArgsSHA256: "sha-budget-1.3", Since: at},
	}
}

// rowOf cuts the table row of key ("<run> <call>") out of a page.
func rowOf(t *testing.T, page, key string) string {
	t.Helper()
	_, after, ok := strings.Cut(page, `data-key="`+key+`"`)
	if !ok {
		t.Fatalf("the page has no row %s:\n%s", key, page)
	}
	row, _, _ := strings.Cut(after, "</tr>\n    <tr")
	return row
}

// TestApprovalsPageRaisesABudget: a budget pause's row shows what was spent of which bound
// and a raise form for that bound (no edit or answer); the body app.js posts from it, on a
// logged-in page with the session's CSRF token, reaches the run as the CLI's approve
// --budget does (a raise of the bound, by the token's name), a deny as a plain denial, and
// without the CSRF token nothing is decided.
func TestApprovalsPageRaisesABudget(t *testing.T) {
	t.Parallel()
	var decided []runs.Decision
	var decidedRun []string
	f := &fakeRuns{
		approvals: func(context.Context, runs.ApprovalsRequest) ([]runs.Pending, error) { return budgetRows(), nil },
		decide: func(_ context.Context, id string, d runs.Decision) (string, api.Record, error) {
			decided, decidedRun = append(decided, d), append(decidedRun, id)
			return "raised the budget of run " + id, api.Record{ID: id}, nil
		},
	}
	s := newServer(t, f, Options{Tokens: testTokens})
	c := login(t, s, allSecret)
	cookie := c.Name + "=" + c.Value
	resp := do(t, s, request{method: "GET", path: "/approvals", header: map[string]string{"Cookie": cookie}})
	page := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d: %s", resp.StatusCode, page)
	}

	tokens := rowOf(t, page, "r-budget budget-2")
	for _, want := range []string{
		`agent <strong>counter</strong> used 1250 of 1000 tokens in this run`,
		`<tr class="tokens reached"><th>tokens</th><td>1250</td><td>1000</td></tr>`,
		`<form class="decide budget" method="post" action="/v1/runs/r-budget/approvals/budget-2" data-args-sha256="sha-budget-2" novalidate>`,
		`name="raise_tokens"`, `value="raise"`, `value="deny"`, `name="reason"`,
	} {
		if !strings.Contains(tokens, want) {
			t.Errorf("the token pause's row lacks %s:\n%s", want, tokens)
		}
	}
	for _, not := range []string{`name="raise_cost"`, `value="edit"`, `value="answer"`, `value="approve"`, `<tr class="cost`} {
		if strings.Contains(tokens, not) {
			t.Errorf("the token pause's row has %s:\n%s", not, tokens)
		}
	}
	cost := rowOf(t, page, "session:scribe:u1 budget-1.3")
	for _, want := range []string{
		`agent <strong>scribe</strong> spent $0.0150 of $0.0100 in this turn`,
		`<tr class="cost reached"><th>cost</th><td>$0.0150</td><td>$0.0100</td></tr>`,
		`action="/v1/runs/session:scribe:u1/approvals/budget-1.3"`, `name="raise_cost"`,
	} {
		if !strings.Contains(cost, want) {
			t.Errorf("the cost pause's row lacks %s:\n%s", want, cost)
		}
	}
	if strings.Contains(cost, `name="raise_tokens"`) {
		t.Errorf("the cost pause's row asks for tokens:\n%s", cost)
	}

	sess, _ := s.sessions.get(c.Value)
	post := func(path, body string, csrf bool) *http.Response {
		h := map[string]string{"Cookie": cookie}
		if csrf {
			h[csrfHeader] = sess.csrf
		}
		return do(t, s, request{method: "POST", path: path, body: body, header: h})
	}
	// What app.js sends for "Raise and go on" with 50000 in the tokens field.
	raise := `{"reason":"","args_sha256":"sha-budget-2","action":"approve","budget":{"tokens":50000}}`
	wantProblem(t, post("/v1/runs/r-budget/approvals/budget-2", raise, false), http.StatusForbidden, "CSRF")
	if len(decided) != 0 {
		t.Fatalf("decided without the CSRF token: %+v", decided)
	}
	if resp := post("/v1/runs/r-budget/approvals/budget-2", raise, true); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("raise: status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	// ... and for the cost pause's $2.50, then a deny with its reason.
	if resp := post("/v1/runs/session:scribe:u1/approvals/budget-1.3", `{"reason":"","args_sha256":"sha-budget-1.3","action":"approve","budget":{"cost":2.5}}`, true); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cost raise: status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	if resp := post("/v1/runs/r-budget/approvals/budget-2", `{"reason":"enough for today","args_sha256":"sha-budget-2","action":"deny"}`, true); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("deny: status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	want := []runs.Decision{
		{Approved: true, CallID: "budget-2", Action: "approve", ArgsSHA256: "sha-budget-2", By: "ci", Budget: &api.BudgetRaise{Tokens: 50000}},
		{Approved: true, CallID: "budget-1.3", Action: "approve", ArgsSHA256: "sha-budget-1.3", By: "ci", Budget: &api.BudgetRaise{Cost: 2.5}},
		{Approved: false, CallID: "budget-2", Action: "deny", ArgsSHA256: "sha-budget-2", By: "ci", Reason: "enough for today"},
	}
	if len(decided) != len(want) {
		t.Fatalf("decided %+v, want %+v", decided, want)
	}
	for i := range want {
		if !reflect.DeepEqual(decided[i], want[i]) {
			t.Errorf("decision %d on %s = %+v (budget %+v), want %+v (budget %+v)", i, decidedRun[i], decided[i], decided[i].Budget, want[i], want[i].Budget)
		}
	}
	if decidedRun[1] != "session:scribe:u1" {
		t.Errorf("the cost raise went to %s", decidedRun[1])
	}
}

// A budget pause seen with a token lacking scope approve shows its figures and no form.
func TestApprovalsPageBudgetForAReader(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{approvals: func(context.Context, runs.ApprovalsRequest) ([]runs.Pending, error) { return budgetRows(), nil }},
		Options{Tokens: testTokens})
	c := login(t, s, readerSecret)
	row := rowOf(t, readBody(t, do(t, s, request{method: "GET", path: "/approvals", header: map[string]string{"Cookie": c.Name + "=" + c.Value}})), "r-budget budget-2")
	if !strings.Contains(row, "used 1250 of 1000 tokens in this run") || strings.Contains(row, "<form") || !strings.Contains(row, "needs scope approve") {
		t.Errorf("a reader's budget row:\n%s", row)
	}
}

// TestApprovalsPageShowsUndeliveredNotifications: the inbox lists, under its calls, the
// notifications the receivers' outboxes have not delivered or gave up, with their receiver,
// attempts and last error; a token limited to some agents sees only their runs' (and no
// count of the others').
func TestApprovalsPageShowsUndeliveredNotifications(t *testing.T) {
	t.Parallel()
	next := t0.Add(time.Minute)
	f := newLimitsFake()
	f.fakeRuns.notifications = func(context.Context) ([]api.NotifierStatus, error) {
		return []api.NotifierStatus{{ID: "nexo-notify:nexo:0123", Receiver: "http://10.0.0.7:8080/nexo", Delivered: 9,
			Pending: []api.NotifyItem{{RunID: "run-agent", Workflow: api.WorkflowAgentRun, Agent: "scribe", Event: api.EventApprovalRequested,
				Seq: 5, CallID: "1.1", At: t0, Status: api.NotifyPending, Attempts: 4, NextAttempt: &next,
				LastError: "the receiver answered 503 Service Unavailable"}},
			Failed: []api.NotifyItem{{RunID: "run-bill", Workflow: api.WorkflowAgentRun, Agent: "billing", Event: api.EventApprovalDecided,
				Seq: 8, At: t0, Status: api.NotifyFailed, Attempts: 1, LastError: "the receiver answered 410 Gone"}},
		}}, nil
	}
	s := newServer(t, f.fakeRuns, Options{Tokens: limitTokens})
	page := func(secret string) string {
		resp := do(t, s, request{method: "GET", path: "/approvals", header: bearer(secret)})
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d: %s", resp.StatusCode, body)
		}
		return body
	}
	admin := page(adminSecret)
	for _, want := range []string{"Notifications not delivered", "http://10.0.0.7:8080/nexo", `href="/runs/run-agent"`,
		"503 Service Unavailable", "410 Gone", `href="/runs/run-bill"`, "next 2026-"} {
		if !strings.Contains(admin, want) {
			t.Errorf("admin's inbox lacks %q", want)
		}
	}
	team := page(teamSecret)
	if !strings.Contains(team, "503 Service Unavailable") {
		t.Error("team's inbox lacks its own run's undelivered notification")
	}
	if strings.Contains(team, "run-bill") || strings.Contains(team, "410 Gone") {
		t.Error("team's inbox shows another team's notification")
	}
}
