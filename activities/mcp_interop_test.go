package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest"
	"github.com/nexo-temporal/nexo/internal/mcptest/officialsdk"
)

// The interop suite runs our MCP client, through the activities the workflows call,
// against servers nobody here wrote (built on the official MCP Go SDK) and against
// mcp-go's own, on every transport, and checks the protocol version the two settle on.
// The README's MCP section lists the same matrix.

const interopToken = "tok-interop-1123581321"

// interopPeer is one server the suite talks to.
type interopPeer struct {
	name string
	// start serves the peer until the test ends; requests, nil for stdio, returns what
	// an HTTP peer saw of each request.
	start func(t *testing.T) (spec api.MCPServerSpec, requests func() []mcptest.Request)
	// process: the peer runs in a process of its own (stdio, given the token in its
	// environment) and offers the pid tool.
	process bool
	// version is the protocol version client and peer must settle on.
	version string
}

func officialHTTP(o officialsdk.Options) func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
	return func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
		hs := officialsdk.StartHTTP(t, interopToken, o)
		return api.MCPServerSpec{Transport: api.MCPHTTP, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}, hs.Requests
	}
}

var interopPeers = []interopPeer{
	{name: "official-sdk/stdio", process: true, version: "2026-07-28",
		start: func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
			return api.MCPServerSpec{Transport: api.MCPStdio, Command: officialsdk.BuildServer(t), TokenEnv: "NEXO_TEST_MCP_TOKEN"}, nil
		}},
	{name: "official-sdk/sse", version: "2025-11-25",
		start: func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
			hs := officialsdk.StartSSE(t, interopToken, officialsdk.Options{})
			return api.MCPServerSpec{Transport: api.MCPSSE, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}, hs.Requests
		}},
	// mcp.NewStreamableHTTPHandler as most servers use it, with sessions: that transport
	// serves only the versions before 2026-07-28, which server/discover says.
	{name: "official-sdk/http", version: "2025-11-25", start: officialHTTP(officialsdk.Options{})},
	{name: "official-sdk/http-stateless", version: "2026-07-28", start: officialHTTP(officialsdk.Options{Stateless: true})},
	{name: "mcp-go/stdio", process: true, version: "2026-07-28",
		start: func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
			return api.MCPServerSpec{Transport: api.MCPStdio, Command: mcptest.BuildServer(t), TokenEnv: "NEXO_TEST_MCP_TOKEN"}, nil
		}},
	{name: "mcp-go/sse", version: "2026-07-28",
		start: func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
			hs := mcptest.StartSSE(t, interopToken)
			return api.MCPServerSpec{Transport: api.MCPSSE, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}, hs.Requests
		}},
	{name: "mcp-go/http", version: "2026-07-28",
		start: func(t *testing.T) (api.MCPServerSpec, func() []mcptest.Request) {
			hs := mcptest.StartHTTP(t, interopToken)
			return api.MCPServerSpec{Transport: api.MCPHTTP, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}, hs.Requests
		}},
}

