package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// bearerTransport adds a token to every request of the MCP client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect serves s and connects the official MCP SDK's client to its /mcp with token
// ("" for none); the session and the server close when the test ends.
func mcpConnect(t *testing.T, s *Server, token string) (*sdk.ClientSession, error) {
	t.Helper()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "gateway-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL + mcpPath,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

func mustConnect(t *testing.T, s *Server, token string) *sdk.ClientSession {
	t.Helper()
	cs, err := mcpConnect(t, s, token)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	return cs
}

// callTool calls a tool and returns its text and whether it is a tool error; a protocol
// error fails the test.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestMCPListsTools: each configured agent is a tool run_<agent> beside get_run and the
// approvals inbox; a token limited to some agents sees only theirs.
func TestMCPListsTools(t *testing.T) {
	tokens := append(slices.Clone(testTokens), Token{Name: "docs", Secret: "docs-secret-0123456789", Scopes: api.Scopes, Agents: []string{"scribe"}})
	s := newServer(t, &fakeRuns{}, Options{Tokens: tokens, Agents: []string{"scribe", "keeper"}})
	want := []string{"decide_approval", "get_run", "list_approvals", "run_keeper", "run_scribe"}
	if got := toolNames(t, mustConnect(t, s, allSecret)); !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	want = []string{"decide_approval", "get_run", "list_approvals", "run_scribe"}
	if got := toolNames(t, mustConnect(t, s, "docs-secret-0123456789")); !slices.Equal(got, want) {
		t.Errorf("tools of a token limited to scribe = %v, want %v", got, want)
	}
	cs := mustConnect(t, s, allSecret)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name != "run_scribe" {
			continue
		}
		schema, _ := json.Marshal(tl.InputSchema)
		if !strings.Contains(string(schema), `"required":["prompt"]`) || !strings.Contains(string(schema), `"wait":{"default":true`) {
			t.Errorf("run_scribe's input schema = %s, want prompt required and wait defaulting to true", schema)
		}
	}
}

// TestMCPRunAgent: run_<agent> starts an AgentRun of that agent on the prompt and, by
// default, answers with the run's outcome once it is done or waits for a decision; with
// wait false it answers the run id without following the run.
func TestMCPRunAgent(t *testing.T) {
	var started []runs.StartRequest
	done := api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusDone,
		Result: json.RawMessage(`{"agent":"scribe","content":"Wrote it."}`)}
	suspended := agentPending()
	failMsg := "model said no"
	failed := api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusFailed, Error: &failMsg}
	var outcome api.Record
	var followed int
	f := &fakeRuns{
		start: func(_ context.Context, req runs.StartRequest) (string, error) {
			started = append(started, req)
			return "run-1", nil
		},
		follow: func(_ context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
			followed++
			running := api.Record{ID: id, Workflow: api.WorkflowAgentRun, Status: api.StatusRunning}
			if fn(running) {
				t.Errorf("run_scribe stopped following a running run")
			}
			if !fn(outcome) {
				t.Errorf("run_scribe goes on following a %s run", outcome.Status)
			}
			return outcome, nil
		},
	}
	cs := mustConnect(t, newServer(t, f, Options{Tokens: testTokens, Agents: []string{"scribe"}}), allSecret)

	outcome = done
	text, isErr := callTool(t, cs, "run_scribe", map[string]any{"prompt": "Write a note."})
	var got MCPRun
	if err := json.Unmarshal([]byte(text), &got); err != nil || isErr {
		t.Fatalf("run_scribe = %s (error %v), want a run's outcome: %v", text, isErr, err)
	}
	if got.ID != "run-1" || got.Status != api.StatusDone || string(got.Result) != string(done.Result) {
		t.Errorf("run_scribe = %+v, want run-1 done with its result", got)
	}
	if len(started) != 1 || started[0].Workflow != api.WorkflowAgentRun || string(started[0].Payload) != `{"agent":"scribe","prompt":"Write a note."}` {
		t.Errorf("started %+v, want one AgentRun of scribe on the prompt", started)
	}

	outcome = suspended
	text, isErr = callTool(t, cs, "run_scribe", map[string]any{"prompt": "Write a note.", "wait": true})
	got = MCPRun{}
	_ = json.Unmarshal([]byte(text), &got)
	if isErr || got.Status != api.StatusSuspended || got.Approval == nil || got.Approval.CallID != "2.1" || got.Approval.Tool != "write_file" {
		t.Errorf("run_scribe of a run waiting for approval = %s, want status suspended and the pending call 2.1", text)
	}

	outcome = failed
	text, isErr = callTool(t, cs, "run_scribe", map[string]any{"prompt": "Write a note."})
	if !isErr || !strings.Contains(text, `"status":"failed"`) || !strings.Contains(text, failMsg) {
		t.Errorf("run_scribe of a failed run = %s (error %v), want a tool error with the run's error", text, isErr)
	}

	followedBefore := followed
	text, isErr = callTool(t, cs, "run_scribe", map[string]any{"prompt": "Write a note.", "wait": false})
	var st MCPStarted
	if err := json.Unmarshal([]byte(text), &st); err != nil || isErr || st.ID != "run-1" || st.Agent != "scribe" {
		t.Errorf("run_scribe with wait false = %s (error %v), want the run id", text, isErr)
	}
	if followed != followedBefore {
		t.Errorf("run_scribe with wait false followed the run")
	}
}

