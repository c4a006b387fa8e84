package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

const (
	teamSecret  = "team-secret-0123456789"
	adminSecret = "admin-secret-0123456789"
)

// limitTokens: "team" sees the runs and sessions of scribe and the support-* agents;
// "admin" sees everything. Both hold every scope, so only the limits tell them apart.
var limitTokens = []Token{
	{Name: "team", Secret: teamSecret, Scopes: api.Scopes, Agents: []string{"scribe", "support-*"}},
	{Name: "admin", Secret: adminSecret, Scopes: api.Scopes},
}

// billingPending is another team's agent run, waiting for approval like agentPending.
func billingPending() api.Record {
	rec := agentPending()
	rec.ID = "run-bill"
	rec.Payload = json.RawMessage(`{"agent":"billing","prompt":"Refund order 7."}`)
	return rec
}

func teamSession(agent, instance string) api.Record {
	return api.Record{ID: api.SessionID(agent, instance), Workflow: api.WorkflowSession, Status: api.StatusRunning,
		Payload: mustJSON(map[string]string{"agent": agent}), CreatedAt: t0, UpdatedAt: t0}
}

// limitsFake holds three runs (scribe's, billing's, and a DocumentApproval whose agent
// cannot be known) and two sessions (support-bot's and billing's). Every method answers an
// unknown id as package runs does, NotFoundError, and records what it was asked to do.
type limitsFake struct {
	*fakeRuns
	started  []runs.StartRequest
	decided  []runs.Decision
	canceled []string
	closed   []string
}

func newLimitsFake() *limitsFake {
	recs := []api.Record{agentPending(), billingPending(), docSuspended(),
		teamSession("support-bot", "u1"), teamSession("billing", "u2")}
	get := getRecords(recs...)
	f := &limitsFake{}
	known := func(id string) error { _, err := get(context.Background(), id); return err }
	session := func(agent, instance string) (api.Record, error) {
		return get(context.Background(), api.SessionID(agent, instance))
	}
	f.fakeRuns = &fakeRuns{
		start: func(_ context.Context, req runs.StartRequest) (string, error) {
			f.started = append(f.started, req)
			return "run-new", nil
		},
		get: get,
		list: func(context.Context, runs.ListRequest) ([]runs.Summary, []byte, error) {
			var out []runs.Summary
			for _, r := range recs {
				out = append(out, runs.Summary{ID: r.ID, Workflow: r.Workflow, Status: r.Status, CreatedAt: r.CreatedAt})
			}
			return out, []byte("next"), nil
		},
		follow: func(ctx context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
			rec, err := get(ctx, id)
			if err != nil {
				return api.Record{}, err
			}
			fn(rec)
			return rec, nil
		},
		resume: func(_ context.Context, id string, _ runs.ResumeRequest) error { return known(id) },
		decide: func(ctx context.Context, id string, d runs.Decision) (string, api.Record, error) {
			rec, err := get(ctx, id)
			if err != nil {
				return "", api.Record{}, err
			}
			f.decided = append(f.decided, d)
			return "approved call " + d.CallID, rec, nil
		},
		cancel: func(_ context.Context, id string) (string, error) {
			if err := known(id); err != nil {
				return "", err
			}
			f.canceled = append(f.canceled, id)
			return "cancel requested for run " + id, nil
		},
		rerun: func(_ context.Context, id string, _ json.RawMessage) (string, error) {
			if err := known(id); err != nil {
				return "", err
			}
			return "run-rerun", nil
		},
		prompt: func(context.Context, string, string, string, runs.PromptOptions) (api.PromptReply, error) {
			return api.PromptReply{Turn: 1, Reply: "hello"}, nil
		},
		session: func(_ context.Context, agent, instance string) (api.SessionView, error) {
			rec, err := session(agent, instance)
			if err != nil {
				return api.SessionView{}, err
			}
			return api.SessionView{ID: rec.ID, Agent: agent, Instance: instance, Status: rec.Status}, nil
		},
		listSessions: func(context.Context, int) ([]runs.SessionSummary, error) {
			return []runs.SessionSummary{
				{ID: api.SessionID("support-bot", "u1"), Agent: "support-bot", Instance: "u1", Status: api.StatusRunning},
				{ID: api.SessionID("billing", "u2"), Agent: "billing", Instance: "u2", Status: api.StatusRunning},
			}, nil
		},
		closeSession: func(_ context.Context, agent, instance string) error {
			if _, err := session(agent, instance); err != nil {
				return err
			}
			f.closed = append(f.closed, api.SessionID(agent, instance))
			return nil
		},
		followSession: func(_ context.Context, agent, instance string, fn func(api.Record) bool) error {
			rec, err := session(agent, instance)
			if err != nil {
				return err
			}
			rec.Status = api.StatusDone
			fn(rec)
			return nil
		},
		approvals: func(context.Context, runs.ApprovalsRequest) ([]runs.Pending, error) {
			return []runs.Pending{
				{Agent: "scribe", Run: "run-agent", Workflow: api.WorkflowAgentRun, CallID: "2.1", Tool: "write_file", Capability: "write", Args: json.RawMessage(`{"path":"notes.md"}`)},
				{Agent: "billing", Run: "run-bill", Workflow: api.WorkflowAgentRun, CallID: "2.1", Tool: "write_file", Capability: "write", Args: json.RawMessage(`{"path":"refund-secret.md"}`)},
				// A user's workflow that runs scribe: the run's agent cannot be known.
				{Agent: "scribe", Run: "run-doc", Workflow: "DocumentApproval", CallID: "1.1", Tool: "shell", Capability: "shell", Args: json.RawMessage(`{"cmd":"doc-secret"}`)},
				{Agent: "billing", Run: api.SessionID("billing", "u2"), Workflow: api.WorkflowSession, Instance: "u2", CallID: "3.1", Tool: "shell", Capability: "shell", Args: json.RawMessage(`{"cmd":"session-secret"}`)},
			}, nil
		},
	}
	return f
}