func TestMCPInterop(t *testing.T) {
	for _, peer := range interopPeers {
		t.Run(peer.name, func(t *testing.T) {
			t.Setenv("NEXO_TEST_MCP_TOKEN", interopToken)
			srv, requests := peer.start(t)
			srv.Name = "peer"
			// After the server, so that its clients close first when the test ends.
			a := newMCPActivities(t)

			list := listMCP(t, a, mcpRun, srv)
			if len(list.Errors) != 0 {
				t.Fatalf("list errors = %v", list.Errors)
			}
			tools := toolNames(list)
			for tool, param := range map[string]string{"echo": "text", "add": "b", "big": "bytes", "image": "properties", "fail": "message"} {
				got, ok := tools["peer__"+tool]
				if !ok {
					t.Errorf("no peer__%s among %v", tool, list.Tools)
					continue
				}
				if got.Server != "peer" || got.Name != tool || got.Description == "" ||
					!strings.Contains(string(got.InputSchema), `"type":"object"`) || !strings.Contains(string(got.InputSchema), `"`+param+`"`) {
					t.Errorf("%s = %+v (schema %s), want its description and an object schema with %q", tool, got, got.InputSchema, param)
				}
			}
			if v := activities.MCPProtocolVersion(a, mcpRun, srv); v != peer.version {
				t.Errorf("negotiated protocol version %q, want %q", v, peer.version)
			}

			calls := []struct {
				tool, args string
				want       string
				isError    bool
			}{
				{"echo", `{"text":"hello"}`, "hello", false},
				{"add", `{"a":2,"b":3.5}`, "5.5", false},
				{"image", `{}`, "a picture\n[image/png, 1234 bytes]", false},
				{"fail", `{"message":"the disk is full"}`, "the disk is full", true},
				{"nope", `{}`, "MCP server peer: nope: ", true},
				// A server that echoes the token back does not get it into the result.
				{"echo", `{"text":"my token is ` + interopToken + `"}`, "my token is [REDACTED]", false},
			}
			for _, tt := range calls {
				res, err := callMCP(t, a, mcpRun, srv, tt.tool, tt.args)
				if err != nil {
					t.Errorf("call %s %s: %v", tt.tool, tt.args, err)
					continue
				}
				if !strings.Contains(res.Content, tt.want) || res.IsError != tt.isError {
					t.Errorf("call %s %s = %q (isError %v), want %q (isError %v)", tt.tool, tt.args, res.Content, res.IsError, tt.want, tt.isError)
				}
			}
			got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolBig, `{"bytes":300000}`)
			if note := fmt.Sprintf("\n[truncated: showing %d of 300000 bytes]", activities.MCPResultCap); !strings.HasSuffix(got, note) {
				t.Errorf("a 300000-byte result ends %q, want it capped", got[max(0, len(got)-60):])
			}

			if peer.process {
				first := serverPID(t, a, mcpRun, srv)
				if again := serverPID(t, a, mcpRun, srv); again != first {
					t.Errorf("server pid %d, then %d: the run's client was not reused", first, again)
				}
			}
			if requests == nil {
				return
			}
			// Over HTTP: the bearer token on every request, the end of the run's session
			// included, and the negotiated version in the MCP-Protocol-Version header of
			// every request after the handshake.
			if err := a.MCP.CloseMCP(context.Background(), api.CloseMCPRequest{RunID: mcpRun}); err != nil {
				t.Errorf("CloseMCP: %v", err)
			}
			reqs := requests()
			deletes := 0
			for i, r := range reqs {
				if r.Authorization != "Bearer "+interopToken {
					t.Errorf("request %d (%s %s): Authorization %q, want the bearer token", i, r.HTTPMethod, r.Method, r.Authorization)
				}
				if r.HTTPMethod == http.MethodDelete {
					deletes++
				}
			}
			// A session (streamable HTTP before 2026-07-28) is ended by a DELETE.
			if wantDelete := srv.Transport == api.MCPHTTP && peer.version < "2026-07-28"; wantDelete != (deletes > 0) {
				t.Errorf("%d DELETE requests; want one: %v", deletes, wantDelete)
			}
			for _, method := range []string{"tools/list", "tools/call"} {
				seen := mcptest.RequestsOf(reqs, method)
				if len(seen) == 0 {
					t.Errorf("the server saw no %s request", method)
				}
				for _, r := range seen {
					if r.ProtocolVersion != peer.version {
						t.Errorf("%s with MCP-Protocol-Version %q, want %q", method, r.ProtocolVersion, peer.version)
					}
				}
			}
		})
	}
}

