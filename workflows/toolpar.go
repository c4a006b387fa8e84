package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// runToolCallsConcurrently runs the tool calls of one model reply concurrently when the
// agent's tool_concurrency allows it, and appends their results to conv in the model's
// order once all are done. It reports false, having done nothing, when the calls are to
// run one after another (tool_concurrency 0 or 1, a single call, a history recorded
// before parallel tools): agentLoop's own loop then runs them exactly as it always has.
//
// Semantics:
//   - a call the permissions allow (or deny, or that names no tool) is decided at once and
//     runs beside the others, at most tool_concurrency at a time;
//   - the calls that need a human wait for their decisions one by one, in the model's
//     order, while the allowed calls run (in a docker sandbox, once they are done: a
//     sandbox parked while a human takes long must have no call running in it); each runs
//     once decided, within the same bound;
//   - a call that fails (an error result, or broken infrastructure) cancels none of the
//     others; the first activity error, in the model's order, fails the turn once every
//     call has ended;
//   - every tool_call start is emitted up front in the model's order, each result as its
//     call ends (the order history records, so replay emits the same events);
//   - cancelling the run cancels every call.
func (rt *runtime) runToolCallsConcurrently(ctx workflow.Context, spec agents.Spec, tools toolset, calls []api.ToolCall, session bool, conv *conversation) (bool, error) {
	if spec.ToolConcurrency <= 1 || len(calls) < 2 {
		return false, nil
	}
	if workflow.GetVersion(ctx, ChangeParallelTools, workflow.DefaultVersion, 1) < 1 {
		return false, nil
	}
	storeOver := 0
	if conv.byRef {
		storeOver = api.DefaultStoreOver
	}
	type slot struct {
		call   api.ToolCall
		args   map[string]any
		argErr error
		res    api.RunToolResult
		err    error
	}
	slots := make([]slot, len(calls))
	var now, gated []int
	for i, call := range calls {
		s := &slots[i]
		s.call = rt.inToolDir(call) // a session prompt's dir (session.go)
		s.argErr = json.Unmarshal([]byte(orEmptyObject(call.Arguments)), &s.args)
		rt.emitToolStarted(ctx, call, s.args, session)
		if rt.needsApproval(spec, tools, call, s.args, s.argErr) {
			gated = append(gated, i)
		} else {
			now = append(now, i)
		}
	}

	prev := rt.toolSlots
	rt.toolSlots = workflow.NewSemaphore(ctx, int64(spec.ToolConcurrency))
	defer func() { rt.toolSlots = prev }()

	run := func(gctx workflow.Context, i int) {
		s := &slots[i]
		s.res, s.err = rt.decideAndRun(gctx, spec, tools, s.call, s.args, s.argErr, storeOver)
		if s.err == nil {
			rt.emitToolEnded(gctx, s.call, s.res, session)
		}
	}
	running := len(now)
	for _, i := range now {
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer func() { running-- }()
			run(gctx, i)
		})
	}
	gatedDone := len(gated) == 0
	if !gatedDone {
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer func() { gatedDone = true }()
			if spec.Sandbox.Type == api.SandboxDocker {
				if err := workflow.Await(gctx, func() bool { return running == 0 }); err != nil {
					for _, i := range gated {
						slots[i].err = err
					}
					return
				}
			}
			for _, i := range gated {
				if gctx.Err() != nil {
					slots[i].err = gctx.Err()
					continue
				}
				run(gctx, i)
			}
		})
	}
	if err := workflow.Await(ctx, func() bool { return running == 0 && gatedDone }); err != nil {
		return true, err
	}
	for _, s := range slots {
		if s.err != nil {
			return true, wrap(s.err, "agent %s: tool call %s (%s)", spec.Name, s.call.ID, s.call.Name)
		}
	}
	for _, s := range slots {
		conv.add(api.ChatMessage{Role: api.RoleTool, ToolCallID: s.call.ID, Content: s.res.Content,
			ContentRef: s.res.ContentRef, ContentBytes: s.res.ContentBytes, IsError: s.res.IsError})
	}
	return true, nil
}

// needsApproval says whether decideAndRun would wait for a human on call: a known tool,
// arguments that are an object, and the permissions' verdict NeedsApproval. Everything
// else is decided at once.
func (rt *runtime) needsApproval(spec agents.Spec, tools toolset, call api.ToolCall, args map[string]any, argErr error) bool {
	if argErr != nil {
		return false
	}
	for _, t := range tools.mcp {
		if t.QualifiedName == call.Name {
			pc := permissions.Call{Capability: permissions.CapMCP, Tool: t.QualifiedName, Args: args}
			return permissions.Decide(spec.Permissions, pc, rt.approvals).Decision == permissions.NeedsApproval
		}
	}
	for _, t := range tools.builtin {
		if t.Name == call.Name {
			pc := permissions.Call{Capability: t.Capability, Tool: t.Name, Detail: agents.Detail(t.Name, args), Args: args}
			return permissions.Decide(spec.Permissions, pc, rt.approvals).Decision == permissions.NeedsApproval
		}
	}
	return false
}

// toolSlot takes one of the reply's tool_concurrency slots, when calls run concurrently,
// for as long as the call's activity runs; release gives it back.
func (rt *runtime) toolSlot(ctx workflow.Context) (release func(), err error) {
	sem := rt.toolSlots
	if sem == nil {
		return func() {}, nil
	}
	if err := sem.Acquire(ctx, 1); err != nil {
		return func() {}, err
	}
	return func() { sem.Release(1) }, nil
}

// emitToolStarted and emitToolEnded record a call's start and end as callTool does: the
// session's tool_call start and update, or a run's agent_tool_call and agent_tool_result.
func (rt *runtime) emitToolStarted(ctx workflow.Context, call api.ToolCall, args map[string]any, session bool) {
	if session {
		rt.emit(ctx, api.StreamToolCall, map[string]any{"id": call.ID, "name": call.Name, "args": argsForEvent(args, call.Arguments), "status": "started"})
	} else {
		rt.emit(ctx, "agent_tool_call", map[string]any{"call_id": call.ID, "name": call.Name, "args": argsForEvent(args, call.Arguments)})
	}
}

func (rt *runtime) emitToolEnded(ctx workflow.Context, call api.ToolCall, result api.RunToolResult, session bool) {
	if session {
		status := "completed"
		if result.IsError {
			status = "failed"
		}
		data := map[string]any{"id": call.ID, "name": call.Name, "status": status, "content": result.Content}
		if result.Snapshot != nil {
			data["snapshot"] = result.Snapshot.Manifest
		}
		rt.emit(ctx, api.StreamToolCall, data)
		return
	}
	data := map[string]any{"call_id": call.ID, "name": call.Name, "ok": !result.IsError, "content": result.Content}
	if result.ContentRef != "" {
		data["bytes"], data["content_ref"] = result.ContentBytes, result.ContentRef
	}
	if result.Snapshot != nil {
		// The workspace as this call left it (sandbox files --at, fork): a reference only.
		data["snapshot"] = result.Snapshot.Manifest
	}
	rt.emit(ctx, "agent_tool_result", data)
}