func bearer(secret string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + secret}
}

// answer is what a client sees of a response: status, content type and body.
type answer struct {
	status      int
	contentType string
	body        string
}

func answerOf(t *testing.T, resp *http.Response) answer {
	t.Helper()
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp)}
}

// TestLimitedTokenHidesOtherRuns: on every surface that names a run or a session, one
// outside the token's limits is answered exactly as an unknown id is (status, content
// type and body, with the id in its place), for a limited token and an unlimited one
// alike; the same request on a run within the limits goes through.
func TestLimitedTokenHidesOtherRuns(t *testing.T) {
	f := newLimitsFake()
	s := newServer(t, f.fakeRuns, Options{Tokens: limitTokens})
	teamCookie, adminCookie := login(t, s, teamSecret), login(t, s, adminSecret)
	csrf := func(cookieValue string) string {
		sess, _ := s.sessions.get(cookieValue)
		return sess.csrf
	}
	cookieHeader := func(c *http.Cookie, unsafe bool) map[string]string {
		h := map[string]string{"Cookie": c.Name + "=" + c.Value}
		if unsafe {
			h[csrfHeader] = csrf(c.Value)
		}
		return h
	}
	sse := func(h map[string]string) map[string]string {
		out := map[string]string{"Accept": "text/event-stream"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	// Each surface: a request for the id X (a run id, or a session's instance when the
	// path names agent X's session), and the status a visible run gets.
	tests := []struct {
		name, method, path, body string
		sessionPath              bool
		page                     bool
		sse                      bool
		ok                       int
		// unknown is the status of an unknown id when it is not 404.
		unknown int
	}{
		{name: "get", method: "GET", path: "/v1/runs/X", ok: 200},
		{name: "events", method: "GET", path: "/v1/runs/X/events", ok: 200},
		{name: "events stream", method: "GET", path: "/v1/runs/X/events", sse: true, ok: 200},
		{name: "artifacts", method: "GET", path: "/v1/runs/X/artifacts", ok: 200},
		{name: "decide", method: "POST", path: "/v1/runs/X/approvals/2.1", body: `{"approved":true}`, ok: 202},
		{name: "resume", method: "POST", path: "/v1/runs/X/resume", body: `{}`, ok: 202},
		{name: "cancel", method: "POST", path: "/v1/runs/X/cancel", body: `{}`, ok: 202},
		{name: "rerun", method: "POST", path: "/v1/runs/X/rerun", body: `{}`, ok: 201},
		{name: "run page", method: "GET", path: "/runs/X", page: true, ok: 200},
		{name: "session", method: "GET", path: "/v1/sessions/A/X", sessionPath: true, ok: 200},
		{name: "session stream", method: "GET", path: "/v1/sessions/A/X/stream", sessionPath: true, sse: true, ok: 200},
		{name: "session close", method: "POST", path: "/v1/sessions/A/X/close", body: `{}`, sessionPath: true, ok: 200},
		// The page of a session nobody prompted yet is there to prompt it.
		{name: "session page", method: "GET", path: "/sessions/A/X", sessionPath: true, page: true, ok: 200, unknown: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// ask sends the request for id (or the session agent/instance) as a client.
			ask := func(who string, agent, id string) answer {
				p := strings.Replace(tt.path, "X", id, 1)
				if tt.sessionPath {
					p = strings.Replace(p, "A", agent, 1)
				}
				var h map[string]string
				switch {
				case tt.page && who == "team":
					h = cookieHeader(teamCookie, false)
				case tt.page:
					h = cookieHeader(adminCookie, false)
				case who == "team":
					h = bearer(teamSecret)
				default:
					h = bearer(adminSecret)
				}
				if tt.sse {
					h = sse(h)
				}
				return answerOf(t, do(t, s, request{method: tt.method, path: p, body: tt.body, header: h}))
			}
			hiddenAgent, hidden, visibleAgent, visible := "", "run-bill", "", "run-agent"
			if tt.sessionPath {
				hiddenAgent, hidden, visibleAgent, visible = "billing", "u2", "support-bot", "u1"
			}
			const unknown = "nope"
			wantFor := func(who string) answer {
				a := ask(who, hiddenAgent, unknown)
				a.body = strings.ReplaceAll(a.body, unknown, hidden)
				return a
			}
			unknownAdmin, unknownTeam := wantFor("admin"), wantFor("team")
			wantUnknown := http.StatusNotFound
			if tt.unknown != 0 {
				wantUnknown = tt.unknown
			}
			if unknownAdmin.status != wantUnknown {
				t.Fatalf("unknown id for admin: status %d, want %d: %s", unknownAdmin.status, wantUnknown, unknownAdmin.body)
			}
			// Pages name who is logged in, so only the API answers are the same bytes
			// for both tokens.
			if !tt.page && unknownTeam != unknownAdmin {
				t.Errorf("unknown id: team sees %+v, admin %+v; want the same", unknownTeam, unknownAdmin)
			}
			if got := ask("team", hiddenAgent, hidden); got != unknownTeam {
				t.Errorf("team on another team's run:\n got %+v\nwant %+v (an unknown id's answer)", got, unknownTeam)
			}
			if got := ask("admin", hiddenAgent, hidden); got.status != tt.ok {
				t.Errorf("admin on billing's run: status %d, want %d: %s", got.status, tt.ok, got.body)
			}
			if got := ask("team", visibleAgent, visible); got.status != tt.ok {
				t.Errorf("team on its own run: status %d, want %d: %s", got.status, tt.ok, got.body)
			}
		})
	}
	// A run whose agent cannot be known is the unlimited tokens'.
	if got := answerOf(t, do(t, s, request{method: "GET", path: "/v1/runs/run-doc", header: bearer(teamSecret)})); got.status != 404 {
		t.Errorf("team on a DocumentApproval run: status %d, want 404", got.status)
	}
	if got := answerOf(t, do(t, s, request{method: "GET", path: "/v1/runs/run-doc", header: bearer(adminSecret)})); got.status != 200 {
		t.Errorf("admin on a DocumentApproval run: status %d, want 200", got.status)
	}
	// Only the team's own run was decided, canceled, closed, and by the token's name.
	if len(f.decided) != 2 || f.decided[0].By != "admin" || f.decided[1].By != "team" {
		t.Errorf("decisions = %+v, want admin's on billing's run then team's on its own, each by the token's name", f.decided)
	}
	if !slices.Equal(f.canceled, []string{"run-bill", "run-agent"}) {
		t.Errorf("canceled %q, want admin's run-bill then team's run-agent", f.canceled)
	}
	if !slices.Equal(f.closed, []string{api.SessionID("billing", "u2"), api.SessionID("support-bot", "u1")}) {
		t.Errorf("closed %q, want admin's billing session then team's support-bot session", f.closed)
	}
}

// TestLimitedTokenLists: the runs list, the sessions list and the approvals inbox, as JSON
// and as pages, hold only what the token's limits admit; an unlimited token sees all.
func TestLimitedTokenLists(t *testing.T) {
	f := newLimitsFake()
	s := newServer(t, f.fakeRuns, Options{Tokens: limitTokens})
	teamCookie := login(t, s, teamSecret)
	get := func(path string, h map[string]string) string {
		resp := do(t, s, request{method: "GET", path: path, header: h})
		body := readBody(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, body)
		}
		return body
	}
	ids := func(path, field string, h map[string]string) []string {
		var out map[string]json.RawMessage
		if err := json.Unmarshal([]byte(get(path, h)), &out); err != nil {
			t.Fatal(err)
		}
		var got []string
		var rows []map[string]any
		if err := json.Unmarshal(out[strings.TrimPrefix(path, "/v1/")], &rows); err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			got = append(got, row[field].(string))
		}
		return got
	}
	for _, tt := range []struct {
		path, field string
		team, admin []string
	}{
		{"/v1/runs", "id", []string{"run-agent", "session:support-bot:u1"},
			[]string{"run-agent", "run-bill", "run-doc", "session:support-bot:u1", "session:billing:u2"}},
		{"/v1/sessions", "id", []string{"session:support-bot:u1"}, []string{"session:support-bot:u1", "session:billing:u2"}},
		{"/v1/approvals", "run", []string{"run-agent"}, []string{"run-agent", "run-bill", "run-doc", "session:billing:u2"}},
	} {
		if got := ids(tt.path, tt.field, bearer(teamSecret)); !slices.Equal(got, tt.team) {
			t.Errorf("team GET %s = %q, want %q", tt.path, got, tt.team)
		}
		if got := ids(tt.path, tt.field, bearer(adminSecret)); !slices.Equal(got, tt.admin) {
			t.Errorf("admin GET %s = %q, want %q", tt.path, got, tt.admin)
		}
	}
	// The pages a limited login sees.
	cookie := map[string]string{"Cookie": teamCookie.Name + "=" + teamCookie.Value}
	for _, page := range []string{"/", "/sessions", "/approvals"} {
		body := get(page, cookie)
		for _, leak := range []string{"run-bill", "billing", "run-doc", "refund-secret", "doc-secret", "session-secret"} {
			if strings.Contains(body, leak) {
				t.Errorf("page %s for team shows %q", page, leak)
			}
		}
	}
	if body := get("/approvals", cookie); !strings.Contains(body, "notes.md") {
		t.Errorf("team's inbox page lacks its own pending call (notes.md)")
	}
	if body := get("/", cookie); !strings.Contains(body, "run-agent") {
		t.Errorf("team's runs page lacks its own run")
	}
}

