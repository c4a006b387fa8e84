// Package officialsdk holds MCP servers built on the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk), a peer nobody here wrote, for the interop
// tests: the tools of package mcptest (same names, same answers) served over stdio by a
// binary of its own (officialsdkserver, built by BuildServer), and over streamable HTTP
// or SSE from the test process behind a bearer token the SDK's own middleware checks.
// Nothing here is linked into Nexo's binaries.
package officialsdk

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// Options shape a test server.
type Options struct {
	// Process adds the tools that only make sense in a server process of its own: pid and
	// whoami_env.
	Process bool
	// Stateless serves streamable HTTP without sessions (mcp.StreamableHTTPOptions), the
	// only way this SDK serves protocol 2026-07-28 over HTTP.
	Stateless bool
	// Versions, when set, narrows the protocol versions the server accepts
	// (mcp.ServerOptions.SupportedProtocolVersions), as a server operator may.
	Versions []string
	// OnCall, when set, is told of every tool call before it runs.
	OnCall func(mcptest.Call)
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

type failIn struct {
	Message string `json:"message,omitempty"`
}

type leakIn struct {
	Repeat int `json:"repeat"`
}

type slowIn struct {
	MS int `json:"ms"`
}

type nameIn struct {
	Name string `json:"name"`
}

type noIn struct{}

// NewServer returns an official-SDK MCP server with the test tools.
func NewServer(o Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "nexo-officialsdk-test", Version: "1.0.0"},
		&mcp.ServerOptions{SupportedProtocolVersions: o.Versions})
	record := func(req *mcp.CallToolRequest, args map[string]any) {
		if o.OnCall != nil {
			o.OnCall(mcptest.Call{Tool: req.Params.Name, Args: args})
		}
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolEcho, Description: "Returns its text."},
		func(_ context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"text": in.Text})
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolAdd, Description: "Adds two numbers."},
		func(_ context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"a": in.A, "b": in.B})
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolBig, Description: "Returns that many bytes of x."},
		func(_ context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"bytes": in.Bytes})
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolImage, Description: "Returns a picture."},
		func(_ context.Context, req *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			record(req, nil)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a picture"},
				&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, mcptest.ImageBytes)},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolFail, Description: "Fails with the message."},
		func(_ context.Context, req *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"message": in.Message})
			msg := in.Message
			if msg == "" {
				msg = "it failed"
			}
			// An error from a typed handler is an isError result the client sees.
			return nil, nil, errors.New(msg)
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolLeak, Description: "Returns a secret-looking key and long text."},
		func(_ context.Context, req *mcp.CallToolRequest, in leakIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"repeat": in.Repeat})
			return text(mcptest.LeakText(in.Repeat)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolSlow, Description: "Answers after ms milliseconds."},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"ms": in.MS})
			return text(mcptest.Sleep(ctx, in.MS)), nil, nil
		})
	if !o.Process {
		return s
	}
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolPID, Description: "Returns the server's process id."},
		func(_ context.Context, req *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			record(req, nil)
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: mcptest.ToolWhoamiEnv, Description: "Tells whether an environment variable is set."},
		func(_ context.Context, req *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			record(req, map[string]any{"name": in.Name})
			if _, ok := os.LookupEnv(in.Name); ok {
				return text(in.Name + "=set"), nil, nil
			}
			return text(in.Name + "=unset"), nil, nil
		})
	return s
}

// BuildServer builds the stdio server (package officialsdkserver) once per test binary
// and returns the path of the executable.
func BuildServer(t testing.TB) string {
	t.Helper()
	return mcptest.Binary(t, "github.com/nexo-temporal/nexo/internal/mcptest/officialsdk/officialsdkserver")
}

// HTTPServer is an official-SDK server over HTTP (streamable or SSE).
type HTTPServer struct {
	// URL is the address to give a client.
	URL string

	mu      sync.Mutex
	calls   []mcptest.Call
	reqs    []mcptest.Request
	handler http.Handler // streamable HTTP: the server deployed now
}

// StartHTTP serves the test tools with mcp.NewStreamableHTTPHandler until the test ends.
// With a token, the SDK's auth.RequireBearerToken answers 401 to a request without
// "Authorization: Bearer <token>".
func StartHTTP(t testing.TB, token string, o Options) *HTTPServer {
	h := &HTTPServer{}
	h.Redeploy(o)
	ts := httptest.NewServer(h.guard(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		next := h.handler
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})))
	t.Cleanup(ts.Close)
	h.URL = ts.URL + "/mcp"
	return h
}

// Redeploy replaces a streamable HTTP server by a new one with options o at the same
// address, as an operator's upgrade does: the sessions of the old one are gone.
func (h *HTTPServer) Redeploy(o Options) {
	o.OnCall = h.record
	srv := NewServer(o)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: o.Stateless})
	h.mu.Lock()
	h.handler = handler
	h.mu.Unlock()
}

// StartSSE serves the test tools with mcp.NewSSEHandler (the older HTTP+SSE transport).
func StartSSE(t testing.TB, token string, o Options) *HTTPServer {
	h := &HTTPServer{}
	o.OnCall = h.record
	srv := NewServer(o)
	handler := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h.guard(token, handler))
	t.Cleanup(func() {
		// An SSE stream stays open until the client or the server ends it.
		ts.CloseClientConnections()
		ts.Close()
	})
	h.URL = ts.URL + "/sse"
	return h
}

// guard records each request and, with a token, puts the SDK's bearer-token middleware in front of next.
func (h *HTTPServer) guard(token string, next http.Handler) http.Handler {
	if token != "" {
		verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
			if got != token {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
		}
		next = auth.RequireBearerToken(verify, nil)(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := mcptest.ReadRequest(r)
		h.mu.Lock()
		h.reqs = append(h.reqs, seen)
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *HTTPServer) record(c mcptest.Call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, c)
}

// Calls returns the tool calls the server ran.
func (h *HTTPServer) Calls() []mcptest.Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]mcptest.Call(nil), h.calls...)
}

// Requests returns what the server saw of every request, in order.
func (h *HTTPServer) Requests() []mcptest.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]mcptest.Request(nil), h.reqs...)
}
