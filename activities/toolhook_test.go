package activities_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// The three wrap_mcp_tool cases of Nexo's test/agent_mcp_wrapper_test.rb, as hooks: one
// caps a result, one decorates it, one refuses a call by its arguments.
const (
	capBytes = 100
	stamp    = "\n[checked by audit]"
)

func capHook() activities.ToolHook {
	return activities.ToolHook{After: func(_ context.Context, _ activities.ToolCall, out activities.ToolOutput) (activities.ToolOutput, error) {
		if len(out.Content) > capBytes {
			out.Content = out.Content[:capBytes] + "[capped]"
		}
		return out, nil
	}}
}

func decorateHook() activities.ToolHook {
	return activities.ToolHook{After: func(_ context.Context, _ activities.ToolCall, out activities.ToolOutput) (activities.ToolOutput, error) {
		out.Content += stamp
		return out, nil
	}}
}

// refuseHook denies any call whose arguments mention "secret".
func refuseHook() activities.ToolHook {
	return activities.ToolHook{Before: func(_ context.Context, call activities.ToolCall) (activities.ToolDecision, error) {
		if strings.Contains(string(call.Args), "secret") {
			return activities.ToolDecision{Deny: "arguments mention a secret"}, nil
		}
		return activities.ToolDecision{}, nil
	}}
}

func hookSet() activities.ToolHooks {
	return activities.ToolHooks{"cap": capHook(), "decorate": decorateHook(), "refuse": refuseHook()}
}

func notes(res api.RunToolResult) string {
	var parts []string
	for _, n := range res.Hooked {
		parts = append(parts, n.Hook+":"+n.Action)
	}
	return strings.Join(parts, ",")
}

func TestToolHooksOnMCPTool(t *testing.T) {
	t.Parallel()
	const token = "tok-hooks"
	a := activities.New(activities.Deps{ToolHooks: hookSet(), LookupEnv: func(k string) (string, bool) { return token, k == "HOOK_TOKEN" }})
	t.Cleanup(func() { _ = a.Close() })
	hs := mcptest.StartHTTP(t, token)
	srv := api.MCPServerSpec{Name: "remote", Transport: api.MCPHTTP, URL: hs.URL, TokenEnv: "HOOK_TOKEN"}
	call := func(tool, args string, hooks ...string) api.RunToolResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := a.MCP.CallMCPTool(ctx, api.CallMCPToolRequest{RunID: "run-hooks-mcp", CallID: "1.1", Server: srv, Tool: tool, Args: json.RawMessage(args), Hooks: hooks})
		if err != nil {
			t.Fatalf("CallMCPTool %s %s: %v", tool, args, err)
		}
		return res
	}

	t.Run("cap", func(t *testing.T) {
		res := call(mcptest.ToolBig, `{"bytes":5000}`, "cap")
		if want := strings.Repeat("x", capBytes) + "[capped]"; res.Content != want || res.IsError {
			t.Errorf("content = %d bytes %q…, want %q", len(res.Content), headOf(res.Content), want)
		}
		if got := notes(res); got != "cap:result" {
			t.Errorf("hooked = %s, want cap:result", got)
		}
	})
	t.Run("decorate after cap", func(t *testing.T) {
		res := call(mcptest.ToolEcho, `{"text":"hello"}`, "cap", "decorate")
		if res.Content != "hello"+stamp {
			t.Errorf("content = %q, want %q", res.Content, "hello"+stamp)
		}
		if got := notes(res); got != "decorate:result" {
			t.Errorf("hooked = %s, want decorate:result (cap left a short result alone)", got)
		}
	})
	t.Run("refuse by argument", func(t *testing.T) {
		before := len(hs.Calls())
		res := call(mcptest.ToolEcho, `{"text":"the secret plan"}`, "refuse", "decorate")
		if !res.IsError || !strings.Contains(res.Content, "denied by tool hook refuse: arguments mention a secret") {
			t.Errorf("content = %q (error %v), want the denial with its reason", res.Content, res.IsError)
		}
		if got := notes(res); got != "refuse:denied" {
			t.Errorf("hooked = %s, want refuse:denied alone (After does not run on a denied call)", got)
		}
		if n := len(hs.Calls()) - before; n != 0 {
			t.Errorf("the server got %d calls, want none for a denied call", n)
		}
		if res := call(mcptest.ToolEcho, `{"text":"plain"}`, "refuse"); res.Content != "plain" || len(res.Hooked) != 0 {
			t.Errorf("allowed call = %+v, want the plain result and no notes", res)
		}
	})
}

func headOf(s string) string { return s[:min(len(s), 60)] }