// TestLimitedTokenStarts: a start of another agent or workflow is a 403 naming the
// token's limits and starts nothing; within them the run starts.
func TestLimitedTokenStarts(t *testing.T) {
	f := newLimitsFake()
	s := newServer(t, f.fakeRuns, Options{Tokens: limitTokens})
	start := func(secret, body string) *http.Response {
		return do(t, s, request{method: "POST", path: "/v1/runs", body: body, header: bearer(secret)})
	}
	limits := "token team may not start a run of workflow AgentRun of agent billing: it is limited to agents scribe, support-*; workflows all"
	wantProblem(t, start(teamSecret, `{"workflow":"AgentRun","input":{"agent":"billing","prompt":"hi"}}`), 403, limits)
	wantProblem(t, start(teamSecret, `{"workflow":"DocumentApproval","input":{"doc_id":"1"}}`), 403,
		"token team may not start a run of workflow DocumentApproval (whose agent cannot be known): it is limited to agents scribe, support-*; workflows all")
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/billing/u9/prompt", body: `{"text":"hi"}`, header: bearer(teamSecret)}), 403,
		"token team may not start a run of workflow Session of agent billing")
	// An id that looks like a session of an admitted agent does not make another agent's
	// run the token's (the API refuses such an id anyway; the limits do not rely on it).
	team := limitTokens[0].limits()
	if team.admitsRecord(api.Record{ID: "session:scribe:x", Workflow: api.WorkflowAgentRun, Payload: json.RawMessage(`{"agent":"billing"}`)}) {
		t.Error("an AgentRun of billing with a session-like id of scribe is admitted for team")
	}
	if len(f.started) != 0 {
		t.Fatalf("refused starts reached Temporal: %+v", f.started)
	}
	for _, tc := range []struct{ secret, body string }{
		{teamSecret, `{"workflow":"AgentRun","input":{"agent":"support-mail","prompt":"hi"}}`},
		{adminSecret, `{"workflow":"AgentRun","input":{"agent":"billing","prompt":"hi"}}`},
		{adminSecret, `{"workflow":"DocumentApproval","input":{"doc_id":"1"}}`},
	} {
		if resp := start(tc.secret, tc.body); resp.StatusCode != 201 {
			t.Errorf("start %s: status %d, want 201: %s", tc.body, resp.StatusCode, readBody(t, resp))
		}
	}
	if resp := do(t, s, request{method: "POST", path: "/v1/sessions/support-bot/u1/prompt", body: `{"text":"hi"}`, header: bearer(teamSecret)}); resp.StatusCode != 200 {
		t.Errorf("team prompts its own session: status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	// A rerun that swaps the agent is a start of that agent.
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/runs/run-agent/rerun", body: `{"input":{"agent":"billing","prompt":"x"}}`, header: bearer(teamSecret)}), 403,
		"of agent billing: it is limited to")
}

