package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/mcptest"
	"github.com/nexo-temporal/nexo/internal/mcptest/officialsdk"
)

// mcpToken is the remote server's bearer token: the worker reads it from its environment,
// and it must appear nowhere a user or an operator can read.
const mcpToken = "tok-e2e-mcp-2718281828"

// mcpConfig: an agent under approve with a stdio server (whose calls are pre-approved
// through mcp_allow) and an HTTP server behind a token (whose calls need a human).
func mcpConfig(baseURL, stdioCmd, httpURL string) string {
	return `llm:
  base_url: ` + baseURL + `
  model: fake-model
agents:
  - name: mcper
    instructions: You use MCP tools.
    permissions:
      mode: approve
      mcp_allow: [local__echo, local__crash, local__pid]
    sandbox: {type: local, dir: ./workspace}
    max_turns: 4
    mcp:
      - name: local
        transport: stdio
        command: ` + stdioCmd + `
      - name: remote
        transport: http
        url: ` + httpURL + `
        token_env: NEXO_TEST_MCP_TOKEN
`
}

func mcpCall(name, args string) fakellm.Call {
	return fakellm.Call{Name: name, Arguments: json.RawMessage(args)}
}

// toolResults returns the content of the run's agent_tool_result events by tool name.
func toolResults(t *testing.T, rec api.Record) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range rec.Events {
		if e.Type != "agent_tool_result" {
			continue
		}
		var d struct {
			Name    string `json:"name"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out[d.Name] = d.Content
	}
	return out
}

// TestAgentMCPTools: an agent lists and calls the tools of a stdio server and of an HTTP
// server with a token. Under approve, the HTTP call waits for a human with its arguments
// shown; approved it runs, denied it never reaches the server. A stdio server that dies
// mid-call is restarted by the retry. The token is nowhere in the run's history, record,
// logs, or the worker's output.
func TestAgentMCPTools(t *testing.T) {
	t.Parallel()
	// Both runs follow the same script (the fake model answers by the thread's length).
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{
			mcpCall("local__echo", `{"text":"from stdio"}`),
			mcpCall("local__crash", `{"once_file":"`+filepath.Join(t.TempDir(), "crashed")+`"}`),
			mcpCall("local__pid", `{}`),
			mcpCall("remote__add", `{"a":40,"b":2}`),
		}},
		fakellm.Reply{Content: "All done."},
	)
	hs := mcptest.StartHTTP(t, mcpToken)
	p := newPlatform(t)
	p.writeConfig(mcpConfig(model.Start(t), mcptest.BuildServer(t), hs.URL))
	p.extraEnv = []string{"NEXO_TEST_MCP_TOKEN=" + mcpToken}
	p.start()

	// Approved: every call runs.
	approved := strings.TrimSpace(p.ok("agent", "mcper", "Use your tools."))
	p.waitStatus(approved, api.StatusSuspended)
	show := p.ok("show", approved)
	if !strings.Contains(show, "remote__add (mcp)") || !strings.Contains(show, `"a":40`) {
		t.Errorf("show does not list the pending MCP call with its arguments:\n%s", show)
	}
	if n := len(hs.Calls()); n != 0 {
		t.Fatalf("the server ran %d calls before the approval", n)
	}
	p.ok("approve", approved)
	rec := p.waitStatus(approved, api.StatusDone)
	res := toolResults(t, rec)
	if res["local__echo"] != "from stdio" || res["remote__add"] != "42" {
		t.Errorf("tool results = %v", res)
	}
	// The first crash broke the call; Temporal retried it on a restarted server, and the
	// model is told the call is a retry.
	if want := "note: this call is a retry (attempt 2): an earlier attempt may have run partly\nsurvived"; res["local__crash"] != want {
		t.Errorf("local__crash = %q, want the retry to reach a restarted server (%q)", res["local__crash"], want)
	}
	if calls := hs.Calls(); len(calls) != 1 || calls[0].Tool != "add" {
		t.Errorf("server calls = %v, want the approved add", calls)
	}
	for i, h := range hs.AuthHeaders() {
		if h != "Bearer "+mcpToken {
			t.Fatalf("request %d reached the server with Authorization %q", i, h)
		}
	}
	var tools map[string][]string
	for _, e := range rec.Events {
		if e.Type == "mcp_tools" {
			_ = json.Unmarshal(e.Data, &tools)
		}
	}
	if len(tools["local"]) == 0 || len(tools["remote"]) == 0 {
		t.Errorf("mcp_tools = %v, want both servers' tools", tools)
	}
	// The run's end closed its clients: the stdio server was stopped and reaped.
	pid, err := strconv.Atoi(res["local__pid"])
	if err != nil {
		t.Fatalf("local__pid = %q", res["local__pid"])
	}
	waitReaped(t, pid)

	// Denied: the call never reaches the server, and the model hears why.
	denied := strings.TrimSpace(p.ok("agent", "mcper", "Use your tools."))
	p.waitStatus(denied, api.StatusSuspended)
	p.ok("deny", denied, "--reason", "no remote arithmetic today")
	rec = p.waitStatus(denied, api.StatusDone)
	if calls := hs.Calls(); len(calls) != 1 {
		t.Errorf("server calls = %v: the denied call reached the server", calls)
	}
	if got := toolResults(t, rec)["remote__add"]; !strings.Contains(got, "no remote arithmetic today") {
		t.Errorf("the model got %q for the denied call, want the reason", got)
	}

	// The token is the worker's alone.
	c := p.dial()
	for _, id := range []string{approved, denied} {
		var h historypb.History
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		hist := historyText(t, &h)
		// The declaration is in history (by the variable's name), its value is not.
		if !strings.Contains(hist, "NEXO_TEST_MCP_TOKEN") {
			t.Errorf("run %s: history does not hold the MCP declaration; the check below proves nothing", id)
		}
		for what, text := range map[string]string{
			"history":     hist,
			"show --json": p.ok("show", id, "--json"),
			"logs":        p.ok("logs", id),
		} {
			if strings.Contains(text, mcpToken) {
				t.Errorf("run %s: the token is in its %s", id, what)
			}
		}
	}
	if strings.Contains(p.output(), mcpToken) {
		t.Error("the token is in the worker's output")
	}
}

// TestAgentMCPOfficialSDK: an agent on a real worker uses servers built on the official MCP
// Go SDK, over stdio and over streamable HTTP (mcp.NewStreamableHTTPHandler with sessions,
// behind the SDK's bearer-token middleware): both list their tools and answer, and the
// HTTP one is spoken to at a version it lists (issue 16: every run failed there).
func TestAgentMCPOfficialSDK(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{
			mcpCall("local__echo", `{"text":"from the official stdio server"}`),
			mcpCall("remote__add", `{"a":40,"b":2}`),
		}},
		fakellm.Reply{Content: "All done."},
	)
	hs := officialsdk.StartHTTP(t, mcpToken, officialsdk.Options{})
	p := newPlatform(t)
	p.writeConfig(strings.Replace(mcpConfig(model.Start(t), officialsdk.BuildServer(t), hs.URL),
		"mcp_allow: [local__echo, local__crash, local__pid]", "mcp_allow: [local__echo, remote__add]", 1))
	p.extraEnv = []string{"NEXO_TEST_MCP_TOKEN=" + mcpToken}
	p.start()

	id := strings.TrimSpace(p.ok("agent", "mcper", "Use your tools."))
	rec := p.waitStatus(id, api.StatusDone)
	res := toolResults(t, rec)
	if res["local__echo"] != "from the official stdio server" || res["remote__add"] != "42" {
		t.Errorf("tool results = %v", res)
	}
	for _, e := range rec.Events {
		if e.Type == "mcp_server_error" {
			t.Errorf("mcp_server_error: %s", e.Data)
		}
	}
	if calls := hs.Calls(); len(calls) != 1 || calls[0].Tool != "add" {
		t.Errorf("server calls = %v, want the add", calls)
	}
	for _, r := range hs.Requests() {
		if r.Authorization != "Bearer "+mcpToken {
			t.Fatalf("a %q request reached the server with Authorization %q", r.Method, r.Authorization)
		}
		if (r.Method == "tools/list" || r.Method == "tools/call") && r.ProtocolVersion != "2025-11-25" {
			t.Errorf("%s with MCP-Protocol-Version %q, want 2025-11-25 (what the server lists)", r.Method, r.ProtocolVersion)
		}
	}
}

// historyText is a history as protojson, followed by every payload decoded (protojson
// shows payload bytes in base64, where a grep would miss a secret).
func historyText(t *testing.T, h *historypb.History) string {
	t.Helper()
	b, err := protojson.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	out.Write(b)
	for _, m := range payloadData.FindAllSubmatch(b, -1) {
		if d, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
			out.WriteString("\n")
			out.Write(d)
		}
	}
	return out.String()
}

var payloadData = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]*)"`)

func waitReaped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("MCP server %d still there 30s after its run ended: %s", pid, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
