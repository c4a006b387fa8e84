package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// Secrets of the test tokens (long enough for New).
const (
	readerSecret   = "reader-secret-0123456789"
	operatorSecret = "operator-secret-0123456789"
	approverSecret = "approver-secret-0123456789"
	allSecret      = "all-scopes-secret-0123456789"
)

var testTokens = []Token{
	{Name: "reader", Secret: readerSecret, Scopes: []string{api.ScopeRead}},
	{Name: "operator", Secret: operatorSecret, Scopes: []string{api.ScopeOperate}},
	{Name: "approver", Secret: approverSecret, Scopes: []string{api.ScopeApprove}},
	{Name: "ci", Secret: allSecret, Scopes: api.Scopes},
}

// everythingWorks answers every method successfully, so a test sees only the guard.
func everythingWorks(decided *[]runs.Decision) *fakeRuns {
	rec := agentPending()
	return &fakeRuns{
		start: func(context.Context, runs.StartRequest) (string, error) { return "run-new", nil },
		get:   getRecords(rec, docSuspended()),
		list:  func(context.Context, runs.ListRequest) ([]runs.Summary, []byte, error) { return nil, nil, nil },
		follow: func(_ context.Context, _ string, fn func(api.Record) bool) (api.Record, error) {
			done := withEvents(rec, api.StatusDone, 1)
			fn(done)
			return done, nil
		},
		resume: func(context.Context, string, runs.ResumeRequest) error { return nil },
		decide: func(_ context.Context, _ string, d runs.Decision) (string, api.Record, error) {
			if decided != nil {
				*decided = append(*decided, d)
			}
			return "decided", rec, nil
		},
		decideRecord: func(_ context.Context, _ api.Record, d runs.Decision) (string, error) {
			if decided != nil {
				*decided = append(*decided, d)
			}
			return "decided", nil
		},
		cancel: func(_ context.Context, id string) (string, error) { return "cancel requested for run " + id, nil },
		rerun:  func(context.Context, string, json.RawMessage) (string, error) { return "run-new", nil },
		prompt: func(context.Context, string, string, string, runs.PromptOptions) (api.PromptReply, error) {
			return api.PromptReply{Turn: 1, Reply: "hello"}, nil
		},
		session:      func(context.Context, string, string) (api.SessionView, error) { return sessionFixture(), nil },
		listSessions: func(context.Context, int) ([]runs.SessionSummary, error) { return nil, nil },
		closeSession: func(context.Context, string, string) error { return nil },
		followSession: func(_ context.Context, _, _ string, fn func(api.Record) bool) error {
			fn(sessionRecord(api.StatusDone))
			return nil
		},
		approvals: func(context.Context, runs.ApprovalsRequest) ([]runs.Pending, error) { return nil, nil },
	}
}

// sampleRequest fills a route's path parameters and gives POSTs a valid body.
func sampleRequest(rt route) request {
	p := strings.NewReplacer("{id}", "run-agent", "{call_id}", "2.1", "{name}", "none.txt", "{file}", "app.js", "{$}", "",
		"{agent}", "assistant", "{instance}", "u42").Replace(rt.path)
	req := request{method: rt.method, path: p}
	if rt.method == "POST" && strings.HasPrefix(p, "/v1/") {
		switch {
		case p == "/v1/runs":
			req.body = `{"workflow":"DocumentApproval"}`
		case strings.Contains(p, "/approvals/"):
			req.body = `{"approved":true}`
		case strings.HasSuffix(p, "/prompt"):
			req.body = `{"text":"hi"}`
		default:
			req.body = `{}`
		}
	}
	return req
}

// TestScopes: every API route, with every token: a token lacking the route's scope gets
// 403, one holding it gets through; no token or a wrong one gets 401.
func TestScopes(t *testing.T) {
	t.Parallel()
	s := newServer(t, everythingWorks(nil), Options{Tokens: testTokens})
	for _, rt := range s.routes {
		if rt.page {
			continue
		}
		t.Run(rt.pattern(), func(t *testing.T) {
			for _, tok := range testTokens {
				req := sampleRequest(rt)
				req.header = map[string]string{"Authorization": "Bearer " + tok.Secret}
				resp := do(t, s, req)
				allowed := rt.scope == "" || slices.Contains(tok.Scopes, rt.scope)
				switch {
				case allowed && (resp.StatusCode == 401 || resp.StatusCode == 403):
					t.Errorf("token %s (%v): status %d, want through: %s", tok.Name, tok.Scopes, resp.StatusCode, readBody(t, resp))
				case !allowed:
					wantProblem(t, resp, 403, "token "+tok.Name+" lacks scope "+rt.scope)
				}
			}
			// The MCP route needs a token of any scope (its tools check theirs: mcp_test.go).
			if rt.scope == "" && !rt.perCall {
				if resp := do(t, s, sampleRequest(rt)); resp.StatusCode != 200 {
					t.Errorf("public route without a token: status %d", resp.StatusCode)
				}
				return
			}
			for name, header := range map[string]map[string]string{
				"no token":    nil,
				"wrong token": {"Authorization": "Bearer not-a-token-of-this-gateway"},
				"basic auth":  {"Authorization": "Basic " + allSecret},
			} {
				req := sampleRequest(rt)
				req.header = header
				resp := do(t, s, req)
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s: no WWW-Authenticate header", name)
				}
				wantProblem(t, resp, 401, "")
			}
		})
	}
}

