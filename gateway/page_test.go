package gateway

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// TestRunPageEscapesWhatRunsProduced: markup from a tool result, tool-call arguments,
// checkpoints, the payload and an error is shown as text, never as markup.
func TestRunPageEscapesWhatRunsProduced(t *testing.T) {
	t.Parallel()
	rec := agentPending()
	rec.Payload = mustJSON(map[string]string{"prompt": xss})
	rec.State["draft"] = mustJSON(map[string]string{"body": xss})
	rec.Artifacts = []api.Artifact{{Name: `<b>x</b>.html`, At: t0, Size: 3, SHA256: "abc"}}
	s := newServer(t, &fakeRuns{get: getRecords(rec)}, Options{})
	resp := do(t, s, request{method: "GET", path: "/runs/run-agent"})
	page := readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d\n%s", resp.StatusCode, page)
	}
	for _, raw := range []string{"<script>alert", "<img src=x", "<b>x</b>"} {
		if strings.Contains(page, raw) {
			t.Errorf("the page contains raw %q: a model's markup would run\n%s", raw, page)
		}
	}
	// ... and it is there, as text.
	if n := strings.Count(page, "&lt;script&gt;alert("); n < 4 {
		t.Errorf("escaped <script> appears %d times, want it in the tool result, the args, the payload and the checkpoint", n)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy = %q, want scripts from the gateway only", csp)
	}
	if strings.Contains(page, "<script>") && !strings.Contains(page, `<script src="/static/app.js" defer></script>`) {
		t.Error("the page has an inline script")
	}
}