// TestMCPScopes: /mcp needs a token (401 without, or with a wrong one), and each tool the
// scope of its HTTP route: a call without it is a tool error naming the scope, and does
// nothing.
func TestMCPScopes(t *testing.T) {
	var decided []runs.Decision
	f := everythingWorks(&decided)
	startCalls := 0
	f.start = func(context.Context, runs.StartRequest) (string, error) { startCalls++; return "run-new", nil }
	s := newServer(t, f, Options{Tokens: testTokens, Agents: []string{"scribe"}})

	for _, c := range []struct {
		name, header, want string
	}{
		{"no token", "", "this gateway needs a token"},
		{"unknown token", "Bearer not-a-token-of-this-gateway", "unknown token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := request{method: "POST", path: mcpPath, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`}
			if c.header != "" {
				req.header = map[string]string{"Authorization": c.header}
			}
			resp := do(t, s, req)
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			wantProblem(t, resp, http.StatusUnauthorized, c.want)
		})
	}
	if _, err := mcpConnect(t, s, ""); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("the SDK client connecting without a token: %v, want a refusal saying Unauthorized", err)
	}

	for _, c := range []struct {
		token, tool string
		args        map[string]any
		want        string
	}{
		{readerSecret, "run_scribe", map[string]any{"prompt": "hi"}, "token reader lacks scope operate, which tool run_scribe needs (it has: read)"},
		{operatorSecret, "get_run", map[string]any{"id": "run-agent"}, "token operator lacks scope read, which tool get_run needs (it has: operate)"},
		{operatorSecret, "list_approvals", nil, "token operator lacks scope read, which tool list_approvals needs"},
		{readerSecret, "decide_approval", map[string]any{"run": "run-agent", "call_id": "2.1", "decision": "approve"}, "token reader lacks scope approve, which tool decide_approval needs (it has: read)"},
	} {
		text, isErr := callTool(t, mustConnect(t, s, c.token), c.tool, c.args)
		if !isErr || !strings.Contains(text, c.want) {
			t.Errorf("%s: %s (error %v), want a tool error %q", c.tool, text, isErr, c.want)
		}
	}
	if startCalls != 0 || len(decided) != 0 {
		t.Errorf("calls without their scope acted: %d starts, decisions %+v", startCalls, decided)
	}
	// The scopes that fit.
	if text, isErr := callTool(t, mustConnect(t, s, readerSecret), "get_run", map[string]any{"id": "run-agent"}); isErr || !strings.Contains(text, `"status":"suspended"`) {
		t.Errorf("get_run with read: %s (error %v)", text, isErr)
	}
	if text, isErr := callTool(t, mustConnect(t, s, approverSecret), "decide_approval",
		map[string]any{"run": "run-agent", "call_id": "2.1", "decision": "approve", "by": "ada"}); isErr || len(decided) != 1 {
		t.Errorf("decide_approval with approve: %s (error %v), decisions %+v", text, isErr, decided)
	} else if d := decided[0]; d.CallID != "2.1" || !d.Approved || d.By != "approver (ada)" {
		t.Errorf("decision = %+v, want call 2.1 approved by approver (ada)", d)
	}
}