// TestMCPInteropServerNarrowsVersions: an operator may narrow the versions an official-SDK
// server accepts; the client settles on one the server lists, or says plainly there is
// none (and does not retry what cannot work).
func TestMCPInteropServerNarrowsVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		transport string
		o         officialsdk.Options
		want      string // negotiated version; "" when none can be
	}{
		{"http legacy only", api.MCPHTTP, officialsdk.Options{Versions: []string{"2025-06-18"}}, "2025-06-18"},
		{"http stateless 2026 only", api.MCPHTTP, officialsdk.Options{Stateless: true, Versions: []string{"2026-07-28"}}, "2026-07-28"},
		{"stdio legacy only", api.MCPStdio, officialsdk.Options{Versions: []string{"2025-03-26"}}, "2025-03-26"},
		{"sse legacy only", api.MCPSSE, officialsdk.Options{Versions: []string{"2024-11-05"}}, "2024-11-05"},
		// Sessions cannot serve 2026-07-28, and the server allows nothing older.
		{"http with sessions, 2026 only", api.MCPHTTP, officialsdk.Options{Versions: []string{"2026-07-28"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := api.MCPServerSpec{Name: "peer", Transport: tt.transport}
			var requests func() []mcptest.Request
			switch tt.transport {
			case api.MCPHTTP:
				hs := officialsdk.StartHTTP(t, "", tt.o)
				srv.URL, requests = hs.URL, hs.Requests
			case api.MCPSSE:
				hs := officialsdk.StartSSE(t, "", tt.o)
				srv.URL, requests = hs.URL, hs.Requests
			default:
				srv.Command = officialsdk.BuildServer(t)
				srv.Env = map[string]string{"NEXO_TEST_MCP_VERSIONS": strings.Join(tt.o.Versions, ",")}
			}
			a := newMCPActivities(t)

			list := listMCP(t, a, mcpRun, srv)
			if tt.want == "" {
				msg := list.Errors["peer"]
				if !strings.Contains(msg, "no MCP protocol version in common") || !strings.Contains(msg, "MCP server peer") {
					t.Errorf("list errors = %v, want peer's missing common version", list.Errors)
				}
				_, err := callMCP(t, a, mcpRun, srv, "echo", `{"text":"x"}`)
				if app := appError(t, err); !app.NonRetryable() || app.Type() != api.ErrTypeBadInput {
					t.Errorf("call err = %v, want a non-retryable bad-input error", err)
				}
				return
			}
			if len(list.Errors) != 0 {
				t.Fatalf("list errors = %v", list.Errors)
			}
			if got := mustCallMCP(t, a, mcpRun, srv, "echo", `{"text":"narrow"}`); got != "narrow" {
				t.Errorf("echo = %q", got)
			}
			if v := activities.MCPProtocolVersion(a, mcpRun, srv); v != tt.want {
				t.Errorf("negotiated protocol version %q, want %q", v, tt.want)
			}
			if requests == nil {
				return
			}
			for _, r := range mcptest.RequestsOf(requests(), "tools/call") {
				if r.ProtocolVersion != tt.want {
					t.Errorf("tools/call with MCP-Protocol-Version %q, want %q", r.ProtocolVersion, tt.want)
				}
			}
		})
	}
}

// TestMCPInteropWrongToken: the official SDK's bearer middleware refuses the token; the
// run learns which server and what to check, and the token appears nowhere.
func TestMCPInteropWrongToken(t *testing.T) {
	const token = "tok-wrong-2468013579"
	t.Setenv("NEXO_TEST_MCP_TOKEN", token)
	for _, tr := range []string{api.MCPHTTP, api.MCPSSE} {
		t.Run(tr, func(t *testing.T) {
			start := officialsdk.StartHTTP
			if tr == api.MCPSSE {
				start = officialsdk.StartSSE
			}
			hs := start(t, "tok-right", officialsdk.Options{})
			srv := api.MCPServerSpec{Name: "remote", Transport: tr, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}
			a := newMCPActivities(t)

			list := listMCP(t, a, mcpRun, srv)
			msg := list.Errors["remote"]
			if !strings.Contains(msg, "MCP server remote") || !strings.Contains(msg, "authorization required") || len(list.Tools) != 0 {
				t.Errorf("list = %+v, want remote's authorization failure and no tools", list)
			}
			_, err := callMCP(t, a, mcpRun, srv, "echo", `{"text":"x"}`)
			if app := appError(t, err); !app.NonRetryable() || !strings.Contains(err.Error(), "token_env") {
				t.Errorf("call err = %v, want a non-retryable error pointing at the token", err)
			}
			for _, s := range []string{msg, err.Error()} {
				if strings.Contains(s, token) {
					t.Errorf("the token leaked: %s", s)
				}
			}
			if len(hs.Calls()) != 0 {
				t.Errorf("the server ran calls: %v", hs.Calls())
			}
		})
	}
}