func TestToolHooksOnBuiltInTool(t *testing.T) {
	t.Parallel()
	hooks := hookSet()
	hooks["relocate"] = activities.ToolHook{Before: func(_ context.Context, call activities.ToolCall) (activities.ToolDecision, error) {
		if call.Tool != agents.ToolWriteFile {
			return activities.ToolDecision{}, nil
		}
		var args map[string]any
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return activities.ToolDecision{}, err
		}
		args["path"] = "drafts/" + args["path"].(string)
		b, _ := json.Marshal(args)
		return activities.ToolDecision{Args: b}, nil
	}}
	e := newEnv(t, activities.Deps{ToolHooks: hooks})
	run := func(tool, args string, hooks ...string) api.RunToolResult {
		t.Helper()
		res, err := e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, CallID: "1.1", Tool: tool, Args: json.RawMessage(args), Hooks: hooks})
		if err != nil {
			t.Fatalf("RunTool %s %s: %v", tool, args, err)
		}
		return res
	}

	res := run(agents.ToolWriteFile, `{"path":"secret.txt","content":"x"}`, "refuse")
	if !res.IsError || !strings.Contains(res.Content, "write_file was denied by tool hook refuse: arguments mention a secret") {
		t.Errorf("denied write = %q, want the denial naming the hook and its reason", res.Content)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "secret.txt")); !os.IsNotExist(err) {
		t.Errorf("secret.txt: stat err = %v, want it never written", err)
	}

	res = run(agents.ToolWriteFile, `{"path":"notes.txt","content":"hi"}`, "refuse", "relocate")
	if res.IsError || notes(res) != "relocate:args" {
		t.Fatalf("relocated write = %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "drafts", "notes.txt")); err != nil || string(b) != "hi" {
		t.Errorf("drafts/notes.txt = %q, %v; want the write at the rewritten path", b, err)
	}

	if err := os.WriteFile(filepath.Join(e.ws, "big.txt"), []byte(strings.Repeat("y", 4000)), 0o644); err != nil {
		t.Fatal(err)
	}
	res = run(agents.ToolReadFile, `{"path":"big.txt"}`, "cap", "decorate")
	if want := strings.Repeat("y", capBytes) + "[capped]" + stamp; res.Content != want {
		t.Errorf("read = %q, want %q", res.Content, want)
	}
	if got := notes(res); got != "cap:result,decorate:result" {
		t.Errorf("hooked = %s", got)
	}
}

// A hook that panics, fails or is missing is a tool error naming it; the call does not
// run (Before) or its result is withheld (After), and the activity still returns.
func TestToolHookFailures(t *testing.T) {
	t.Parallel()
	hooks := activities.ToolHooks{
		"boom-before": {Before: func(context.Context, activities.ToolCall) (activities.ToolDecision, error) {
			panic("nil map in the policy")
		}},
		"boom-after": {After: func(context.Context, activities.ToolCall, activities.ToolOutput) (activities.ToolOutput, error) {
			var m map[string]int
			m["x"]++ // a runtime panic, as a real bug would make
			return activities.ToolOutput{}, nil
		}},
		"bad-args": {Before: func(context.Context, activities.ToolCall) (activities.ToolDecision, error) {
			return activities.ToolDecision{Args: json.RawMessage(`[1,2]`)}, nil
		}},
	}
	e := newEnv(t, activities.Deps{ToolHooks: hooks})
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	tenv := suite.NewTestActivityEnvironment()
	e.a.Register(tenv)
	for _, tc := range []struct {
		hook, path, want string
		written          bool
	}{
		{"boom-before", "a.txt", "tool hook boom-before failed before write_file ran, so the call did not run: panic: nil map in the policy", false},
		{"boom-after", "b.txt", "tool hook boom-after failed after write_file ran, so its result is withheld: panic: assignment to entry in nil map", true},
		{"bad-args", "c.txt", "tool hook bad-args failed before write_file ran, so the call did not run: its rewritten arguments are not a JSON object", false},
		{"not-here", "d.txt", `tool hook "not-here" is not registered on the worker polling`, false},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			val, err := tenv.ExecuteActivity(api.ActivityRunTool, api.RunToolRequest{RunID: testRun, CallID: "1.1", Tool: agents.ToolWriteFile,
				Args: json.RawMessage(`{"path":"` + tc.path + `","content":"x"}`), Hooks: []string{tc.hook}})
			if err != nil {
				t.Fatalf("RunTool: %v, want a tool error result", err)
			}
			var res api.RunToolResult
			if err := val.Get(&res); err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(res.Content, tc.want) {
				t.Errorf("content = %q, want it to contain %q", res.Content, tc.want)
			}
			if len(res.Hooked) == 0 || res.Hooked[len(res.Hooked)-1].Hook != tc.hook || res.Hooked[len(res.Hooked)-1].Action != api.ToolHookFailed {
				t.Errorf("hooked = %+v, want a failed note for %s", res.Hooked, tc.hook)
			}
			_, err = os.Stat(filepath.Join(e.ws, tc.path))
			if written := err == nil; written != tc.written {
				t.Errorf("%s written = %v, want %v", tc.path, written, tc.written)
			}
		})
	}
}