// TestMCPApprovals: list_approvals is the inbox of GET /v1/approvals, decide_approval
// approves or denies (with a reason) one of its rows.
func TestMCPApprovals(t *testing.T) {
	var decided []runs.Decision
	var asked []runs.ApprovalsRequest
	f := everythingWorks(&decided)
	f.approvals = func(_ context.Context, req runs.ApprovalsRequest) ([]runs.Pending, error) {
		asked = append(asked, req)
		return []runs.Pending{{Agent: "scribe", Run: "run-agent", Workflow: api.WorkflowAgentRun, CallID: "2.1", Tool: "write_file", Capability: "write", Args: json.RawMessage(`{"path":"notes.md"}`)}}, nil
	}
	cs := mustConnect(t, newServer(t, f, Options{Tokens: testTokens}), allSecret)
	text, isErr := callTool(t, cs, "list_approvals", map[string]any{"agent": "scribe"})
	var list ApprovalList
	if err := json.Unmarshal([]byte(text), &list); err != nil || isErr || len(list.Approvals) != 1 || list.Approvals[0].CallID != "2.1" {
		t.Fatalf("list_approvals = %s (error %v), want the one pending call", text, isErr)
	}
	if len(asked) != 1 || asked[0].Agent != "scribe" {
		t.Errorf("approvals asked %+v, want agent scribe", asked)
	}
	text, isErr = callTool(t, cs, "decide_approval", map[string]any{"run": "run-agent", "call_id": "2.1", "decision": "deny", "reason": "not today"})
	if isErr || len(decided) != 1 || decided[0].Approved || decided[0].Reason != "not today" || decided[0].Action != api.DecideDeny || decided[0].By != "ci" {
		t.Errorf("decide_approval deny = %s (error %v), decisions %+v", text, isErr, decided)
	}
	var acc Accepted
	if err := json.Unmarshal([]byte(text), &acc); err != nil || acc.Approved == nil || *acc.Approved || acc.By != "ci" {
		t.Errorf("decide_approval's answer = %s, want approved false by ci", text)
	}
	// Call id "suspend" decides a workflow's own pause, as the HTTP route does.
	text, isErr = callTool(t, cs, "decide_approval", map[string]any{"run": "run-doc", "call_id": "suspend", "decision": "approve"})
	if isErr || len(decided) != 2 || !decided[1].Approved || decided[1].CallID != "" {
		t.Errorf("decide_approval of a workflow's pause = %s (error %v), decisions %+v", text, isErr, decided)
	}
}

