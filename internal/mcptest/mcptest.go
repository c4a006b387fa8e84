// Package mcptest holds the MCP servers the tests talk to, built with mcp-go's server
// package: one served over stdio by a binary of its own (mcptestserver, built by
// BuildServer), and the same tools served over streamable HTTP or SSE from the test
// process, behind a bearer token. Nothing here is linked into Nexo's binaries.
package mcptest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tool names of the test servers.
const (
	ToolEcho      = "echo"       // {text} → the text
	ToolAdd       = "add"        // {a, b} → their sum
	ToolBig       = "big"        // {bytes} → that many "x"
	ToolImage     = "image"      // → a caption and a 1234-byte PNG
	ToolFail      = "fail"       // {message} → an error result (isError) with the message
	ToolCrash     = "crash"      // {once_file?} exits the server process mid-call (stdio only)
	ToolPID       = "pid"        // → the server's process id (stdio only)
	ToolWhoamiEnv = "whoami_env" // {name} → "NAME=set" or "NAME=unset" (stdio only)
	ToolLeak      = "leak"       // {repeat} → LeakText(repeat): a secret-looking key, then long text
	ToolSlow      = "slow"       // {ms} → "slept" after that many milliseconds (or the call's end)
)

// LeakSecret is the secret-looking key the leak tool returns, twice.
const LeakSecret = "sk-live-4f9a8b7c6d5e4f3a2b1c"

// LeakText is what the leak tool returns: LeakSecret in two places around repeat copies
// of "ü" (two bytes each, so a cut by bytes can fall inside a character).
func LeakText(repeat int) string {
	return "api_key=" + LeakSecret + "\n" + strings.Repeat("ü", repeat) + "\nagain: " + LeakSecret
}

// Sleep waits ms milliseconds or until ctx ends, for the slow tool.
func Sleep(ctx context.Context, ms int) string {
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return "slept"
	case <-ctx.Done():
		return "cancelled"
	}
}

// ImageBytes is the size of the image the image tool returns.
const ImageBytes = 1234

// Call is one tool call a server received.
type Call struct {
	Tool string
	Args map[string]any
}

// Options shape a test server.
type Options struct {
	// Process adds the tools that only make sense in a server process of its own: crash,
	// pid and whoami_env.
	Process bool
	// OnCall, when set, is told of every tool call before it runs.
	OnCall func(Call)
}

