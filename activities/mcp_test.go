package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	tlog "go.temporal.io/sdk/log"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest"
)

const mcpRun = "run-mcp"

// newMCPActivities returns activities whose MCP clients are closed when the test ends.
func newMCPActivities(t *testing.T) *activities.Activities {
	t.Helper()
	a := activities.New(activities.Deps{})
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func stdioServer(t *testing.T, name string) api.MCPServerSpec {
	return api.MCPServerSpec{Name: name, Transport: api.MCPStdio, Command: mcptest.BuildServer(t)}
}

func callMCP(t *testing.T, a *activities.Activities, run string, spec api.MCPServerSpec, tool, args string) (api.RunToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return a.MCP.CallMCPTool(ctx, api.CallMCPToolRequest{RunID: run, CallID: "1.1", Server: spec, Tool: tool, Args: json.RawMessage(args)})
}

// mustCallMCP calls a tool that must answer without error.
func mustCallMCP(t *testing.T, a *activities.Activities, run string, spec api.MCPServerSpec, tool, args string) string {
	t.Helper()
	res, err := callMCP(t, a, run, spec, tool, args)
	if err != nil {
		t.Fatalf("call %s %s: %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("call %s %s: error result %q", tool, args, res.Content)
	}
	return res.Content
}

func listMCP(t *testing.T, a *activities.Activities, run string, servers ...api.MCPServerSpec) api.ListMCPToolsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := a.MCP.ListMCPTools(ctx, api.ListMCPToolsRequest{RunID: run, Servers: servers})
	if err != nil {
		t.Fatalf("ListMCPTools: %v", err)
	}
	return res
}

func serverPID(t *testing.T, a *activities.Activities, run string, spec api.MCPServerSpec) int {
	t.Helper()
	pid, err := strconv.Atoi(mustCallMCP(t, a, run, spec, mcptest.ToolPID, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// reaped reports whether process pid is gone for good: not running and not a zombie
// waiting for its parent.
func reaped(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// gone reports whether pid no longer runs (gone, or a zombie some other parent owns).
func gone(pid int) bool {
	if reaped(pid) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 15s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("err = %v (%T), want a *temporal.ApplicationError", err, err)
	}
	return app
}

func toolNames(res api.ListMCPToolsResult) map[string]api.MCPTool {
	m := map[string]api.MCPTool{}
	for _, t := range res.Tools {
		m[t.QualifiedName] = t
	}
	return m
}

func TestMCPStdioListAndCall(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	list := listMCP(t, a, mcpRun, srv)
	if len(list.Errors) != 0 {
		t.Fatalf("errors = %v", list.Errors)
	}
	tools := toolNames(list)
	echo, ok := tools["srv__echo"]
	if !ok {
		t.Fatalf("no srv__echo among %v", tools)
	}
	if echo.Server != "srv" || echo.Name != "echo" || echo.Description != "Returns its text." {
		t.Errorf("echo = %+v", echo)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil || len(schema.Required) != 1 {
		t.Errorf("echo schema = %s (%v)", echo.InputSchema, err)
	}
	for _, name := range []string{"srv__add", "srv__crash", "srv__whoami_env"} {
		if _, ok := tools[name]; !ok {
			t.Errorf("no %s among the tools", name)
		}
	}

	pid := serverPID(t, a, mcpRun, srv)
	tests := []struct {
		tool, args string
		want       string
		isError    bool
	}{
		{"echo", `{"text":"hello"}`, "hello", false},
		{"add", `{"a":2,"b":3.5}`, "5.5", false},
		{"image", `{}`, "a picture\n[image/png, 1234 bytes]", false},
		{"fail", `{"message":"the disk is full"}`, "the disk is full", true},
		{"nope", `{}`, "MCP server srv: nope: ", true},
		{"echo", `[1,2]`, "arguments are not a JSON object", true},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			res, err := callMCP(t, a, mcpRun, srv, tt.tool, tt.args)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !strings.Contains(res.Content, tt.want) || res.IsError != tt.isError {
				t.Errorf("result = %q (isError %v), want %q (isError %v)", res.Content, res.IsError, tt.want, tt.isError)
			}
		})
	}
	if again := serverPID(t, a, mcpRun, srv); again != pid {
		t.Errorf("server pid %d, then %d: the run's client was not reused", pid, again)
	}
}

func TestMCPStdioMinimalEnvironment(t *testing.T) {
	t.Setenv("NEXO_TEST_WORKER_SECRET", "sk-worker")
	t.Setenv("NEXO_TEST_STDIO_TOKEN", "tok-stdio-123")
	a := newMCPActivities(t)
	srv := stdioServer(t, "env")
	srv.Env = map[string]string{"DECLARED": "1"}
	srv.TokenEnv = "NEXO_TEST_STDIO_TOKEN"
	for name, want := range map[string]string{
		"NEXO_TEST_WORKER_SECRET": "unset", // the worker's environment stays the worker's
		"DECLARED":                "set",   // env of the declaration
		"NEXO_TEST_STDIO_TOKEN":   "set",   // token_env: passed by name, value from the worker
		"PATH":                    "set",
		"HOME":                    "set",
	} {
		if got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolWhoamiEnv, `{"name":"`+name+`"}`); got != name+"="+want {
			t.Errorf("whoami_env %s = %q, want %s=%s", name, got, name, want)
		}
	}
}

func TestMCPOverHTTPWithBearerToken(t *testing.T) {
	const token = "tok-9f8e7d6c5b4a"
	for _, tr := range []string{api.MCPHTTP, api.MCPSSE} {
		t.Run(tr, func(t *testing.T) {
			t.Setenv("NEXO_TEST_MCP_TOKEN", token)
			a := newMCPActivities(t)
			start := mcptest.StartHTTP
			if tr == api.MCPSSE {
				start = mcptest.StartSSE
			}
			hs := start(t, token)
			srv := api.MCPServerSpec{Name: "remote", Transport: tr, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN",
				Headers: map[string]string{"X-Team": "blue"}}

			list := listMCP(t, a, mcpRun, srv)
			if len(list.Errors) != 0 {
				t.Fatalf("errors = %v", list.Errors)
			}
			if _, ok := toolNames(list)["remote__add"]; !ok {
				t.Fatalf("no remote__add among %v", list.Tools)
			}
			if _, ok := toolNames(list)["remote__crash"]; ok {
				t.Error("the in-process server offers crash")
			}
			if got := mustCallMCP(t, a, mcpRun, srv, "add", `{"a":40,"b":2}`); got != "42" {
				t.Errorf("add = %q", got)
			}
			// A server that echoes the token back does not get it into the result.
			if got := mustCallMCP(t, a, mcpRun, srv, "echo", `{"text":"my token is `+token+`"}`); got != "my token is [REDACTED]" {
				t.Errorf("echo of the token = %q, want it redacted", got)
			}
			auth := hs.AuthHeaders()
			if len(auth) == 0 {
				t.Fatal("the server saw no request")
			}
			for i, h := range auth {
				if h != "Bearer "+token {
					t.Fatalf("request %d: Authorization %q, want the bearer token", i, h)
				}
			}
			if len(hs.Calls()) != 2 {
				t.Errorf("server calls = %v, want 2", hs.Calls())
			}
		})
	}
}

func TestMCPWrongTokenNeverLeaks(t *testing.T) {
	const token = "tok-wrong-5566778899"
	t.Setenv("NEXO_TEST_MCP_TOKEN", token)
	a := newMCPActivities(t)
	hs := mcptest.StartHTTP(t, "tok-right")
	srv := api.MCPServerSpec{Name: "remote", Transport: api.MCPHTTP, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}

	list := listMCP(t, a, mcpRun, srv)
	msg := list.Errors["remote"]
	if !strings.Contains(msg, "MCP server remote") || !strings.Contains(msg, "authorization required") {
		t.Errorf("errors = %v, want remote's authorization failure", list.Errors)
	}
	_, err := callMCP(t, a, mcpRun, srv, "echo", `{"text":"x"}`)
	if app := appError(t, err); !app.NonRetryable() || !strings.Contains(err.Error(), "token_env") {
		t.Errorf("err = %v (non-retryable %v), want a non-retryable error pointing at the token", err, app.NonRetryable())
	}
	for _, s := range []string{msg, err.Error()} {
		if strings.Contains(s, token) {
			t.Errorf("the token leaked: %s", s)
		}
	}
}

func TestMCPMissingTokenVariable(t *testing.T) {
	t.Setenv("NEXO_TEST_UNSET_TOKEN", "")
	os.Unsetenv("NEXO_TEST_UNSET_TOKEN")
	a := newMCPActivities(t)
	hs := mcptest.StartHTTP(t, "tok")
	srv := api.MCPServerSpec{Name: "remote", Transport: api.MCPHTTP, URL: hs.URL, TokenEnv: "NEXO_TEST_UNSET_TOKEN"}

	list := listMCP(t, a, mcpRun, srv)
	if msg := list.Errors["remote"]; !strings.Contains(msg, "NEXO_TEST_UNSET_TOKEN") || !strings.Contains(msg, "not set") {
		t.Errorf("errors = %v, want remote's missing NEXO_TEST_UNSET_TOKEN", list.Errors)
	}
	_, err := callMCP(t, a, mcpRun, srv, "echo", `{"text":"x"}`)
	if app := appError(t, err); !app.NonRetryable() || app.Type() != api.ErrTypeBadInput || !strings.Contains(err.Error(), "NEXO_TEST_UNSET_TOKEN") {
		t.Errorf("err = %v, want a non-retryable bad-input error naming the variable", err)
	}
	if len(hs.AuthHeaders()) != 0 {
		t.Errorf("the server was reached without a token: %v", hs.AuthHeaders())
	}
}

func TestMCPServerThatCannotStart(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	good := stdioServer(t, "good")
	missing := api.MCPServerSpec{Name: "missing", Transport: api.MCPStdio, Command: filepath.Join(t.TempDir(), "no-such-server")}
	dies := api.MCPServerSpec{Name: "dies", Transport: api.MCPStdio, Command: "/bin/sh",
		Args: []string{"-c", "echo 'FOO_API_KEY is required' >&2; exit 1"}}
	refused := api.MCPServerSpec{Name: "refused", Transport: api.MCPHTTP, URL: "http://127.0.0.1:1/mcp"}

	list := listMCP(t, a, mcpRun, good, missing, dies, refused)
	if _, ok := toolNames(list)["good__echo"]; !ok {
		t.Errorf("the good server's tools are missing: %v", list.Tools)
	}
	for name, want := range map[string]string{
		"missing": "no-such-server",
		"dies":    "FOO_API_KEY is required", // the end of its stderr
		"refused": "connection refused",
	} {
		if msg := list.Errors[name]; !strings.Contains(msg, "MCP server "+name) || !strings.Contains(msg, want) {
			t.Errorf("errors[%s] = %q, want it to name the server and say %q", name, msg, want)
		}
	}
	for name, msg := range list.Errors {
		t.Logf("errors[%s] = %s", name, msg)
	}
	if len(list.Errors) != 3 {
		t.Errorf("errors = %v, want 3", list.Errors)
	}
	for _, tool := range list.Tools {
		if tool.Server != "good" {
			t.Errorf("a failed server offers %s", tool.QualifiedName)
		}
	}

	// A call to a server that cannot start is an activity error naming it, retried.
	_, err := callMCP(t, a, mcpRun, dies, "echo", `{"text":"x"}`)
	if app := appError(t, err); app.NonRetryable() || !strings.Contains(err.Error(), "MCP server dies") {
		t.Errorf("err = %v, want a retryable error naming the server", err)
	}
}

func TestMCPCrashMidCallRestartsTheServer(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	first := serverPID(t, a, mcpRun, srv)

	_, err := callMCP(t, a, mcpRun, srv, mcptest.ToolCrash, `{}`)
	if err == nil {
		t.Fatal("a crash mid-call gave no error")
	}
	t.Logf("crash: %v", err)
	if app := appError(t, err); app.NonRetryable() || !strings.Contains(err.Error(), "MCP server srv") {
		t.Errorf("err = %v, want a retryable error naming the server", err)
	}
	waitFor(t, fmt.Sprintf("the crashed server %d is reaped", first), func() bool { return reaped(first) })

	// The retry gets a new server.
	if got := mustCallMCP(t, a, mcpRun, srv, "echo", `{"text":"back"}`); got != "back" {
		t.Errorf("echo after the crash = %q", got)
	}
	if second := serverPID(t, a, mcpRun, srv); second == first {
		t.Errorf("server pid still %d after the crash", second)
	}
}

func TestMCPCloseReapsTheRunsServers(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	// A server that starts a process of its own: closing stops that too.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	parent := api.MCPServerSpec{Name: "parent", Transport: api.MCPStdio, Command: "/bin/sh",
		Args: []string{"-c", `sleep 300 & echo $! > "$1"; exec "$2"`, "sh", pidFile, srv.Command}}

	mine := serverPID(t, a, "run-a", srv)
	other := serverPID(t, a, "run-b", srv)
	shell := serverPID(t, a, "run-a", parent)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	if err := a.MCP.CloseMCP(context.Background(), api.CloseMCPRequest{RunID: "run-a"}); err != nil {
		t.Fatalf("CloseMCP: %v", err)
	}
	for _, pid := range []int{mine, shell} {
		if !reaped(pid) {
			t.Errorf("server %d of the closed run is still there (running or a zombie)", pid)
		}
	}
	waitFor(t, fmt.Sprintf("the server's own child %d is gone", child), func() bool { return gone(child) })
	if reaped(other) {
		t.Errorf("the other run's server %d was closed too", other)
	}
	// Closing again, or a run with nothing open, is fine.
	if err := a.MCP.CloseMCP(context.Background(), api.CloseMCPRequest{RunID: "run-a"}); err != nil {
		t.Errorf("CloseMCP again: %v", err)
	}

	// The worker's Close stops the rest, and no client opens after it.
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !reaped(other) {
		t.Errorf("server %d survived the worker's Close", other)
	}
	_, err = callMCP(t, a, "run-b", srv, "echo", `{"text":"x"}`)
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("call after Close: %v, want the shutting-down error", err)
	}
}