// TestMCPBadInput: every mistake is a tool error saying what was wrong, and nothing
// starts or is decided; an unknown run, call or tool is named.
func TestMCPBadInput(t *testing.T) {
	var decided []runs.Decision
	f := everythingWorks(&decided)
	startCalls := 0
	f.start = func(context.Context, runs.StartRequest) (string, error) { startCalls++; return "run-new", nil }
	f.decide = func(_ context.Context, id string, d runs.Decision) (string, api.Record, error) {
		if id != "run-agent" {
			return "", api.Record{}, &runs.NotFoundError{ID: id}
		}
		return "", api.Record{}, &runs.RefusedError{ID: id, CallID: d.CallID, Msg: "no tool call " + d.CallID + " waits for a decision (pending: 2.1)"}
	}
	s := newServer(t, f, Options{Tokens: testTokens, Agents: []string{"scribe"}})
	cs := mustConnect(t, s, allSecret)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_scribe", map[string]any{}, "prompt is required: what agent scribe is to do"},
		{"run_scribe", map[string]any{"prompt": "  "}, "prompt is required"},
		{"run_scribe", map[string]any{"promt": "hi"}, `unknown argument "promt" (did you mean "prompt"?)`},
		{"run_scribe", map[string]any{"prompt": "hi", "wait": "yes"}, "argument wait: want a bool, got a JSON string"},
		{"get_run", map[string]any{"id": "019aaaaa-0000-7000-8000-000000000000"}, "no run 019aaaaa-0000-7000-8000-000000000000"},
		{"get_run", map[string]any{}, "id is required"},
		{"list_approvals", map[string]any{"agent": "a b"}, `agent "a b": want the name of a configured agent`},
		{"decide_approval", map[string]any{"run": "run-agent", "call_id": "2.1", "decision": "deny"}, "a denial needs a reason"},
		{"decide_approval", map[string]any{"run": "run-agent", "call_id": "2.1", "decision": "maybe"}, `decision "maybe": want approve or deny`},
		{"decide_approval", map[string]any{"call_id": "2.1", "decision": "approve"}, "run is required"},
		{"decide_approval", map[string]any{"run": "run-gone", "call_id": "2.1", "decision": "approve"}, "no run run-gone"},
		{"decide_approval", map[string]any{"run": "run-agent", "call_id": "9.9", "decision": "approve"}, "refused the decision on tool call 9.9"},
	} {
		text, isErr := callTool(t, cs, c.tool, c.args)
		if !isErr || !strings.Contains(text, c.want) {
			t.Errorf("%s %v: %s (error %v), want a tool error containing %q", c.tool, c.args, text, isErr, c.want)
		}
	}
	if startCalls != 0 {
		t.Errorf("bad input started %d runs", startCalls)
	}
	// An agent that is not configured has no tool: the call is refused naming it.
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_nobody", Arguments: map[string]any{"prompt": "hi"}})
	if err == nil || !strings.Contains(err.Error(), "run_nobody") {
		t.Errorf("run_nobody: %v, want an error naming the tool", err)
	}
	// An agent that no worker offers: the start's refusal, naming it.
	f.start = func(context.Context, runs.StartRequest) (string, error) {
		return "", &runs.BadRequestError{Msg: `no worker on task queue nexo offers agent "scribe" (offered: keeper)`}
	}
	if text, isErr := callTool(t, cs, "run_scribe", map[string]any{"prompt": "hi"}); !isErr || !strings.Contains(text, `start agent scribe: no worker on task queue nexo offers agent "scribe"`) {
		t.Errorf("run_scribe with no worker offering scribe: %s (error %v)", text, isErr)
	}
	// The rest of the API is as it was.
	resp := do(t, s, request{method: "GET", path: "/v1/runs/run-agent", header: map[string]string{"Authorization": "Bearer " + readerSecret}})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/runs/run-agent: %d", resp.StatusCode)
	}
	if resp := do(t, s, request{method: "GET", path: mcpPath, header: map[string]string{"Authorization": "Bearer " + readerSecret}}); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /mcp: %d, want 405 (no standalone stream)", resp.StatusCode)
	}
}

// TestMCPAgentNames: an agent whose name cannot be a tool, or one listed twice, is
// refused by New.
func TestMCPAgentNames(t *testing.T) {
	for _, c := range []struct {
		agents []string
		want   string
	}{
		{[]string{"has space"}, `agent "has space" cannot be the MCP tool run_has space`},
		{[]string{"a", "a"}, `agent "a" is listed twice`},
	} {
		_, err := New(Options{Runs: &fakeRuns{}, Agents: c.agents})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New with agents %q: %v, want %q", c.agents, err, c.want)
		}
	}
}

// TestMCPOpenGateway: an open gateway serves /mcp without a token, acting as "local" with
// every scope, to requests addressed to this machine only.
func TestMCPOpenGateway(t *testing.T) {
	var decided []runs.Decision
	s := newServer(t, everythingWorks(&decided), Options{Agents: []string{"scribe"}})
	cs := mustConnect(t, s, "")
	if text, isErr := callTool(t, cs, "get_run", map[string]any{"id": "run-agent"}); isErr || !strings.Contains(text, `"id":"run-agent"`) {
		t.Errorf("get_run on an open gateway: %s (error %v)", text, isErr)
	}
	if text, isErr := callTool(t, cs, "decide_approval", map[string]any{"run": "run-agent", "call_id": "2.1", "decision": "approve"}); isErr || len(decided) != 1 || decided[0].By != "local" {
		t.Errorf("decide_approval on an open gateway: %s (error %v), decisions %+v, want one by local", text, isErr, decided)
	}
	resp := do(t, s, request{method: "POST", path: mcpPath, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, header: map[string]string{"Host": "rebound.example:8234"}})
	wantProblem(t, resp, http.StatusForbidden, `host "rebound.example:8234" is not localhost or a loopback IP`)
}
