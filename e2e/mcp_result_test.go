package e2e

import (
	"context"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/mcptest"
	"github.com/nexo-temporal/nexo/internal/mcptest/officialsdk"
)

// TestAgentMCPResultPolicyAndTimeout: a server declared with result.redact, result.max_bytes
// and timeout, built on the official MCP Go SDK and run by a real worker. Its tool's
// secret-looking key is redacted and its long text cut, at a character boundary with a
// note, in what the model reads next, in the run's events and record and in its history;
// its slow tool passes the timeout, the model gets an error naming the server, the tool
// and the timeout, and the run goes on to its answer.
func TestAgentMCPResultPolicyAndTimeout(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{
			mcpCall("local__leak", `{"repeat":1000}`),
			mcpCall("local__slow", `{"ms":120000}`),
		}},
		fakellm.Reply{Content: "All done."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: shaper
    instructions: You use MCP tools.
    permissions:
      mode: approve
      mcp_allow: [local__leak, local__slow]
    sandbox: {type: local, dir: ./workspace}
    max_turns: 3
    mcp:
      - name: local
        transport: stdio
        command: ` + officialsdk.BuildServer(t) + `
        timeout: 2s
        result:
          max_bytes: 300
          redact: ['sk-live-[0-9a-f]+']
`)
	p.start()

	id := strings.TrimSpace(p.ok("agent", "shaper", "Use your tools."))
	rec := p.waitStatus(id, api.StatusDone)
	// 19 bytes of "api_key=[redacted]\n" and 281 of the 2,000 bytes of "ü": the cut moves
	// back to 299 so no character is split; the redacted text is 2,037 bytes.
	wantLeak := "api_key=[redacted]\n" + strings.Repeat("ü", 140) + "\n[result cut at 299 of 2037 bytes]"
	const wantSlow = "error: MCP server local: slow: no answer within the server's timeout of 2s"

	res := toolResults(t, rec)
	if res["local__leak"] != wantLeak {
		t.Errorf("agent_tool_result of local__leak = %q, want %q", res["local__leak"], wantLeak)
	}
	if !strings.HasPrefix(res["local__slow"], wantSlow) {
		t.Errorf("agent_tool_result of local__slow = %q, want it to start %q", res["local__slow"], wantSlow)
	}
	if !strings.Contains(string(rec.Result), "All done.") {
		t.Errorf("result = %s, want the model's answer after the timed-out call", rec.Result)
	}

	// What the model read next.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	seen := map[string]string{}
	for _, m := range reqs[1].Messages {
		if m["role"] == "tool" {
			c, _ := m["content"].(string)
			seen[m["tool_call_id"].(string)] = c
		}
	}
	var leak, slow bool
	for _, c := range seen {
		leak = leak || c == wantLeak
		slow = slow || strings.HasPrefix(c, wantSlow)
	}
	if !leak || !slow {
		t.Errorf("tool messages the model got = %q, want the cut, redacted result and the timeout error", seen)
	}

	var h historypb.History
	it := p.dial().GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	hist := historyText(t, &h)
	if !strings.Contains(hist, "[result cut at 299 of 2037 bytes]") {
		t.Error("history does not hold the cut result; the check below proves nothing")
	}
	for what, text := range map[string]string{
		"history":     hist,
		"show --json": p.ok("show", id, "--json"),
		"logs":        p.ok("logs", id),
		"model input": fmtRequests(reqs),
	} {
		if strings.Contains(text, mcptest.LeakSecret) {
			t.Errorf("the secret is in the run's %s", what)
		}
	}
}

// fmtRequests is every message the model was sent, as text.
func fmtRequests(reqs []fakellm.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		for _, m := range r.Messages {
			c, _ := m["content"].(string)
			b.WriteString(c)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
