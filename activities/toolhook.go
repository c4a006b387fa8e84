package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/api"
)

// ToolHookTimeout bounds one hook's Before or After: a hook that does not return by then
// fails the call (a tool error naming it), so a stuck hook cannot hold a run's tool call
// until the activity's own timeout.
const ToolHookTimeout = 30 * time.Second

// maxHookReason bounds a denial's reason (or a hook's failure) in the result's notes and
// the tool_hook event: history holds a sentence, not a hook's dump.
const maxHookReason = 1000

// ToolCall is what a tool hook sees of one call: the run, the call, the tool (a built-in
// name such as write_file, or an MCP tool's name with its Server) and its arguments, a
// JSON object.
type ToolCall struct {
	RunID  string
	CallID string
	Tool   string
	// Server is the MCP server of an MCP tool; "" for a built-in tool.
	Server string
	Args   json.RawMessage
}

// ToolDecision is what a hook's Before decides. The zero value lets the call run as it is.
type ToolDecision struct {
	// Deny, when not blank, refuses the call: it does not run, the model reads the reason
	// as the tool's error result, and a tool_hook event records the denial.
	Deny string
	// Args, when set, replaces the call's arguments (a JSON object): the tool, and the
	// hooks after this one, get these.
	Args json.RawMessage
}

// ToolOutput is a call's result as a hook's After sees and returns it: the text the
// model reads and whether it is an error result.
type ToolOutput struct {
	Content string
	IsError bool
}

// ToolHook wraps the tool calls of the agents that name it (agents.Spec.ToolHooks), as
// Nexo's wrap_mcp_tool does: Before may allow, deny or rewrite the arguments; After may
// rewrite, cap or redact the result. Either may be nil. Hooks run inside the tool
// activities (RunTool, CallMCPTool) on the worker that runs the call, so they may do I/O;
// both must be safe for concurrent use. An error or a panic fails the call with a tool
// error naming the hook (a failing After withholds the result: it may have been meant
// to redact it).
type ToolHook struct {
	Before func(ctx context.Context, call ToolCall) (ToolDecision, error)
	After  func(ctx context.Context, call ToolCall, out ToolOutput) (ToolOutput, error)
}

// ToolHooks are a worker's registered hooks, by name.
type ToolHooks map[string]ToolHook

