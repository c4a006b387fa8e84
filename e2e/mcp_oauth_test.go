package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/mcptest/oauthtest"
)

// TestAgentMCPOAuth: `starter mcp login` acquires a token once; the worker uses it, and
// refreshes it when it expires between two calls of a run; no issued token reaches
// history, the run record or the worker's output, and the credential file is 0600.
func TestAgentMCPOAuth(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t, oauthtest.Options{AccessTTL: time.Second})
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{mcpCall("docs__echo", `{"text":"first"}`)}},
		// Past the access token's lifetime: the second call needs a refreshed token.
		fakellm.Reply{ToolCalls: []fakellm.Call{mcpCall("shell", `{"command":"sleep 2"}`)}},
		fakellm.Reply{ToolCalls: []fakellm.Call{mcpCall("docs__echo", `{"text":"second"}`)}},
		fakellm.Reply{Content: "Both echoed."},
	)
	p := newPlatform(t)
	creds := filepath.Join(p.dir, ".nexo", "mcp-credentials.json")
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
mcp: {credentials_file: ` + creds + `}
agents:
  - name: reader
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
    max_turns: 4
    mcp:
      - name: docs
        transport: http
        url: ` + as.MCPURL + `
        oauth: {client_id: nexo-test, scopes: [read]}
`)
	p.start()

	// Before login: the agent is told how to fix it.
	r := p.starter("agent", "reader", "Echo twice.", "--wait")
	out := r.stdout + r.stderr
	id := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	if rec := p.record(id); countEvents(rec, "mcp_server_error") != 1 || !strings.Contains(string(mustMarshal(t, rec.Events)), "starter mcp login reader docs") {
		t.Fatalf("run before login: want an mcp_server_error naming `starter mcp login reader docs`:\n%s", out)
	}

	// Login, as a person would: the starter prints a URL, the browser opens it.
	var login oauthtest.Buffer
	cmd := exec.Command(bins.starter, "mcp", "login", "reader", "docs", "--timeout", "30s")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = p.dir, p.env(), &login, &login
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	oauthtest.Approve(t, &login)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mcp login: %v\n%s", err, login.String())
	}
	if st, err := os.Stat(creds); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credential file %s: %v, mode %v; want 0600", creds, err, st.Mode().Perm())
	}

	r = p.starter("agent", "reader", "Echo twice.", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "is done") {
		t.Fatalf("agent after login: exit %d\n%s\n%s\n%s", r.code, r.stdout, r.stderr, p.output())
	}
	id = strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	rec := p.record(id)
	if got := toolResults(t, rec)["docs__echo"]; !strings.Contains(got, "second") {
		t.Errorf("second echo = %q, want it through a refreshed token", got)
	}
	if as.Refreshes() == 0 {
		t.Error("the worker never refreshed the expired access token")
	}

	// No token anywhere a user or an operator reads.
	var h historypb.History
	it := p.dial().GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	places := map[string]string{"history": historyText(t, &h), "record": string(mustMarshal(t, rec)),
		"worker output": p.output(), "login output": login.String()}
	for _, tok := range as.Issued() {
		for where, text := range places {
			if strings.Contains(text, tok) {
				t.Errorf("an issued token is in the %s", where)
			}
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