// NewServer returns an MCP server with the test tools.
func NewServer(o Options) *server.MCPServer {
	s := server.NewMCPServer("nexo-mcptest", "1.0.0", server.WithToolCapabilities(false))
	add := func(t mcp.Tool, h server.ToolHandlerFunc) {
		s.AddTool(t, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if o.OnCall != nil {
				o.OnCall(Call{Tool: req.Params.Name, Args: req.GetArguments()})
			}
			return h(ctx, req)
		})
	}
	add(mcp.NewTool(ToolEcho, mcp.WithDescription("Returns its text."), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	add(mcp.NewTool(ToolAdd, mcp.WithDescription("Adds two numbers."), mcp.WithNumber("a", mcp.Required()), mcp.WithNumber("b", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.FormatFloat(req.GetFloat("a", 0)+req.GetFloat("b", 0), 'f', -1, 64)), nil
		})
	add(mcp.NewTool(ToolBig, mcp.WithDescription("Returns that many bytes of x."), mcp.WithNumber("bytes", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.Repeat("x", req.GetInt("bytes", 0))), nil
		})
	add(mcp.NewTool(ToolImage, mcp.WithDescription("Returns a picture.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			img := base64.StdEncoding.EncodeToString(make([]byte, ImageBytes))
			return mcp.NewToolResultImage("a picture", img, "image/png"), nil
		})
	add(mcp.NewTool(ToolFail, mcp.WithDescription("Fails with the message."), mcp.WithString("message")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError(req.GetString("message", "it failed")), nil
		})
	add(mcp.NewTool(ToolLeak, mcp.WithDescription("Returns a secret-looking key and long text."), mcp.WithNumber("repeat", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(LeakText(req.GetInt("repeat", 0))), nil
		})
	add(mcp.NewTool(ToolSlow, mcp.WithDescription("Answers after ms milliseconds."), mcp.WithNumber("ms", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(Sleep(ctx, req.GetInt("ms", 0))), nil
		})
	if !o.Process {
		return s
	}
	add(mcp.NewTool(ToolCrash, mcp.WithDescription("Exits the server mid-call; with once_file, only if that file does not exist yet (it creates it)."),
		mcp.WithString("once_file")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if f := req.GetString("once_file", ""); f != "" {
				if _, err := os.Stat(f); err == nil {
					return mcp.NewToolResultText("survived"), nil
				}
				_ = os.WriteFile(f, nil, 0o644)
			}
			os.Exit(3)
			return nil, nil
		})
	add(mcp.NewTool(ToolPID, mcp.WithDescription("Returns the server's process id.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	add(mcp.NewTool(ToolWhoamiEnv, mcp.WithDescription("Tells whether an environment variable is set."), mcp.WithString("name", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("name", "")
			if _, ok := os.LookupEnv(name); ok {
				return mcp.NewToolResultText(name + "=set"), nil
			}
			return mcp.NewToolResultText(name + "=unset"), nil
		})
	return s
}

// Binary builds the main package pkg once per test binary (per pkg) and returns the path
// of the executable: the stdio servers the tests start as a worker would.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	buildsMu.Lock()
	b, ok := builds[pkg]
	if !ok {
		b = &built{}
		builds[pkg] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "nexo-mcptest-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, path.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

type built struct {
	once sync.Once
	path string
	err  error
}

// Main runs a package's tests and then removes the executables Binary built for them (they
// live in the system temp dir, one directory per package built): call it from TestMain as
// os.Exit(mcptest.Main(m)).
func Main(m interface{ Run() int }) int {
	code := m.Run()
	buildsMu.Lock()
	defer buildsMu.Unlock()
	for _, b := range builds {
		if b.path != "" {
			_ = os.RemoveAll(filepath.Dir(b.path))
		}
	}
	return code
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*built{}
)

// BuildServer builds the stdio server (package mcptestserver) and returns its path.
func BuildServer(t testing.TB) string {
	t.Helper()
	return Binary(t, "github.com/nexo-temporal/nexo/internal/mcptest/mcptestserver")
}

// HTTPServer is a test server over HTTP (streamable or SSE) that wants a bearer token.
type HTTPServer struct {
	// URL is the address to give a client: .../mcp (streamable HTTP) or .../sse.
	URL   string
	token string

	mu    sync.Mutex
	auth  []string
	reqs  []Request
	calls []Call
}

// Request is what a test HTTP server saw of one request.
type Request struct {
	// HTTPMethod is GET, POST or DELETE.
	HTTPMethod string
	// Method is the JSON-RPC method of a POSTed request ("" for a GET, a DELETE, or a
	// POSTed notification's or response's lack of one).
	Method string
	// ProtocolVersion is the MCP-Protocol-Version header.
	ProtocolVersion string
	// Authorization is the Authorization header.
	Authorization string
}

// ReadRequest reads what r says of itself, leaving its body for the next handler.
func ReadRequest(r *http.Request) Request {
	req := Request{HTTPMethod: r.Method, ProtocolVersion: r.Header.Get("MCP-Protocol-Version"), Authorization: r.Header.Get("Authorization")}
	if r.Method != http.MethodPost || r.Body == nil {
		return req
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return req
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &msg) == nil && len(msg.ID) > 0 {
		req.Method = msg.Method
	}
	return req
}

// RequestsOf returns the requests among reqs for JSON-RPC method.
func RequestsOf(reqs []Request, method string) []Request {
	var out []Request
	for _, r := range reqs {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// StartHTTP serves the test tools over streamable HTTP until the test ends. A request
// without "Authorization: Bearer <token>" is answered 401 (any request passes when token
// is empty).
func StartHTTP(t testing.TB, token string) *HTTPServer {
	h := &HTTPServer{token: token}
	ts := httptest.NewServer(h.guard(server.NewStreamableHTTPServer(NewServer(Options{OnCall: h.record}))))
	t.Cleanup(ts.Close)
	h.URL = ts.URL + "/mcp"
	return h
}

// StartSSE is StartHTTP over the older HTTP+SSE transport.
func StartSSE(t testing.TB, token string) *HTTPServer {
	h := &HTTPServer{token: token}
	ts := httptest.NewUnstartedServer(nil)
	ts.Start()
	sse := server.NewSSEServer(NewServer(Options{OnCall: h.record}), server.WithBaseURL(ts.URL))
	ts.Config.Handler = h.guard(sse)
	t.Cleanup(func() {
		// An SSE stream stays open until the server ends it; httptest's Close waits for it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sse.Shutdown(ctx)
		ts.CloseClientConnections()
		ts.Close()
	})
	h.URL = ts.URL + "/sse"
	return h
}

func (h *HTTPServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := ReadRequest(r)
		got := seen.Authorization
		h.mu.Lock()
		h.auth = append(h.auth, got)
		h.reqs = append(h.reqs, seen)
		h.mu.Unlock()
		if h.token != "" && got != "Bearer "+h.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *HTTPServer) record(c Call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, c)
}

// Calls returns the tool calls the server ran.
func (h *HTTPServer) Calls() []Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Call(nil), h.calls...)
}

// Requests returns what the server saw of every request, in order.
func (h *HTTPServer) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.reqs...)
}

// AuthHeaders returns the Authorization header of every request, in order.
func (h *HTTPServer) AuthHeaders() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auth...)
}