// Names returns the registered names, sorted.
func (hs ToolHooks) Names() []string {
	names := make([]string, 0, len(hs))
	for n := range hs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// missing is the tool error of a call naming a hook this worker does not register: the
// call does not run (a hook may be what keeps it safe).
func (hs ToolHooks) missing(ctx context.Context, names []string) *api.RunToolResult {
	for _, n := range names {
		if _, ok := hs[n]; ok {
			continue
		}
		where := "this worker"
		if activity.IsActivity(ctx) {
			where = "the worker polling " + activity.GetInfo(ctx).TaskQueue
		}
		known := strings.Join(hs.Names(), ", ")
		if known == "" {
			known = "none"
		}
		res := toolError("tool hook %q is not registered on %s (registered: %s); the call did not run. Every worker that runs the agent's tools (its sandbox hosts and pools too) must register the hooks its tool_hooks name (platform.ToolHook)", n, where, known)
		res.Hooked = []api.ToolHookNote{{Hook: n, Action: api.ToolHookFailed, Reason: "not registered on " + where}}
		return &res
	}
	return nil
}

// before runs the named hooks' Before in order on call, whose Args it rewrites when a
// hook asks. It returns what the hooks did and, when the call must not run (denied, a
// hook missing, failing or panicking), the tool error the model reads instead.
func (hs ToolHooks) before(ctx context.Context, names []string, call *ToolCall) ([]api.ToolHookNote, *api.RunToolResult) {
	if res := hs.missing(ctx, names); res != nil {
		return res.Hooked, res
	}
	var notes []api.ToolHookNote
	for _, n := range names {
		h := hs[n]
		if h.Before == nil {
			continue
		}
		var d ToolDecision
		err := runHook(ctx, n, func(hctx context.Context) (err error) {
			d, err = h.Before(hctx, *call)
			return err
		})
		if err != nil {
			notes = append(notes, api.ToolHookNote{Hook: n, Action: api.ToolHookFailed, Reason: clipReason(err.Error())})
			res := toolError("tool hook %s failed before %s ran, so the call did not run: %v", n, call.Tool, err)
			res.Hooked = notes
			return notes, &res
		}
		if reason := strings.TrimSpace(d.Deny); reason != "" {
			notes = append(notes, api.ToolHookNote{Hook: n, Action: api.ToolHookDenied, Reason: clipReason(reason)})
			res := toolError("%s was denied by tool hook %s: %s", call.Tool, n, reason)
			res.Hooked = notes
			return notes, &res
		}
		if d.Args != nil {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(d.Args, &obj); err != nil || obj == nil {
				reason := fmt.Sprintf("its rewritten arguments are not a JSON object: %s", headUTF8(string(d.Args), 200))
				notes = append(notes, api.ToolHookNote{Hook: n, Action: api.ToolHookFailed, Reason: reason})
				res := toolError("tool hook %s failed before %s ran, so the call did not run: %s", n, call.Tool, reason)
				res.Hooked = notes
				return notes, &res
			}
			if !sameJSON(d.Args, call.Args) {
				call.Args = d.Args
				notes = append(notes, api.ToolHookNote{Hook: n, Action: api.ToolHookArgs})
			}
		}
	}
	return notes, nil
}

// after runs the named hooks' After in order on res, the result of a call that ran, and
// appends what they did to res.Hooked (after notes, what Before did). A failing or
// panicking hook replaces the result with a tool error naming it.
func (hs ToolHooks) after(ctx context.Context, names []string, call ToolCall, res api.RunToolResult, notes []api.ToolHookNote) api.RunToolResult {
	res.Hooked = append(notes, res.Hooked...)
	for _, n := range names {
		h, ok := hs[n]
		if !ok || h.After == nil {
			continue
		}
		in := ToolOutput{Content: res.Content, IsError: res.IsError}
		var out ToolOutput
		err := runHook(ctx, n, func(hctx context.Context) (err error) {
			out, err = h.After(hctx, call, in)
			return err
		})
		if err != nil {
			res.Content = fmt.Sprintf("error: tool hook %s failed after %s ran, so its result is withheld: %v", n, call.Tool, err)
			res.IsError = true
			res.Hooked = append(res.Hooked, api.ToolHookNote{Hook: n, Action: api.ToolHookFailed, Reason: clipReason(err.Error())})
			return res
		}
		if out != in {
			res.Content, res.IsError = out.Content, out.IsError
			res.Hooked = append(res.Hooked, api.ToolHookNote{Hook: n, Action: api.ToolHookResult})
		}
	}
	return res
}

// runHook runs fn, one hook's Before or After, within ToolHookTimeout, and turns its
// panic into an error: a hook's bug is the call's failure, never the worker's.
func runHook(ctx context.Context, name string, fn func(context.Context) error) error {
	hctx, cancel := context.WithTimeout(ctx, ToolHookTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("panic: %v", v)
			}
		}()
		done <- fn(hctx)
	}()
	select {
	case err := <-done:
		return err
	case <-hctx.Done():
		if ctx.Err() != nil {
			return fmt.Errorf("tool hook %s: %w", name, ctx.Err())
		}
		// The hook's goroutine is left to finish on its own: it was given a context that
		// is now done.
		return fmt.Errorf("no answer within %s", ToolHookTimeout)
	}
}

func clipReason(s string) string {
	if len(s) > maxHookReason {
		return headUTF8(s, maxHookReason) + "…"
	}
	return s
}

// sameJSON reports whether a and b are the same JSON text but for insignificant space.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