// TestRunPageShowsThePendingApproval: the tool, its capability, its arguments
// pretty-printed, and the decision form aimed at the pending call.
func TestRunPageShowsThePendingApproval(t *testing.T) {
	t.Parallel()
	rec := agentPending()
	s := newServer(t, &fakeRuns{get: getRecords(rec, docSuspended())}, Options{})
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/run-agent"}))
	for _, want := range []string{
		`Approval needed: tool call <span class="mono">2.1</span>`,
		`<code class="tool">write_file</code>`,
		`capability <strong>write</strong>`,
		`action="/v1/runs/run-agent/approvals/2.1"`,
		`id="approve"`, `id="deny"`, `name="always"`,
		`id="approve-edited"`, `id="answer"`, `<textarea id="edit-args" name="args"`, `<textarea id="answer-result" name="result"`,
		`data-args-sha256="sha-of-2.1"`,
		`data-status="suspended"`, `data-last-seq="3"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	// The arguments, as a person reads them: field by field, strings as their text (the
	// markup inside as text too), and the whole as indented JSON.
	for _, want := range []string{
		`<tr><th>content</th><td><pre>hello ` + html.EscapeString(xss) + `</pre></td></tr>`,
		`<tr><th>path</th><td><pre>notes.md</pre></td></tr>`,
	} {
		if !strings.Contains(strings.ReplaceAll(page, "&#34;", "&quot;"), strings.ReplaceAll(want, "&#34;", "&quot;")) {
			t.Errorf("the arguments are not shown field by field; want %s in\n%s", want, page)
		}
	}
	if strings.Index(page, "<th>content</th>") > strings.Index(page, "<th>path</th>") {
		t.Error("the arguments are not in their order (content, then path)")
	}
	_, after, _ := strings.Cut(page, `<pre class="args" id="pending-json">`)
	shown, _, _ := strings.Cut(after, "</pre>")
	text := html.UnescapeString(shown)
	var got, want map[string]string
	a, _ := rec.Approval()
	_ = json.Unmarshal(a.Args, &want)
	if err := json.Unmarshal([]byte(text), &got); err != nil || got["content"] != want["content"] || !strings.HasPrefix(text, "{\n  \"content\": ") {
		t.Errorf("the arguments as JSON are %q, want them pretty-printed (%v)", text, err)
	}

	page = readBody(t, do(t, s, request{method: "GET", path: "/runs/run-doc"}))
	for _, want := range []string{`The workflow paused: <strong id="pending-reason">awaiting approval</strong>`, `action="/v1/runs/run-doc/approvals/suspend"`} {
		if !strings.Contains(page, want) {
			t.Errorf("run page of a paused workflow lacks %s", want)
		}
	}
	if strings.Contains(page, `name="always"`) {
		t.Error("a workflow's own pause offers 'always', which applies to tool calls only")
	}
	if strings.Contains(page, `id="edit-args"`) || strings.Contains(page, `id="answer"`) {
		t.Error("a workflow's own pause offers edit or answer, which apply to tool calls only")
	}
}

// TestReaderSeesNoButtons: a session without approve or operate is shown what it may do.
func TestReaderSeesNoButtons(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{get: getRecords(agentPending())}, Options{Tokens: testTokens})
	c := login(t, s, readerSecret)
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/run-agent", header: map[string]string{"Cookie": c.Name + "=" + c.Value}}))
	if strings.Contains(page, `id="approve"`) || strings.Contains(page, "Cancel run") || !strings.Contains(page, "lacks scope approve") {
		t.Errorf("a reader's run page offers decisions or actions:\n%s", page)
	}
}

func TestRunsPage(t *testing.T) {
	t.Parallel()
	var got runs.ListRequest
	closed := t0.Add(time.Minute)
	f := &fakeRuns{list: func(_ context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error) {
		got = req
		return []runs.Summary{
			{ID: "run-1", Workflow: "DocumentApproval", Status: api.StatusSuspended, CreatedAt: t0},
			{ID: "odd id/with?chars", Workflow: "AgentRun", Status: api.StatusDone, CreatedAt: t0, ClosedAt: &closed},
		}, []byte("next"), nil
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/?status=suspended&workflow=DocumentApproval"})
	page := readBody(t, resp)
	if resp.StatusCode != 200 || got.Status != api.StatusSuspended || got.Workflow != "DocumentApproval" {
		t.Fatalf("status %d, List got %+v", resp.StatusCode, got)
	}
	for _, want := range []string{
		`href="/runs/run-1"`,
		`href="/runs/odd%20id%2Fwith%3Fchars"`,
		`class="chip s-suspended active"`,
		`<span class="badge s-done">done</span>`,
		`page_token=` + encodePageToken([]byte("next")),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("runs page lacks %s\n%s", want, page)
		}
	}
	resp = do(t, s, request{method: "GET", path: "/?status=bogus"})
	if body := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(body, `unknown status &#34;bogus&#34;`) {
		t.Errorf("bad status filter: %d\n%s", resp.StatusCode, body)
	}
}

func TestRunPageNotFound(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{get: getRecords()}, Options{})
	resp := do(t, s, request{method: "GET", path: "/runs/nope"})
	if body := readBody(t, resp); resp.StatusCode != 404 || !strings.Contains(body, "no run nope") || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("status %d, %s", resp.StatusCode, body)
	}
}

func TestStaticAssets(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{}, Options{Tokens: testTokens})
	for path, ct := range map[string]string{"/static/app.js": "text/javascript; charset=utf-8", "/static/style.css": "text/css; charset=utf-8"} {
		resp := do(t, s, request{method: "GET", path: path})
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct {
			t.Errorf("%s: status %d, Content-Type %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if resp := do(t, s, request{method: "GET", path: "/static/nope.js"}); resp.StatusCode != 404 {
		t.Errorf("unknown asset: status %d", resp.StatusCode)
	}
}

func TestDisplayJSONShowsMarkupAsText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"r":"\u003cscript\u003ea \u0026 b"}`: `{"r":"<script>a & b"}`,
		`{"r":"\\u003cscript"}`:                `{"r":"\\u003cscript"}`, // an escaped backslash, then text
		`{"r":"line\nbreak \"q\""}`:            `{"r":"line\nbreak \"q\""}`,
		`[1, 2.50, true]`:                      `[1,2.50,true]`,
	} {
		if got := compactJSON(json.RawMessage(in)); got != want {
			t.Errorf("compactJSON(%s) = %s, want %s", in, got, want)
		}
	}
	// The page still escapes it for HTML.
	rec := agentPending()
	rec.Events[1].Data = json.RawMessage(`{"result":"\u003cscript\u003ealert(1)\u003c/script\u003e"}`)
	s := newServer(t, &fakeRuns{get: getRecords(rec)}, Options{})
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/run-agent"}))
	if !strings.Contains(page, `&#34;result&#34;:&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;`) || strings.Contains(page, `<script>alert(1)`) {
		t.Errorf("a \\u003c-escaped tool result is not shown as escaped text:\n%s", page)
	}
}