func TestMCPIdleClientIsClosed(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	activities.SetMCPIdleTimeout(a, 300*time.Millisecond)
	srv := stdioServer(t, "srv")
	pid := serverPID(t, a, mcpRun, srv)
	waitFor(t, fmt.Sprintf("the idle server %d is reaped", pid), func() bool { return reaped(pid) })
	if got := mustCallMCP(t, a, mcpRun, srv, "echo", `{"text":"again"}`); got != "again" {
		t.Errorf("echo after idling = %q", got)
	}
}

func TestMCPLargeResultIsCapped(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolBig, `{"bytes":300000}`)
	note := fmt.Sprintf("\n[truncated: showing %d of 300000 bytes]", activities.MCPResultCap)
	if !strings.HasSuffix(got, note) || len(got) != activities.MCPResultCap+len(note) {
		t.Errorf("result of %d bytes ends %q, want %d bytes and the note", len(got), got[max(0, len(got)-60):], activities.MCPResultCap)
	}
	if got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolBig, `{"bytes":1000}`); len(got) != 1000 {
		t.Errorf("a small result was cut to %d bytes", len(got))
	}
}

// TestMCPThroughTemporal runs the activities registered on a Temporal test environment:
// the names are wired, and a failure as Temporal records it holds no token.
func TestMCPThroughTemporal(t *testing.T) {
	const token = "tok-temporal-31415926"
	t.Setenv("NEXO_TEST_MCP_TOKEN", token)
	a := newMCPActivities(t)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	tenv := suite.NewTestActivityEnvironment()
	a.Register(tenv)
	hs := mcptest.StartHTTP(t, "tok-other")
	srv := api.MCPServerSpec{Name: "remote", Transport: api.MCPHTTP, URL: hs.URL, TokenEnv: "NEXO_TEST_MCP_TOKEN"}
	std := stdioServer(t, "srv")

	val, err := tenv.ExecuteActivity(api.ActivityListMCPTools, api.ListMCPToolsRequest{RunID: mcpRun, Servers: []api.MCPServerSpec{std, srv}})
	if err != nil {
		t.Fatal(err)
	}
	var list api.ListMCPToolsResult
	if err := val.Get(&list); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolNames(list)["srv__echo"]; !ok || list.Errors["remote"] == "" {
		t.Errorf("list = %+v", list)
	}
	val, err = tenv.ExecuteActivity(api.ActivityCallMCPTool, api.CallMCPToolRequest{RunID: mcpRun, Server: std, Tool: "echo", Args: json.RawMessage(`{"text":"via temporal"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var res api.RunToolResult
	if err := val.Get(&res); err != nil || res.Content != "via temporal" {
		t.Errorf("echo = %+v, %v", res, err)
	}
	_, err = tenv.ExecuteActivity(api.ActivityCallMCPTool, api.CallMCPToolRequest{RunID: mcpRun, Server: srv, Tool: "echo", Args: json.RawMessage(`{}`)})
	if err == nil || strings.Contains(fmt.Sprintf("%v %+v", err, err), token) {
		t.Errorf("err = %v, want a failure without the token", err)
	}
	if _, err := tenv.ExecuteActivity(api.ActivityCloseMCP, api.CloseMCPRequest{RunID: mcpRun}); err != nil {
		t.Errorf("CloseMCP: %v", err)
	}
}

func TestMCPBadDeclaration(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	odd := api.MCPServerSpec{Name: "odd", Transport: "pigeon"}
	if msg := listMCP(t, a, mcpRun, odd).Errors["odd"]; !strings.Contains(msg, `transport "pigeon"`) {
		t.Errorf("errors[odd] = %q, want the transport named", msg)
	}
	_, err := callMCP(t, a, mcpRun, odd, "echo", `{}`)
	if app := appError(t, err); !app.NonRetryable() || app.Type() != api.ErrTypeBadInput {
		t.Errorf("err = %v, want a non-retryable bad-input error", err)
	}
}

// TestMCPEditNoteIsStoredWithALargeResult (hardening round two, item 13): the note of an
// edited MCP call starts the result before it is stored, so the model reads it also when
// the result travels by reference; the result says so (Noted), so the workflow does not
// add it twice.
func TestMCPEditNoteIsStoredWithALargeResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	t.Cleanup(func() { _ = e.a.Close() })
	srv := stdioServer(t, "srv")
	note := "A human edited this call's arguments to {\"bytes\":100000}\n"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.a.MCP.CallMCPTool(ctx, api.CallMCPToolRequest{RunID: mcpRun, CallID: "1.1", Server: srv, Tool: mcptest.ToolBig,
		Args: json.RawMessage(`{"bytes":100000}`), StoreOver: api.DefaultStoreOver, Note: note})
	if err != nil {
		t.Fatal(err)
	}
	if res.ContentRef == "" || !res.Noted || !strings.HasPrefix(res.Content, note) {
		t.Fatalf("result: ref %q, noted %v, preview starts %.80q; want a reference, noted, and the note first", res.ContentRef, res.Noted, res.Content)
	}
	whole, err := e.store.GetBlob(ctx, res.ContentRef)
	if err != nil || !strings.HasPrefix(string(whole), note) || len(whole) < 100000 {
		t.Fatalf("stored result starts %.80q (%d bytes), %v; want the note, then the whole result", whole, len(whole), err)
	}
}

// TestMCPResultRedactedAndCut: a server's result policy redacts every match of its
// patterns, then cuts what is left at max_bytes, back to a character boundary, with a note.
func TestMCPResultRedactedAndCut(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	srv.Result = &api.MCPResultPolicy{MaxBytes: 100, Redact: []string{`sk-live-[0-9a-f]+`}}
	got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolLeak, `{"repeat":100}`)
	// 19 bytes of "api_key=[redacted]\n", then 81 of 200 bytes of "ü": the cut moves back
	// to 99 so no character is split; the whole redacted text is 237 bytes.
	want := "api_key=[redacted]\n" + strings.Repeat("ü", 40) + "\n[result cut at 99 of 237 bytes]"
	if got != want {
		t.Errorf("result = %q, want %q", got, want)
	}

	// Redaction alone: every match, the default cap.
	srv.Result = &api.MCPResultPolicy{Redact: []string{`sk-live-[0-9a-f]+`, `api_key=`}}
	got = mustCallMCP(t, a, mcpRun, srv, mcptest.ToolLeak, `{"repeat":3}`)
	if want := "[redacted][redacted]\nüüü\nagain: [redacted]"; got != want {
		t.Errorf("result = %q, want %q", got, want)
	}

	// An error result is redacted too.
	srv.Result = &api.MCPResultPolicy{Redact: []string{`hunter\d`}}
	res, err := callMCP(t, a, mcpRun, srv, mcptest.ToolFail, `{"message":"login as admin/hunter2 failed"}`)
	if err != nil || !res.IsError || strings.Contains(res.Content, "hunter2") || !strings.Contains(res.Content, "admin/[redacted] failed") {
		t.Errorf("error result = %+v, %v; want it redacted", res, err)
	}
}

// TestMCPResultCutStoredWithoutTheSecret: a result stored by reference is the redacted,
// cut one.
func TestMCPResultCutStoredWithoutTheSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	t.Cleanup(func() { _ = e.a.Close() })
	srv := stdioServer(t, "srv")
	srv.Result = &api.MCPResultPolicy{MaxBytes: 5000, Redact: []string{`sk-live-[0-9a-f]+`}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.a.MCP.CallMCPTool(ctx, api.CallMCPToolRequest{RunID: mcpRun, CallID: "1.1", Server: srv, Tool: mcptest.ToolLeak,
		Args: json.RawMessage(`{"repeat":10000}`), StoreOver: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ContentRef == "" {
		t.Fatalf("a %d-byte result was not stored: %+v", len(res.Content), res)
	}
	whole, err := e.store.GetBlob(ctx, res.ContentRef)
	if err != nil {
		t.Fatal(err)
	}
	full := string(whole)
	if strings.Contains(full, mcptest.LeakSecret) || strings.Contains(res.Content, mcptest.LeakSecret) {
		t.Error("the secret reached the store or the preview")
	}
	if !strings.HasSuffix(full, "\n[result cut at 4999 of 20037 bytes]") || len(full) != 4999+len("\n[result cut at 4999 of 20037 bytes]") {
		t.Errorf("stored result of %d bytes ends %q", len(full), full[max(0, len(full)-60):])
	}
}

// TestMCPServerTimeout: a call that passes its server's timeout is an error result naming
// the server, the tool and the timeout, returned at the timeout; the server's next call
// answers.
func TestMCPServerTimeout(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	srv.Timeout = api.Duration(time.Second)
	if got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolSlow, `{"ms":10}`); got != "slept" {
		t.Errorf("a quick call = %q", got)
	}
	start := time.Now()
	res, err := callMCP(t, a, mcpRun, srv, mcptest.ToolSlow, `{"ms":60000}`)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a timed-out call is an activity error (%v), want an error result", err)
	}
	want := "error: MCP server srv: slow: no answer within the server's timeout of 1s"
	if !res.IsError || !strings.HasPrefix(res.Content, want) {
		t.Errorf("result = %+v, want an error result starting %q", res, want)
	}
	if took > 20*time.Second {
		t.Errorf("the call returned after %s, not at its 1s timeout", took)
	}
	if got := mustCallMCP(t, a, mcpRun, srv, mcptest.ToolEcho, `{"text":"still here"}`); got != "still here" {
		t.Errorf("echo after the timeout = %q", got)
	}
}

// TestMCPBadResultPatternBuiltInGo: a spec built in Go skips config validation; its bad
// pattern is a non-retryable error naming the server and the pattern, and nothing is called.
func TestMCPBadResultPatternBuiltInGo(t *testing.T) {
	t.Parallel()
	a := newMCPActivities(t)
	srv := stdioServer(t, "srv")
	srv.Result = &api.MCPResultPolicy{Redact: []string{`secret-([`}}
	_, err := callMCP(t, a, mcpRun, srv, mcptest.ToolEcho, `{"text":"x"}`)
	ae := appError(t, err)
	if !ae.NonRetryable() || !strings.Contains(ae.Error(), "MCP server srv") || !strings.Contains(ae.Error(), `"secret-(["`) {
		t.Errorf("error = %v, want a non-retryable error naming the server and the pattern", err)
	}
}