// TestMCPInteropServerRedeployedWithOtherVersions: a run's client agreed on 2026-07-28;
// the server behind the URL is then replaced by one that serves only older versions. The
// refused call is a retryable activity error (the tool did not run), and the retry
// negotiates again instead of failing for as long as the client is cached.
func TestMCPInteropServerRedeployedWithOtherVersions(t *testing.T) {
	t.Parallel()
	hs := officialsdk.StartHTTP(t, "", officialsdk.Options{Stateless: true})
	srv := api.MCPServerSpec{Name: "peer", Transport: api.MCPHTTP, URL: hs.URL}
	a := newMCPActivities(t)
	if got := mustCallMCP(t, a, mcpRun, srv, "echo", `{"text":"before"}`); got != "before" {
		t.Fatalf("echo = %q", got)
	}
	if v := activities.MCPProtocolVersion(a, mcpRun, srv); v != "2026-07-28" {
		t.Fatalf("negotiated %q before the redeploy, want 2026-07-28", v)
	}

	hs.Redeploy(officialsdk.Options{})
	calls := len(hs.Calls())
	_, err := callMCP(t, a, mcpRun, srv, "echo", `{"text":"during"}`)
	if app := appError(t, err); app.NonRetryable() || !strings.Contains(err.Error(), "no longer accepts protocol 2026-07-28") {
		t.Errorf("call after the redeploy: err = %v, want a retryable error saying the version is refused", err)
	}
	if len(hs.Calls()) != calls {
		t.Errorf("the refused call ran: %v", hs.Calls()[calls:])
	}
	// The activity's retry.
	if got := mustCallMCP(t, a, mcpRun, srv, "echo", `{"text":"after"}`); got != "after" {
		t.Errorf("echo on retry = %q", got)
	}
	if v := activities.MCPProtocolVersion(a, mcpRun, srv); v != "2025-11-25" {
		t.Errorf("negotiated %q after the redeploy, want 2025-11-25", v)
	}

	// A refused list drops the client the same way: the next list negotiates again.
	hs.Redeploy(officialsdk.Options{Stateless: true})
	const run = "run-relist"
	if list := listMCP(t, a, run, srv); len(list.Errors) != 0 || activities.MCPProtocolVersion(a, run, srv) != "2026-07-28" {
		t.Fatalf("list = %+v at %q, want the tools at 2026-07-28", list, activities.MCPProtocolVersion(a, run, srv))
	}
	hs.Redeploy(officialsdk.Options{Stateless: true, Versions: []string{"2025-11-25"}})
	if list := listMCP(t, a, run, srv); !strings.Contains(list.Errors["peer"], "unsupported protocol version") {
		t.Errorf("list after the redeploy = %+v, want the refused version", list)
	}
	if list := listMCP(t, a, run, srv); len(list.Errors) != 0 || len(list.Tools) == 0 {
		t.Errorf("the next list = %+v, want the tools", list)
	}
	if v := activities.MCPProtocolVersion(a, run, srv); v != "2025-11-25" {
		t.Errorf("negotiated %q after the second redeploy, want 2025-11-25", v)
	}
}