// TestSessionPageEscapesWhatSessionsProduced: prompts, replies, a failed turn's error, the
// instance id and a pending tool call's arguments are shown as text, never as markup.
func TestSessionPageEscapesWhatSessionsProduced(t *testing.T) {
	t.Parallel()
	const instance = "<img>u42"
	view := sessionFixture()
	view.ID, view.Instance, view.Status = api.SessionID("assistant", instance), instance, api.StatusSuspended
	view.Turns[0].Prompt = "Say " + xss
	view.Turns[0].Reply = "Here: " + xss
	view.Turns[1].Error = "model said " + xss
	rec := sessionRecord(api.StatusSuspended)
	rec.ID = view.ID
	rec.State[api.StateApproval] = mustJSON(api.ApprovalInfo{CallID: "3.1", Capability: "write", Tool: "write_file",
		Args: mustJSON(map[string]string{"path": "x.html", "content": xss}), At: t0})
	var asked []string
	f := &fakeRuns{
		session: func(_ context.Context, agent, inst string) (api.SessionView, error) {
			asked = append(asked, agent+"/"+inst)
			return view, nil
		},
		get: getRecords(rec),
	}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/sessions/assistant/%3Cimg%3Eu42"})
	page := readBody(t, resp)
	if resp.StatusCode != 200 || len(asked) != 1 || asked[0] != "assistant/"+instance {
		t.Fatalf("status %d, Session asked for %v\n%s", resp.StatusCode, asked, page)
	}
	for _, raw := range []string{"<script>alert", "<img src=x", "<img>u42"} {
		if strings.Contains(page, raw) {
			t.Errorf("the session page contains raw %q: a model's markup would run\n%s", raw, page)
		}
	}
	if n := strings.Count(page, "&lt;script&gt;alert("); n != 5 {
		t.Errorf("escaped <script> appears %d times, want it in the prompt, the reply, the error, the pending arguments and their edit box", n)
	}
	for _, want := range []string{
		`data-after="5"`, // the end of the last finished turn: a turn in progress is streamed whole
		`data-status="suspended"`,
		`<div class="text">Here: &lt;script&gt;`,
		`<div class="text problem">model said &lt;script&gt;`,
		`action="/v1/sessions/assistant/%3Cimg%3Eu42/prompt"`,
		`action="/v1/runs/session:assistant:%3Cimg%3Eu42/approvals/3.1"`,
		`<code class="tool" id="pending-tool">write_file</code>`,
		`<li class="turn done failed" data-turn="2">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the session page lacks %s\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script>") && !strings.Contains(page, `<script src="/static/app.js" defer></script>`) {
		t.Error("the page has an inline script")
	}
	if strings.Contains(resp.Header.Get("Content-Security-Policy"), "unsafe-inline") {
		t.Error("the session page's CSP allows inline script")
	}
}

// TestSessionPageShowsABudgetPause: a session turn paused on its budget shows the pause's
// figures and the raise form, as the run page does, not a tool call to approve.
func TestSessionPageShowsABudgetPause(t *testing.T) {
	t.Parallel()
	pause := api.BudgetPause{Agent: "assistant", Scope: api.BudgetScopeTurn, UsedTokens: 1250, MaxTokens: 1000, Tokens: true}
	view := sessionFixture()
	view.Status = api.StatusSuspended
	rec := sessionRecord(api.StatusSuspended)
	rec.State[api.StateApproval] = mustJSON(api.ApprovalInfo{CallID: "budget-3", Capability: api.CapabilityBudget, Tool: api.CapabilityBudget,
		Args: mustJSON(pause), ArgsSHA256: "sha-budget-3", At: t0})
	f := &fakeRuns{
		session: func(context.Context, string, string) (api.SessionView, error) { return view, nil },
		get:     getRecords(rec),
	}
	s := newServer(t, f, Options{})
	page := readBody(t, do(t, s, request{method: "GET", path: "/sessions/assistant/u42"}))
	for _, want := range []string{
		`<section class="card pending" id="budget-pending" data-call="budget-3">`,
		`Budget reached: decision <span class="mono">budget-3</span>`,
		`agent <strong>assistant</strong> ` + pause.Spent(),
		`<tr class="tokens reached"><th>tokens</th><td>1250</td><td>1000</td></tr>`,
		`<form class="decide budget" method="post" action="/v1/runs/session:assistant:u42/approvals/budget-3" data-args-sha256="sha-budget-3" novalidate>`,
		`name="raise_tokens"`, `value="raise"`, `value="deny"`,
		`<section class="card pending" id="pending" hidden>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("session page lacks %s\n%s", want, page)
		}
	}
	if strings.Contains(page, `name="raise_cost"`) || strings.Contains(page, `id="pending-tool">budget`) {
		t.Errorf("session page of a token budget pause offers a cost raise or shows it as a tool call:\n%s", page)
	}
	// A tool call to approve leaves the budget box hidden.
	rec.State[api.StateApproval] = mustJSON(api.ApprovalInfo{CallID: "3.1", Capability: "write", Tool: "write_file", Args: mustJSON(map[string]string{"path": "a"}), At: t0})
	page = readBody(t, do(t, s, request{method: "GET", path: "/sessions/assistant/u42"}))
	if !strings.Contains(page, `<section class="card pending" id="budget-pending" hidden>`) || !strings.Contains(page, `id="pending-tool">write_file`) {
		t.Errorf("session page of a tool call approval:\n%s", page)
	}
}