// TestLimitedTokenWorkflows: a token limited by workflow type sees runs of those types
// only, whatever their agent, and sessions only when it admits the Session workflow.
func TestLimitedTokenWorkflows(t *testing.T) {
	f := newLimitsFake()
	s := newServer(t, f.fakeRuns, Options{Tokens: []Token{{Name: "docs", Secret: teamSecret, Scopes: api.Scopes, Workflows: []string{"Document*"}}}})
	for id, want := range map[string]int{"run-doc": 200, "run-agent": 404, "session:support-bot:u1": 404} {
		if resp := do(t, s, request{method: "GET", path: "/v1/runs/" + id, header: bearer(teamSecret)}); resp.StatusCode != want {
			t.Errorf("GET %s: status %d, want %d", id, resp.StatusCode, want)
		}
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/sessions/support-bot/u1", header: bearer(teamSecret)}), 404, `no session of agent "support-bot" with instance "u1"`)
}

// TestLimitedTokenCodec: /codec serves unlimited tokens only, since a stored payload names
// no run whose agent could be checked.
func TestLimitedTokenCodec(t *testing.T) {
	s := codecServer(t, limitTokens)
	body := payloadsJSON(t)
	for _, op := range []string{"decode", "download", "encode"} {
		wantProblem(t, do(t, s, request{method: "POST", path: "/codec/" + op, body: body, header: fromUI(bearer(teamSecret))}), 403,
			"token team is limited to agents scribe, support-*; workflows all; the codec endpoint serves unlimited tokens only")
		if resp := do(t, s, request{method: "POST", path: "/codec/" + op, body: body, header: fromUI(bearer(adminSecret))}); resp.StatusCode != 200 {
			t.Errorf("admin /codec/%s: status %d: %s", op, resp.StatusCode, readBody(t, resp))
		}
	}
	cookie := login(t, s, teamSecret)
	if resp := do(t, s, request{method: "POST", path: "/codec/decode", body: body, header: fromUI(map[string]string{"Cookie": cookie.Name + "=" + cookie.Value})}); resp.StatusCode != 403 {
		t.Errorf("limited login on /codec/decode: status %d, want 403", resp.StatusCode)
	}
}

// TestTokenLimitsAreChecked: New refuses a limit that would match nothing or is no glob.
func TestTokenLimitsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		tok  Token
		want string
	}{
		{Token{Name: "t", Secret: teamSecret, Scopes: api.Scopes, Agents: []string{}}, "new gateway: token t: agents: an empty list matches nothing"},
		{Token{Name: "t", Secret: teamSecret, Scopes: api.Scopes, Workflows: []string{"Doc["}}, `new gateway: token t: workflows[0] "Doc[": want a name or a path.Match glob`},
	} {
		if _, err := New(Options{Runs: &fakeRuns{}, Tokens: []Token{tc.tok}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.tok, err, tc.want)
		}
	}
}

