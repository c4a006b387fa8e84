package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

func mcpSpec(p permissions.Policy) agents.Spec {
	return agents.Spec{Name: "mcper", Permissions: p, MCP: []api.MCPServerSpec{
		{Name: "fs", Transport: api.MCPStdio, Command: "fs-server"},
		{Name: "down", Transport: api.MCPHTTP, URL: "http://127.0.0.1:1/mcp"},
	}}
}

type mcpFakes struct {
	calls  []api.CallMCPToolRequest
	bounds []time.Duration // each call's StartToCloseTimeout
	closed int
	fail   bool
}

func (m *mcpFakes) register(env interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	env.RegisterActivityWithOptions(func(_ context.Context, req api.ListMCPToolsRequest) (api.ListMCPToolsResult, error) {
		return api.ListMCPToolsResult{
			Tools: []api.MCPTool{
				{Server: "fs", Name: "read", QualifiedName: "fs__read", InputSchema: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
				{Server: "fs", Name: "delete", QualifiedName: "fs__delete"},
			},
			Errors: map[string]string{"down": "connection refused"},
		}, nil
	}, activity.RegisterOptions{Name: api.ActivityListMCPTools})
	env.RegisterActivityWithOptions(func(ctx context.Context, req api.CallMCPToolRequest) (api.RunToolResult, error) {
		m.calls = append(m.calls, req)
		m.bounds = append(m.bounds, activity.GetInfo(ctx).StartToCloseTimeout)
		if m.fail {
			return api.RunToolResult{}, errors.New("broken pipe")
		}
		return api.RunToolResult{Content: "contents of " + string(req.Args)}, nil
	}, activity.RegisterOptions{Name: api.ActivityCallMCPTool})
	env.RegisterActivityWithOptions(func(context.Context, api.CloseMCPRequest) error { m.closed++; return nil },
		activity.RegisterOptions{Name: api.ActivityCloseMCP})
}

func TestMCPReadOnlyOffersOnlyAllowedTools(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: mcpSpec(permissions.Policy{MCPAllow: []string{"fs__read"}}), script: []api.ChatMessage{
		toolReply(call("fs__read", `{"path":"a"}`)), toolReply(call("fs__delete", `{"path":"a"}`)), text("ok"),
	}}
	f.register(env)
	m := &mcpFakes{}
	m.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "mcper"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, d := range f.requests[0].Tools {
		offered = append(offered, d.Name)
	}
	if got := strings.Join(offered, ","); got != "read_file,glob,fs__read" {
		t.Errorf("offered = %s; want fs__delete hidden under read_only", got)
	}
	if len(m.calls) != 1 || m.calls[0].Tool != "read" || m.calls[0].Server.Name != "fs" {
		t.Errorf("MCP calls = %+v, want only fs read", m.calls)
	}
	if got := lastToolMessage(f.requests[1]); got != `contents of {"path":"a"}` {
		t.Errorf("model got %q", got)
	}
	rec := queryRecord(t, env)
	if countEvents(rec, "mcp_server_error") != 1 || m.closed != 1 {
		t.Errorf("mcp_server_error events %d, closes %d; want 1 and 1", countEvents(rec, "mcp_server_error"), m.closed)
	}
}

func TestMCPApproveShowsArgsAndDenialNeverReachesServer(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: mcpSpec(permissions.Policy{Mode: permissions.ModeApprove}), script: []api.ChatMessage{
		toolReply(call("fs__delete", `{"path":"important.txt"}`)), text("ok"),
	}}
	f.register(env)
	m := &mcpFakes{}
	m.register(env)
	var pending api.ApprovalInfo
	env.RegisterDelayedCallback(func() {
		pending, _ = queryRecord(t, env).Approval()
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: false, Reason: "keep it"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "mcper"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if pending.Tool != "fs__delete" || pending.Capability != "mcp" || string(pending.Args) != `{"path":"important.txt"}` {
		t.Errorf("__approval__ = %+v", pending)
	}
	if len(m.calls) != 0 {
		t.Errorf("a denied call reached the server: %+v", m.calls)
	}
}

func TestMCPBrokenServerIsAResultNamingIt(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: mcpSpec(permissions.Policy{Mode: permissions.ModeAuto}), script: []api.ChatMessage{
		toolReply(call("fs__read", `{}`)), text("ok"),
	}}
	f.register(env)
	m := &mcpFakes{fail: true}
	m.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "mcper"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(m.calls) != 3 {
		t.Errorf("attempts = %d, want 3 (bounded retries)", len(m.calls))
	}
	if got := lastToolMessage(f.requests[1]); !strings.Contains(got, "MCP server fs") {
		t.Errorf("model got %q, want an error naming the server", got)
	}
}

// TestMCPServerTimeoutWidensTheCallsBound: a server timeout longer than a call's own
// 5-minute bound widens that bound, so the timeout CallMCPTool enforces is the one that
// ends a slow call; a server without one keeps the 5 minutes.
func TestMCPServerTimeoutWidensTheCallsBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout time.Duration
		want    time.Duration
	}{{0, 5 * time.Minute}, {30 * time.Second, 5 * time.Minute}, {2 * time.Hour, 2*time.Hour + time.Minute}} {
		env := newEnv(t)
		spec := mcpSpec(permissions.Policy{Mode: permissions.ModeAuto})
		spec.MCP[0].Timeout = api.Duration(tc.timeout)
		f := &agentFakes{spec: spec, script: []api.ChatMessage{toolReply(call("fs__read", `{}`)), text("ok")}}
		f.register(env)
		m := &mcpFakes{}
		m.register(env)
		env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "mcper"))
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(m.bounds) != 1 || m.bounds[0] != tc.want {
			t.Errorf("timeout %s: call bounds %v, want [%s]", tc.timeout, m.bounds, tc.want)
		}
	}
}