// TestSessionPageOfANewSession: a session that does not exist yet is a page with a prompt
// box (its first prompt creates it), not a 404.
func TestSessionPageOfANewSession(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{session: func(_ context.Context, agent, inst string) (api.SessionView, error) {
		return api.SessionView{}, &runs.NotFoundError{ID: api.SessionID(agent, inst)}
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/sessions/assistant/fresh"})
	page := readBody(t, resp)
	for _, want := range []string{`data-status="new"`, "No session yet: the first prompt creates it.", `id="prompt-text"`, `data-after="0"`} {
		if resp.StatusCode != 200 || !strings.Contains(page, want) {
			t.Errorf("status %d; page lacks %s", resp.StatusCode, want)
		}
	}
	if strings.Contains(page, "Close session") {
		t.Error("a session that does not exist offers to close it")
	}
	resp = do(t, s, request{method: "GET", path: "/sessions/assistant/a:b"})
	if body := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "instance id &#34;a:b&#34;") {
		t.Errorf("bad instance: status %d\n%s", resp.StatusCode, body)
	}
}

// TestSessionPageForAReader: no prompt box without scope operate, and no decision form
// without approve.
func TestSessionPageForAReader(t *testing.T) {
	t.Parallel()
	s := newServer(t, everythingWorks(nil), Options{Tokens: testTokens})
	c := login(t, s, readerSecret)
	page := readBody(t, do(t, s, request{method: "GET", path: "/sessions/assistant/u42", header: map[string]string{"Cookie": c.Name + "=" + c.Value}}))
	if strings.Contains(page, `id="prompt-text"`) || strings.Contains(page, `id="approve"`) || !strings.Contains(page, "lacks scope operate, so you cannot prompt") {
		t.Errorf("a reader's session page offers a prompt or a decision:\n%s", page)
	}
}

// TestSessionPromptFromThePage: the page's prompt box acts on the session cookie, so it
// needs the session's CSRF token, like every write from the page.
func TestSessionPromptFromThePage(t *testing.T) {
	t.Parallel()
	prompted := 0
	f := everythingWorks(nil)
	f.prompt = func(context.Context, string, string, string, runs.PromptOptions) (api.PromptReply, error) {
		prompted++
		return api.PromptReply{Turn: 3, Reply: "ok"}, nil
	}
	s := newServer(t, f, Options{Tokens: testTokens})
	c := login(t, s, allSecret)
	sess, _ := s.sessions.get(c.Value)
	page := readBody(t, do(t, s, request{method: "GET", path: "/sessions/assistant/u42", header: map[string]string{"Cookie": c.Name + "=" + c.Value}}))
	if !strings.Contains(page, `<meta name="nexo-csrf" content="`+sess.csrf+`">`) || !strings.Contains(page, `id="prompt-text"`) {
		t.Fatalf("the session page lacks the CSRF token or the prompt box:\n%s", page)
	}
	send := func(extra map[string]string) *http.Response {
		h := map[string]string{"Cookie": c.Name + "=" + c.Value}
		for k, v := range extra {
			h[k] = v
		}
		return do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/prompt", body: `{"text":"hi"}`, header: h})
	}
	wantProblem(t, send(nil), 403, "CSRF")
	wantProblem(t, send(map[string]string{"Sec-Fetch-Site": "cross-site", csrfHeader: sess.csrf}), 403, "cross-origin")
	if prompted != 0 {
		t.Fatalf("prompted %d times without the CSRF token or from another site", prompted)
	}
	if resp := send(map[string]string{csrfHeader: sess.csrf, "Sec-Fetch-Site": "same-origin"}); resp.StatusCode != 200 || prompted != 1 {
		t.Errorf("prompt with the CSRF token: status %d, prompted %d", resp.StatusCode, prompted)
	}
}

func TestSessionsPage(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{listSessions: func(context.Context, int) ([]runs.SessionSummary, error) {
		return []runs.SessionSummary{
			{ID: sessionFixtureID, Agent: "assistant", Instance: "u42", Status: api.StatusRunning, Summary: runs.Summary{CreatedAt: t0}},
			{ID: "session:assistant:<b>odd?", Agent: "assistant", Instance: "<b>odd?", Status: api.StatusDone, Summary: runs.Summary{CreatedAt: t0}},
		}, nil
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/sessions"})
	page := readBody(t, resp)
	for _, want := range []string{
		`href="/sessions/assistant/u42"`,
		`href="/sessions/assistant/%3Cb%3Eodd%3F">&lt;b&gt;odd?</a>`,
		`<span class="badge s-done">done</span>`,
		`<a href="/sessions">Sessions</a>`,
	} {
		if resp.StatusCode != 200 || !strings.Contains(page, want) {
			t.Errorf("status %d; sessions page lacks %s\n%s", resp.StatusCode, want, page)
		}
	}
	// The form opens a session by its address, new or not.
	resp = do(t, s, request{method: "GET", path: "/sessions?agent=assistant&instance=new%3Fone"})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sessions/assistant/new%3Fone" {
		t.Errorf("open form: status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp = do(t, s, request{method: "GET", path: "/sessions?agent=assistant&instance=a+b"})
	if body := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "instance id &#34;a b&#34;") || !strings.Contains(body, `value="a b"`) {
		t.Errorf("open form with a bad instance: status %d\n%s", resp.StatusCode, body)
	}
}

// TestRunPageLinksToTheTemporalUI: with a Temporal UI configured the run page links the
// run's page there (namespace and id escaped); without, there is no link.
func TestRunPageLinksToTheTemporalUI(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{get: getRecords(docSuspended())}
	s := newServer(t, f, Options{TemporalUI: "http://127.0.0.1:8233/", Namespace: "team a"})
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/" + docSuspended().ID}))
	want := `<a id="temporal-ui" href="http://127.0.0.1:8233/namespaces/team%20a/workflows/` + docSuspended().ID + `"`
	if !strings.Contains(page, want) {
		t.Errorf("run page lacks %s", want)
	}
	s = newServer(t, f, Options{})
	if page := readBody(t, do(t, s, request{method: "GET", path: "/runs/" + docSuspended().ID})); strings.Contains(page, "temporal-ui") {
		t.Error("run page links a Temporal UI though none is configured")
	}
}

// TestRunPageShowsABudgetPause: a run paused on its budget shows what it spent of which
// bound and the raise form aimed at its pause, not the tool call's Approve / Edit.
func TestRunPageShowsABudgetPause(t *testing.T) {
	t.Parallel()
	pause := api.BudgetPause{Agent: "counter", Scope: api.BudgetScopeRun, UsedTokens: 1250, MaxTokens: 1000, UsedCost: 0.02, MaxCost: 0.01, Tokens: true, Cost: true}
	rec := api.Record{ID: "run-budget", Workflow: "AgentRun", Status: api.StatusSuspended,
		State: map[string]json.RawMessage{
			api.StateApproval: mustJSON(api.ApprovalInfo{CallID: "budget-2", Capability: api.CapabilityBudget, Tool: api.CapabilityBudget,
				Args: mustJSON(pause), ArgsSHA256: "sha-budget-2", At: t0}),
			api.StateSuspend: mustJSON(api.SuspendInfo{Reason: "budget: agent counter " + pause.Spent(), ResumeKey: "budget-2", At: t0}),
		},
		Events: []api.Event{{Seq: 1, Type: api.EventBudgetExceeded, At: t0}}, CreatedAt: t0, UpdatedAt: t0}
	s := newServer(t, &fakeRuns{get: getRecords(rec)}, Options{})
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/run-budget"}))
	for _, want := range []string{
		`Budget reached: decision <span class="mono">budget-2</span>`,
		`agent <strong>counter</strong> used 1250 of 1000 tokens and spent $0.0200 of $0.0100 in this run`,
		`<tr class="tokens reached"><th>tokens</th><td>1250</td><td>1000</td></tr>`,
		`<tr class="cost reached"><th>cost</th><td>$0.0200</td><td>$0.0100</td></tr>`,
		`<form class="decide budget" method="post" action="/v1/runs/run-budget/approvals/budget-2" data-args-sha256="sha-budget-2" novalidate>`,
		`name="raise_tokens"`, `name="raise_cost"`, `value="raise"`, `value="deny"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %s\n%s", want, page)
		}
	}
	for _, not := range []string{`id="approve"`, `id="approve-edited"`, `name="always"`} {
		if strings.Contains(page, not) {
			t.Errorf("run page of a budget pause has %s", not)
		}
	}
}

// TestRunPageLinksDelegation: a delegate's child run names its parent as a link (with the
// call, the delegating agent and the depth), a lead lists its delegates' runs as links, and
// the parent is not shown again as a checkpoint; a run that delegated nothing shows neither.
func TestRunPageLinksDelegation(t *testing.T) {
	t.Parallel()
	const child = "run-lead-2.1"
	lead := api.Record{ID: "run-lead", Workflow: api.WorkflowAgentRun, Status: api.StatusDone,
		State: map[string]json.RawMessage{},
		Events: []api.Event{
			{Seq: 1, Type: "agent_start", Data: json.RawMessage(`{"agent":"lead"}`), At: t0},
			{Seq: 2, Type: api.EventDelegateStarted, Data: mustJSON(map[string]string{"call_id": "1.1", "agent": "researcher", "child": "run-lead-1.1"}), At: t0},
			{Seq: 3, Type: api.EventDelegateStarted, Data: mustJSON(map[string]string{"call_id": "2.1", "agent": "<b>writer</b>", "child": child}), At: t0},
		}, CreatedAt: t0, UpdatedAt: t0}
	sub := api.Record{ID: child, Workflow: api.WorkflowAgentRun, Status: api.StatusRunning,
		State: map[string]json.RawMessage{
			api.StateParent: mustJSON(api.ParentLink{Run: "run-lead", Call: "2.1", Agent: "lead", Depth: 1}),
		}, CreatedAt: t0, UpdatedAt: t0}
	s := newServer(t, &fakeRuns{get: getRecords(lead, sub, agentPending())}, Options{})

	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/" + child}))
	for _, want := range []string{
		`<dt>Parent</dt><dd id="parent"><a class="mono" href="/runs/run-lead">run-lead</a> <span class="muted">(call 2.1 of agent lead, depth 1)</span></dd>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the child's page lacks %s\n%s", want, page)
		}
	}
	if strings.Contains(page, `<summary class="mono">parent</summary>`) || strings.Contains(page, `id="delegates"`) {
		t.Errorf("the child's page shows its parent as a checkpoint, or delegates it has none of:\n%s", page)
	}

	page = readBody(t, do(t, s, request{method: "GET", path: "/runs/run-lead"}))
	for _, want := range []string{
		`<li><a class="mono" href="/runs/run-lead-1.1">run-lead-1.1</a> <span class="muted">(agent researcher, call 1.1)</span></li>`,
		`<li><a class="mono" href="/runs/run-lead-2.1">run-lead-2.1</a> <span class="muted">(agent &lt;b&gt;writer&lt;/b&gt;, call 2.1)</span></li>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the lead's page lacks %s\n%s", want, page)
		}
	}
	if strings.Index(page, "run-lead-1.1</a>") > strings.Index(page, "run-lead-2.1</a>") || strings.Contains(page, `id="parent"`) {
		t.Errorf("the lead's page lists its delegates out of order or names a parent:\n%s", page)
	}

	page = readBody(t, do(t, s, request{method: "GET", path: "/runs/run-agent"}))
	if strings.Contains(page, `id="parent"`) || strings.Contains(page, `id="delegates"`) {
		t.Errorf("a run that delegated nothing shows delegation links:\n%s", page)
	}
}

// TestSessionPageMarksAnInterruptedTurn: a turn `session interrupt` ended is drawn as
// interrupted (no reply, not a failure), and the page's script knows the steer and
// interrupted turn_end events it draws live.
func TestSessionPageMarksAnInterruptedTurn(t *testing.T) {
	t.Parallel()
	view := sessionFixture()
	view.Turns = append(view.Turns, api.SessionTurn{N: 3, Prompt: "Build it.", Interrupted: true, Started: t0, Ended: t0, FirstSeq: 6, LastSeq: 8})
	f := &fakeRuns{session: func(context.Context, string, string) (api.SessionView, error) { return view, nil }}
	s := newServer(t, f, Options{})
	page := readBody(t, do(t, s, request{method: "GET", path: "/sessions/assistant/u42"}))
	for _, want := range []string{
		`<li class="turn done interrupted" data-turn="3">`,
		`<div class="text interrupted">interrupted before its answer</div>`,
		`<p class="meta">turn 3 · 2026-11-30 09:12:01 UTC · interrupted</p>`,
		`<li class="turn done failed" data-turn="2">`,
		`<li class="turn done" data-turn="1">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the session page lacks %s\n%s", want, page)
		}
	}
	js := readBody(t, do(t, s, request{method: "GET", path: "/static/app.js"}))
	for _, want := range []string{`case "steer":`, `d.interrupted`, `"interrupted before its answer"`} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks %s: the live stream would not draw it", want)
		}
	}
}