// TestLimitedTokenWithoutWorker: which runs a limited token sees is judged by how they
// were started, which needs no worker: with none up, its own run is the 503 that says so,
// another team's still the 404 of an unknown id.
func TestLimitedTokenWithoutWorker(t *testing.T) {
	f := newLimitsFake()
	f.origin = func(ctx context.Context, id string) (runs.Origin, error) {
		rec, err := getRecords(agentPending(), billingPending())(ctx, id)
		return runs.Origin{ID: rec.ID, Workflow: rec.Workflow, Input: rec.Payload}, err
	}
	f.get = func(_ context.Context, id string) (api.Record, error) {
		return api.Record{}, &runs.NoWorkerError{ID: id, TaskQueue: "nexo", Err: context.DeadlineExceeded}
	}
	s := newServer(t, f.fakeRuns, Options{Tokens: limitTokens})
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/run-agent", header: bearer(teamSecret)}), 503, "run-agent")
	hidden := answerOf(t, do(t, s, request{method: "GET", path: "/v1/runs/run-bill", header: bearer(teamSecret)}))
	unknown := answerOf(t, do(t, s, request{method: "GET", path: "/v1/runs/run-nope", header: bearer(teamSecret)}))
	unknown.body = strings.ReplaceAll(unknown.body, "run-nope", "run-bill")
	if hidden.status != 404 || hidden != unknown {
		t.Errorf("team on billing's run with no worker: %+v, want an unknown id's %+v", hidden, unknown)
	}
}
