package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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
	var got runs.ApprovalsRequest
	s := newServer(t, inboxFake(&got), Options{Tokens: testTokens})
	c := login(t, s, readerSecret)
	page := readBody(t, do(t, s, request{method: "GET", path: "/approvals?agent=scribe", header: map[string]string{"Cookie": c.Name + "=" + c.Value}}))
	if got.Agent != "scribe" || !strings.Contains(page, "notes.md") || strings.Contains(page, `class="decide"`) || !strings.Contains(page, "needs scope approve") {
		t.Errorf("a reader's Approvals view (agent %q):\n%s", got.Agent, page)
	}
}
