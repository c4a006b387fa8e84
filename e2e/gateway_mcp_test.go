package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// withHeaders adds headers to every request of an MCP client.
type withHeaders map[string]string

func (h withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// gatewayMCP connects the official MCP Go SDK's client to the platform's gateway /mcp with
// token ("" for none); the session closes when the test ends.
func gatewayMCP(t *testing.T, p *platform, token string) (*mcp.ClientSession, error) {
	t.Helper()
	h := withHeaders{}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return connectMCP(t, fmt.Sprintf("http://127.0.0.1:%d/mcp", p.gateway), h)
}

// connectMCP connects the official MCP Go SDK's client to endpoint, sending headers.
func connectMCP(t *testing.T, endpoint string, headers withHeaders) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "nexo-e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: headers}, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

// gwMCPCall calls a tool and returns its text and whether it is a tool error.
func gwMCPCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// mcpRunOutcome is the part of run_<agent>'s and get_run's answer the test reads.
type mcpRunOutcome struct {
	ID       string          `json:"id"`
	Status   api.Status      `json:"status"`
	Result   json.RawMessage `json:"result"`
	Error    *string         `json:"error"`
	Approval *struct {
		CallID string `json:"call_id"`
		Tool   string `json:"tool"`
	} `json:"approval"`
}

// TestGatewayMCPServer: `worker --dev` with two tokens serves its agents as an MCP server
// at /mcp, driven by the official MCP Go SDK's client: it lists the tools, runs helper and
// waits for its answer, starts scribe (approve mode) without waiting, finds its pending
// write_file in list_approvals, approves it with decide_approval and reads the result with
// get_run. No token is refused at connect (401); the read-only token gets tool errors
// naming the scope it lacks, and acts on nothing; unknown runs and calls are named.
func TestGatewayMCPServer(t *testing.T) {
	t.Parallel()
	const (
		opsSecret    = "ops-mcp-e2e-secret-0123456789"
		viewerSecret = "viewer-mcp-e2e-secret-0123456789"
	)
	write, _ := json.Marshal(map[string]string{"path": "mcp.md", "content": "from MCP"})
	model := fakellm.New(
		fakellm.Reply{Prompt: "say hello", Content: "Hello from the helper."},
		fakellm.Reply{Prompt: "write the note", ToolCalls: []fakellm.Call{{Name: "write_file", Arguments: write}}},
		fakellm.Reply{Prompt: "write the note", Content: "Wrote mcp.md."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake}
agents:
  - name: helper
    sandbox: {type: virtual}
  - name: scribe
    permissions: {mode: approve}
    sandbox: {type: virtual}
gateway:
  tokens:
    - {name: ops,    token_env: NEXO_OPS_TOKEN,    scopes: [read, operate, approve]}
    - {name: viewer, token_env: NEXO_VIEWER_TOKEN, scopes: [read]}
`)
	p.extraEnv = append(p.extraEnv, "NEXO_OPS_TOKEN="+opsSecret, "NEXO_VIEWER_TOKEN="+viewerSecret)
	p.start()

	// Refused: no token, a wrong one.
	for name, token := range map[string]string{"no token": "", "wrong token": "not-a-token-of-this-gateway"} {
		if _, err := gatewayMCP(t, p, token); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("connect with %s: %v, want Unauthorized", name, err)
		}
	}

	// The client configuration docs/http-api.md shows, on this platform's port, with the
	// token from the environment variable it names.
	var clientCfg struct {
		Servers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(readmeBlock(t, "json", `"mcpServers"`)), &clientCfg); err != nil {
		t.Fatalf("docs' MCP client configuration: %v", err)
	}
	doc, ok := clientCfg.Servers["nexo"]
	if !ok || doc.Type != "http" || !strings.HasPrefix(doc.URL, "http://127.0.0.1:8234/") {
		t.Fatalf("docs' MCP client configuration: %+v, want server nexo of type http on the gateway's default address", clientCfg)
	}
	headers := withHeaders{}
	for k, v := range doc.Headers {
		headers[k] = os.Expand(v, func(name string) string {
			if name != "NEXO_OPS_TOKEN" {
				t.Fatalf("docs' MCP client configuration reads $%s; the test has NEXO_OPS_TOKEN", name)
			}
			return opsSecret
		})
	}
	ops, err := connectMCP(t, strings.Replace(doc.URL, ":8234", fmt.Sprintf(":%d", p.gateway), 1), headers)
	if err != nil {
		t.Fatalf("connect as the docs' client configuration says, with the ops token: %v\n%s", err, p.output())
	}
	tools, err := ops.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"decide_approval", "get_run", "list_approvals", "run_helper", "run_scribe"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	// run_helper waits for the answer.
	text, isErr := gwMCPCall(t, ops, "run_helper", map[string]any{"prompt": "please say hello"})
	var helper mcpRunOutcome
	if err := json.Unmarshal([]byte(text), &helper); err != nil || isErr || helper.Status != api.StatusDone ||
		!strings.Contains(string(helper.Result), "Hello from the helper.") {
		t.Fatalf("run_helper = %s (error %v), want done with the helper's answer\n%s", text, isErr, p.output())
	}
	rec := p.record(helper.ID)
	var in api.AgentRunInput
	if err := json.Unmarshal(rec.Payload, &in); err != nil || rec.Workflow != api.WorkflowAgentRun || in.Agent != "helper" || in.Prompt != "please say hello" {
		t.Errorf("run %s: %s %s, want an AgentRun of helper on the prompt", helper.ID, rec.Workflow, rec.Payload)
	}

	// The read-only token: every tool that acts is refused, naming the scope.
	viewer, err := gatewayMCP(t, p, viewerSecret)
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := gwMCPCall(t, viewer, "run_scribe", map[string]any{"prompt": "write the note"}); !isErr ||
		!strings.Contains(text, "token viewer lacks scope operate, which tool run_scribe needs (it has: read)") {
		t.Errorf("viewer's run_scribe: %s (error %v), want a tool error naming scope operate", text, isErr)
	}

	// run_scribe without waiting: the run id at once, while the run goes on to its gate.
	text, isErr = gwMCPCall(t, ops, "run_scribe", map[string]any{"prompt": "please write the note", "wait": false})
	var started struct{ ID, Agent string }
	if err := json.Unmarshal([]byte(text), &started); err != nil || isErr || started.ID == "" || started.Agent != "scribe" {
		t.Fatalf("run_scribe with wait false = %s (error %v), want the run id", text, isErr)
	}
	run := started.ID

	// Its pending call, through list_approvals (visibility indexes it within moments).
	var row struct{ Run, CallID, Tool string }
	for deadline := time.Now().Add(30 * time.Second); row.CallID == ""; time.Sleep(100 * time.Millisecond) {
		text, isErr = gwMCPCall(t, ops, "list_approvals", map[string]any{"agent": "scribe"})
		var list struct {
			Approvals []struct {
				Run    string `json:"run"`
				CallID string `json:"call_id"`
				Tool   string `json:"tool"`
			} `json:"approvals"`
		}
		if err := json.Unmarshal([]byte(text), &list); err != nil || isErr {
			t.Fatalf("list_approvals = %s (error %v)", text, isErr)
		}
		for _, r := range list.Approvals {
			if r.Run == run {
				row.Run, row.CallID, row.Tool = r.Run, r.CallID, r.Tool
			}
		}
		if row.CallID == "" && time.Now().After(deadline) {
			t.Fatalf("list_approvals never listed run %s: %s\n%s", run, text, p.output())
		}
	}
	if row.Tool != "write_file" {
		t.Errorf("pending call %+v, want write_file", row)
	}
	if text, isErr := gwMCPCall(t, viewer, "list_approvals", nil); isErr || !strings.Contains(text, run) {
		t.Errorf("viewer's list_approvals (scope read): %s (error %v), want run %s", text, isErr, run)
	}
	if text, isErr := gwMCPCall(t, viewer, "decide_approval", map[string]any{"run": run, "call_id": row.CallID, "decision": "approve"}); !isErr ||
		!strings.Contains(text, "token viewer lacks scope approve") {
		t.Errorf("viewer's decide_approval: %s (error %v), want a tool error naming scope approve", text, isErr)
	}
	if rec := p.record(run); rec.Status != api.StatusSuspended {
		t.Fatalf("after the viewer's refused decision run %s is %s, want still suspended", run, rec.Status)
	}

	// Unknown run and call are named.
	unknown := "019aaaaa-0000-7000-8000-000000000000"
	if text, isErr := gwMCPCall(t, ops, "get_run", map[string]any{"id": unknown}); !isErr || !strings.Contains(text, "no run "+unknown) {
		t.Errorf("get_run of an unknown run: %s (error %v)", text, isErr)
	}
	if text, isErr := gwMCPCall(t, ops, "decide_approval", map[string]any{"run": run, "call_id": "9.9", "decision": "approve"}); !isErr || !strings.Contains(text, "9.9") {
		t.Errorf("decide_approval of an unknown call: %s (error %v), want a tool error naming 9.9", text, isErr)
	}

	// Approve it, then read the result.
	text, isErr = gwMCPCall(t, ops, "decide_approval", map[string]any{"run": run, "call_id": row.CallID, "decision": "approve", "by": "ada"})
	if isErr || !strings.Contains(text, "approved tool call "+row.CallID) || !strings.Contains(text, `"by":"ops (ada)"`) {
		t.Fatalf("decide_approval = %s (error %v)", text, isErr)
	}
	var got mcpRunOutcome
	for deadline := time.Now().Add(60 * time.Second); got.Status != api.StatusDone; time.Sleep(100 * time.Millisecond) {
		text, isErr = gwMCPCall(t, viewer, "get_run", map[string]any{"id": run})
		got = mcpRunOutcome{}
		if err := json.Unmarshal([]byte(text), &got); err != nil || isErr || got.Status.Closed() && got.Status != api.StatusDone {
			t.Fatalf("get_run = %s (error %v)", text, isErr)
		}
		if got.Status != api.StatusDone && time.Now().After(deadline) {
			t.Fatalf("run %s not done 60s after the approval: %s", run, text)
		}
	}
	if !strings.Contains(string(got.Result), "Wrote mcp.md.") || got.Approval != nil {
		t.Errorf("get_run = %s, want the scribe's answer and nothing pending", text)
	}
	if rec := p.record(run); countEvents(rec, "approval_requested") != 1 || !strings.Contains(string(rec.Result), "Wrote mcp.md.") {
		t.Errorf("run %s's record: %d approval_requested, result %s", run, countEvents(rec, "approval_requested"), rec.Result)
	}
}