// TestDecisionRecordsTheTokenName: who decided is the token's name, never its secret.
func TestDecisionRecordsTheTokenName(t *testing.T) {
	t.Parallel()
	var decided []runs.Decision
	s := newServer(t, everythingWorks(&decided), Options{Tokens: testTokens})
	for _, tc := range []struct{ body, want string }{
		{`{"approved":true}`, "approver"},
		{`{"approved":true,"by":"ada"}`, "approver (ada)"},
		{`{"approved":true,"by":"approver"}`, "approver"},
	} {
		decided = nil
		resp := do(t, s, request{method: "POST", path: "/v1/runs/run-agent/approvals/2.1", body: tc.body,
			header: map[string]string{"Authorization": "Bearer " + approverSecret}})
		body := readBody(t, resp)
		if resp.StatusCode != 202 || len(decided) != 1 || decided[0].By != tc.want {
			t.Fatalf("%s: status %d, decided %+v, want By %q", tc.body, resp.StatusCode, decided, tc.want)
		}
		if strings.Contains(body, approverSecret) || strings.Contains(decided[0].By, approverSecret) {
			t.Fatal("the token's secret leaked into the decision or the answer")
		}
	}
}

func TestOpenGatewayAnswersLoopbackHostsOnly(t *testing.T) {
	t.Parallel()
	s := newServer(t, everythingWorks(nil), Options{})
	for host, want := range map[string]int{
		"127.0.0.1:8234":       200,
		"localhost:8234":       200,
		"[::1]:8234":           200,
		"nexo.localhost:8234":  200,
		"attacker.example":     403,
		"rebound.example:8234": 403,
		"10.0.0.5:8234":        403,
	} {
		resp := do(t, s, request{method: "GET", path: "/v1/runs/run-agent", header: map[string]string{"Host": host}})
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
	// With tokens the Host does not matter: the token does.
	s = newServer(t, everythingWorks(nil), Options{Tokens: testTokens})
	resp := do(t, s, request{method: "GET", path: "/v1/runs/run-agent", header: map[string]string{"Host": "nexo.example.com", "Authorization": "Bearer " + readerSecret}})
	if resp.StatusCode != 200 {
		t.Errorf("tokens, public host: status %d", resp.StatusCode)
	}
}

func TestListenRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	open := newServer(t, &fakeRuns{}, Options{})
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		if _, err := open.Listen(addr); !errors.Is(err, ErrOpenNonLoopback) {
			t.Errorf("open Listen(%q) = %v, want ErrOpenNonLoopback", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := open.Listen(addr)
		if err != nil {
			t.Errorf("open Listen(%q) = %v, want a listener", addr, err)
			continue
		}
		ln.Close()
	}
	for addr, want := range map[string]bool{"0.0.0.0:8234": false, "127.0.0.2:1": true, "[::1]:1": true, "LOCALHOST:1": true, "nexo.internal:1": false} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestCrossOriginWritesAreRefused(t *testing.T) {
	t.Parallel()
	var decided []runs.Decision
	s := newServer(t, everythingWorks(&decided), Options{})
	approve := func(header map[string]string) *http.Response {
		return do(t, s, request{method: "POST", path: "/v1/runs/run-agent/approvals/2.1", body: `{"approved":true}`, header: header})
	}
	wantProblem(t, approve(map[string]string{"Sec-Fetch-Site": "cross-site"}), 403, "cross-origin")
	wantProblem(t, approve(map[string]string{"Origin": "http://attacker.example"}), 403, "cross-origin")
	if len(decided) != 0 {
		t.Fatalf("a cross-origin request decided %+v", decided)
	}
	for name, header := range map[string]map[string]string{
		"curl (no browser headers)": nil,
		"the page itself":           {"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8234"},
	} {
		if resp := approve(header); resp.StatusCode != 202 {
			t.Errorf("%s: status %d, want 202: %s", name, resp.StatusCode, readBody(t, resp))
		}
	}
	// Reading is not a write: a cross-site GET is up to the browser's same-origin policy.
	if resp := do(t, s, request{method: "GET", path: "/v1/runs/run-agent", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); resp.StatusCode != 200 {
		t.Errorf("cross-site GET: status %d", resp.StatusCode)
	}
}

// login posts the login form and returns the session cookie.
func login(t *testing.T, s http.Handler, secret string) *http.Cookie {
	t.Helper()
	form := url.Values{"token": {secret}, "next": {"/runs/run-agent"}}.Encode()
	resp := do(t, s, request{method: "POST", path: "/login", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: form})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs/run-agent" {
		t.Fatalf("login: status %d, Location %q: %s", resp.StatusCode, resp.Header.Get("Location"), readBody(t, resp))
	}
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Value == secret || strings.Contains(c.Value, secret) {
				t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, and not the token", c)
			}
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

// TestPageLoginAndCSRF: the page's session cookie works for reading; a write on it needs
// the session's CSRF token too; logging out ends the session.
func TestPageLoginAndCSRF(t *testing.T) {
	t.Parallel()
	var decided []runs.Decision
	s := newServer(t, everythingWorks(&decided), Options{Tokens: testTokens})

	resp := do(t, s, request{method: "GET", path: "/runs/run-agent"})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fruns%2Frun-agent" {
		t.Fatalf("page without login: status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	bad := do(t, s, request{method: "POST", path: "/login", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "token=wrong"})
	if bad.StatusCode != 401 || !strings.Contains(readBody(t, bad), "not one this gateway accepts") {
		t.Errorf("login with a wrong token: status %d", bad.StatusCode)
	}
	noRead := do(t, s, request{method: "POST", path: "/login", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "token=" + approverSecret})
	if noRead.StatusCode != 403 || !strings.Contains(readBody(t, noRead), "lacks scope read") {
		t.Errorf("login with a token lacking read: status %d", noRead.StatusCode)
	}

	c := login(t, s, allSecret)
	cookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	page := do(t, s, request{method: "GET", path: "/runs/run-agent", header: cookie})
	html := readBody(t, page)
	if page.StatusCode != 200 || !strings.Contains(html, "signed in as <strong>ci</strong>") {
		t.Fatalf("page after login: status %d\n%s", page.StatusCode, html)
	}
	sess, _ := s.sessions.get(c.Value)
	if !strings.Contains(html, `<meta name="nexo-csrf" content="`+sess.csrf+`">`) {
		t.Fatal("the page does not carry the session's CSRF token")
	}

	approve := func(extra map[string]string) *http.Response {
		h := map[string]string{"Cookie": cookie["Cookie"]}
		for k, v := range extra {
			h[k] = v
		}
		return do(t, s, request{method: "POST", path: "/v1/runs/run-agent/approvals/2.1", body: `{"approved":true}`, header: h})
	}
	wantProblem(t, approve(nil), 403, "CSRF")
	wantProblem(t, approve(map[string]string{csrfHeader: "guess"}), 403, "CSRF")
	if len(decided) != 0 {
		t.Fatalf("decided without the CSRF token: %+v", decided)
	}
	if resp := approve(map[string]string{csrfHeader: sess.csrf}); resp.StatusCode != 202 || len(decided) != 1 || decided[0].By != "ci" {
		t.Fatalf("approve with the CSRF token: status %d, decided %+v", resp.StatusCode, decided)
	}

	// The logout form carries the token as a field; without it, logging out is refused.
	form := map[string]string{"Cookie": cookie["Cookie"], "Content-Type": "application/x-www-form-urlencoded"}
	if resp := do(t, s, request{method: "POST", path: "/logout", header: form, body: "x=1"}); resp.StatusCode != 403 {
		t.Errorf("logout without CSRF: status %d, want 403", resp.StatusCode)
	}
	if resp := do(t, s, request{method: "POST", path: "/logout", header: form, body: "csrf=" + sess.csrf}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: status %d", resp.StatusCode)
	}
	if resp := do(t, s, request{method: "GET", path: "/v1/runs/run-agent", header: cookie}); resp.StatusCode != 401 {
		t.Errorf("API with a logged-out cookie: status %d, want 401", resp.StatusCode)
	}
}

func TestNewChecksTokens(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		tokens []Token
		want   string
	}{
		"short secret": {[]Token{{Name: "a", Secret: "short", Scopes: []string{"read"}}}, "want at least 16"},
		"no name":      {[]Token{{Secret: readerSecret, Scopes: []string{"read"}}}, "has no name"},
		"same secret":  {[]Token{{Name: "a", Secret: readerSecret}, {Name: "b", Secret: readerSecret}}, "same secret"},
		"bad scope":    {[]Token{{Name: "a", Secret: readerSecret, Scopes: []string{"admin"}}}, `unknown scope "admin"`},
	} {
		if _, err := New(Options{Runs: &fakeRuns{}, Tokens: tc.tokens}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New() = %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// The body limit holds before the CSRF check reads a form: an oversized form is refused
// even when it carries the right token.
func TestCSRFFormIsBodyLimited(t *testing.T) {
	t.Parallel()
	s := newServer(t, everythingWorks(nil), Options{Tokens: testTokens, MaxBodyBytes: 2048})
	c := login(t, s, allSecret)
	sess, _ := s.sessions.get(c.Value)
	form := map[string]string{"Cookie": c.Name + "=" + c.Value, "Content-Type": "application/x-www-form-urlencoded"}
	body := "pad=" + strings.Repeat("a", 4096) + "&csrf=" + sess.csrf
	if resp := do(t, s, request{method: "POST", path: "/logout", header: form, body: body}); resp.StatusCode == http.StatusSeeOther {
		t.Fatalf("logout with a %d-byte form over a 2048-byte limit: status %d, want it refused", len(body), resp.StatusCode)
	}
	if resp := do(t, s, request{method: "POST", path: "/logout", header: form, body: "csrf=" + sess.csrf}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout with a small form: status %d, want 303", resp.StatusCode)
	}
}
