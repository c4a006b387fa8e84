package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// ErrTurnLimit is returned (wrapped) when an agent used its max_turns without a final
// answer. The run stops there instead of running up cost.
var ErrTurnLimit = errors.New("turn limit reached")

// ErrModelCallTooLarge is returned (wrapped) when a model call's input (instructions, skills,
// tools and the whole thread) would pass maxModelCallInput. The run, or the session's turn,
// fails with that message instead of Temporal refusing the workflow task over and over.
var ErrModelCallTooLarge = errors.New("model call input too large")

// maxModelCallInput bounds a model call's encoded input, under Temporal's default 2 MB
// payload limit (limit.blobSize.error) with room for the rest of the command.
const maxModelCallInput = 1_800_000

// DefaultRetryFor is how long a model call's transient failures are retried when the
// agent's spec carries no retry_for (the worker fills it from llm.retry_for).
const DefaultRetryFor = 6 * time.Hour

// modelCallOptions: a model call may take minutes. Transient provider errors (408, 429,
// 5xx, the provider unreachable: api.ErrTypeModelUnavailable) are retried for as long as
// the agent's budget (spec.RetryFor) allows, not a number of attempts: a run that waited days for a human
// must not fail because its provider was overloaded for a minute. Other 4xx are
// non-retryable at the source and fail at once. The activity may set the next delay (a
// provider's Retry-After). The budget comes from the recorded agent spec, so it is the
// same on every replay.
func modelCallOptions(spec agents.Spec) workflow.ActivityOptions {
	retryFor := time.Duration(spec.RetryFor)
	if retryFor <= 0 {
		retryFor = DefaultRetryFor
	}
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: retryFor,
		StartToCloseTimeout:    10 * time.Minute,
		// The activity heartbeats every 5s (half this): a call in flight on a killed worker
		// is retried elsewhere after this long, not after the start-to-close timeout.
		HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			// The budget ends the retries; this count (one a second of the budget) is only
			// a bound the budget reaches first (and an explicit count: Temporal's testsuite
			// caps "unlimited" at 10 attempts).
			MaximumAttempts:        int32(min(retryFor/time.Second, math.MaxInt32)),
			NonRetryableErrorTypes: []string{api.ErrTypeBadInput, api.ErrTypeTooLarge},
		},
	}
}

// toolCallOptions: a command may run for minutes (bounded by sandbox.shell_timeout); the
// activity heartbeats, so a killed worker's call is retried within seconds. Attempts stay
// bounded: a tool that runs and fails is a result the model sees, so an activity error
// here is broken infrastructure, which fails the run for a re-run.
func toolCallOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         defaultRetryPolicy(),
	}
}

// AgentRun is the generic workflow that runs one configured agent on one prompt:
// `starter agent NAME "prompt"`. The definition is resolved by the worker (an activity, so
// the run keeps the definition it started with even if the config changes) and stored
// under state["agent"].
func AgentRun(ctx workflow.Context, in api.AgentRunInput) (api.AgentResult, error) {
	return agentRun(ctx, in)
}

// agentRunResult is AgentRun as registered: the result is the agent's validated output
// when it has an output_schema (a typed result: the record's result is that JSON value),
// the AgentResult otherwise, encoded as it always was.
func agentRunResult(ctx workflow.Context, in api.AgentRunInput) (json.RawMessage, error) {
	res, err := agentRun(ctx, in)
	if err != nil {
		return nil, err
	}
	if res.Output != nil && in.Parent == nil { // a delegate's parent reads its usage too
		return res.Output, nil
	}
	return json.Marshal(res)
}

func agentRun(ctx workflow.Context, in api.AgentRunInput) (api.AgentResult, error) {
	if strings.TrimSpace(in.Agent) == "" || strings.TrimSpace(in.Prompt) == "" {
		return api.AgentResult{}, temporal.NewNonRetryableApplicationError(
			`AgentRun needs {"agent": "<name>", "prompt": "<text>"}`, api.ErrTypeBadInput, nil)
	}
	spec, err := resolveAgent(ctx, in.Agent)
	if err != nil {
		return api.AgentResult{}, err
	}
	if in.MaxTurns > 0 {
		spec.MaxTurns = in.MaxTurns
	}
	rt, err := runtimeOf(ctx, "agent "+in.Agent)
	if err != nil {
		return api.AgentResult{}, err
	}
	rt.sandbox = spec.Sandbox // the run owns the agent's sandbox
	if in.Parent != nil {
		// A delegate (delegate.go): no run recorded before delegates had a parent.
		rt.depth = in.Parent.Depth
		rt.setState(ctx, api.StateParent, in.Parent)
	}
	if in.Fork != nil {
		return rt.runFork(ctx, spec, in)
	}
	return RunAgent(ctx, spec, in.Prompt)
}

// runFork runs a forked agent (`starter fork`): the thread of the source run as its call
// in.Fork.Call found it, the workspace restored from the snapshot that call found, and
// the model asked again from there (or the edited call run first). The source is not
// touched; only references travel (thread head, manifest).
func (rt *runtime) runFork(ctx workflow.Context, spec agents.Spec, in api.AgentRunInput) (api.AgentResult, error) {
	f := in.Fork
	rt.emit(ctx, "forked_from", map[string]any{"run": f.Run, "call": f.Call, "snapshot": f.Snapshot,
		"prompt": f.Prompt, "edited": f.Reply != nil})
	if f.Snapshot != "" {
		// Restored on the run's first sandbox use, wherever it claims a host (hostCtx).
		rt.host.snap = &api.SnapshotRef{Manifest: f.Snapshot}
		rt.host.snapCall = f.Call
		rt.parked = true
	}
	conv := newConversation(rt.threadVersion(ctx) >= 1, f.Thread, f.Messages, nil)
	if f.Prompt != "" {
		conv.add(api.ChatMessage{Role: api.RoleUser, Content: f.Prompt})
	}
	return rt.runAgentOn(ctx, spec, in.Prompt, conv, loopStyle{firstReply: f.Reply})
}

// RunAgent runs the agent on prompt inside the current run. The loop lives here, in the
// workflow: every model call and every tool call is an activity, so a crash between two
// calls loses nothing that was paid for, and a call that needs a human suspends the run
// (no worker is held) until nexo.approval decides it. The agent acts in the run's
// sandbox; its `produces` files are recorded as artifacts when it ends, also on failure.
func RunAgent(ctx workflow.Context, spec agents.Spec, prompt string) (api.AgentResult, error) {
	rt, err := runtimeOf(ctx, "agent "+spec.Name)
	if err != nil {
		return api.AgentResult{Agent: spec.Name}, err
	}
	return rt.runAgentOn(ctx, spec, prompt, nil, loopStyle{})
}

// runAgentOn is RunAgent on a given conversation (nil: a new one with prompt).
func (rt *runtime) runAgentOn(ctx workflow.Context, spec agents.Spec, prompt string, conv *conversation, style loopStyle) (api.AgentResult, error) {
	spec.Sandbox = rt.sandbox
	rt.sandboxUsed = true
	res := api.AgentResult{Agent: spec.Name}
	defer func() {
		dctx := ctx
		if ctx.Err() != nil {
			dctx, _ = workflow.NewDisconnectedContext(ctx)
		}
		rt.collectOutputs(dctx, spec.Produces)
		if len(spec.MCP) > 0 {
			rt.closeMCP(dctx)
		}
	}()
	skills, err := rt.prepareAgent(ctx, spec)
	if err != nil {
		return res, err
	}
	tools, err := rt.toolset(ctx, spec)
	if err != nil {
		return res, wrap(err, "agent %s", spec.Name)
	}
	start := map[string]any{"agent": spec.Name, "prompt": prompt, "tools": tools.names()}
	if len(spec.Skills) > 0 {
		start["skills"] = spec.Skills
	}
	rt.emit(ctx, "agent_start", start)
	if typed, err := newTypedOutput(spec); err != nil {
		return res, err
	} else if typed != nil {
		// The model is told in the system prompt (so the schema travels with the
		// instructions, by reference once threads are stored) rather than through a
		// provider's response_format, which not every OpenAI-compatible server has.
		spec.Instructions = strings.TrimSpace(spec.Instructions + "\n\n" + typed.instructions())
	}
	if conv == nil {
		conv = newConversation(rt.threadVersion(ctx) >= 1, nil, nil, nil)
		conv.add(api.ChatMessage{Role: api.RoleUser, Content: prompt})
	}
	res, err = rt.tracedAgentLoop(ctx, spec, tools, skills, conv, style)
	return res, err
}

// loopStyle is how a loop reports itself: a run records agent_* events; a session records
// the activity stream (text, tool_call start and update, ...) and may stream model output.
type loopStyle struct {
	session bool
	// idPrefix makes tool call ids unique across a session's prompts ("3." + "1.2").
	idPrefix string
	// streamTo is the workflow the model activity streams text to (sessions).
	streamTo string
	// firstReply, when set, is the reply of the first turn, run without asking the
	// model (a fork whose call was re-issued with edited arguments).
	firstReply *api.ChatMessage
	// steer, when set, returns the messages to add as user messages before the next
	// model call (a session's nexo.steer).
	steer func() []string
}

// agentLoop calls the model and the tools it asks for until the model answers without a
// tool call, growing conv. Every call is an activity. skills are the recorded skill texts
// every request carries (the worker puts them in the system message).
func (rt *runtime) agentLoop(ctx workflow.Context, spec agents.Spec, tools toolset, skills []string, conv *conversation, style loopStyle) (api.AgentResult, error) {
	res := api.AgentResult{Agent: spec.Name}
	// The inbox names the agent whose call waits (syncApprovalAttr).
	prevAgent := rt.agent
	rt.agent = spec.Name
	defer func() { rt.agent = prevAgent }()
	rt.notify.use(spec)
	defs := tools.defs()
	mctx := workflow.WithActivityOptions(ctx, modelCallOptionsFor(ctx, spec))
	var typed *typedOutput // output_schema: runs only, a session's replies stay text
	if !style.session {
		var err error
		if typed, err = newTypedOutput(spec); err != nil {
			return res, err
		}
	}
	corrections := 0
	for turn := 1; ; turn++ {
		if turn > spec.Turns() {
			rt.emit(ctx, "turn_limit_exceeded", map[string]int{"turns": turn - 1, "max_turns": spec.Turns()})
			return res, fmt.Errorf("agent %s: %w: %d model calls without a final answer (max_turns %d)",
				spec.Name, ErrTurnLimit, turn-1, spec.Turns())
		}
		callTag := fmt.Sprintf("%s%d", style.idPrefix, turn)
		if stopped, err := rt.budgetGate(ctx, spec, style, res.Usage, turn-1, callTag); err != nil {
			return res, err
		} else if stopped != "" {
			res.Content, res.Stopped = stopped, api.CapabilityBudget // a human said stop: done, not failed
			return res, nil
		}
		if style.steer != nil {
			for _, text := range style.steer() {
				conv.add(api.ChatMessage{Role: api.RoleUser, Content: text})
			}
		}
		if err := rt.compact(ctx, spec, conv); err != nil {
			return res, wrap(err, "agent %s: compact the thread before model call %d", spec.Name, turn)
		}
		req := api.CompleteChatRequest{Model: spec.Model, RunID: rt.rec.ID, Sandbox: spec.Sandbox, Endpoint: spec.LLM}
		conv.request(&req, spec, skills, defs, callTag)
		// A typed reply is checked here and becomes the run's result: it must come whole.
		req.KeepReply = typed != nil
		switch {
		case style.streamTo != "" && conv.byRef:
			// Live text goes to viewers through the call's heartbeat, not history; the
			// whole text is recorded once when the call returns.
			req.StreamLive, req.StreamCall = true, callTag
		case style.streamTo != "":
			req.StreamTo, req.StreamCall = style.streamTo, callTag
			rt.streamCall = callTag
		}
		if !conv.byRef {
			if size := len(mustJSON(req)); size > maxModelCallInput {
				rt.emit(ctx, "model_call_too_large", map[string]int{"bytes": size, "limit": maxModelCallInput})
				return res, fmt.Errorf("agent %s: %w: model call %d would carry %d bytes (instructions, skills, tools and a thread of %d messages), over the %d a workflow may pass to an activity; large tool results fill the thread fastest",
					spec.Name, ErrModelCallTooLarge, turn, size, conv.count(), maxModelCallInput)
			}
		}
		var out api.CompleteChatResult
		var err error
		given := turn == 1 && style.firstReply != nil
		switch {
		case given:
			out.Message = *style.firstReply
		case spec.Loop != nil && workflow.GetVersion(ctx, ChangeHarnessLoop, workflow.DefaultVersion, 1) >= 1:
			err = rt.loopStep(ctx, spec, req, &out) // harness.go
		default:
			err = workflow.ExecuteActivity(mctx, api.ActivityCompleteChat, req).Get(ctx, &out)
		}
		rt.streamCall = ""
		streamed := rt.streamed[callTag]
		delete(rt.streamed, callTag) // also when the call failed: a failed turn leaves nothing behind
		if err != nil {
			return res, wrap(err, "agent %s: model call %d", spec.Name, turn)
		}
		res.Turns = turn
		res.Usage.PromptTokens += out.Usage.PromptTokens
		res.Usage.CompletionTokens += out.Usage.CompletionTokens
		res.Usage.TotalTokens += out.Usage.TotalTokens
		rt.countUsage(spec.Name, orModel(out.Model, req.Model), out.Usage, &res.Usage, turn == 1)
		if !style.session {
			rt.emit(ctx, "agent_usage", usageEvent(turn, out))
		}
		msg := out.Message
		msg.Role = api.RoleAssistant
		// Our own call ids: unique in the run and short to type (`--call 3.1`), whatever
		// the provider uses (some repeat "call_0" every turn).
		for i := range msg.ToolCalls {
			msg.ToolCalls[i].ID = fmt.Sprintf("%s.%d", callTag, i+1)
		}
		if given {
			conv.add(msg) // never stored by a model call: it goes with the next one
		} else {
			conv.replied(out, msg)
		}
		rt.emitThinking(ctx, out, callTag, turn, style.session)
		if len(out.Plan) > 0 {
			rt.emitPlan(ctx, callTag, out.Plan) // a loop's plan line (harness.go)
		}
		if msg.Content != "" {
			switch {
			case style.session:
				// Chunks may have carried all of the text, part of it (the last signal and
				// the result can land in one workflow task, after the call is no longer
				// accepting chunks), or none: record what is missing, once.
				// A reply stored by reference was never streamed by signal (only threads
				// by reference store replies, and they stream live, through heartbeats).
				if rest, ok := strings.CutPrefix(msg.Content, streamed); ok && rest != "" {
					rt.emit(ctx, api.StreamText, replyText(msg, rest, map[string]any{"call": callTag}))
				}
			case len(msg.ToolCalls) > 0:
				rt.emit(ctx, api.EventAgentText, replyText(msg, msg.Content, map[string]any{}))
			}
		}
		if len(msg.ToolCalls) == 0 && typed != nil {
			output, problem := typed.parse(msg.Content)
			if problem != "" && workflow.GetVersion(ctx, ChangeTypedOutput, workflow.DefaultVersion, 1) >= 1 {
				if err := workflow.SideEffect(ctx, func(workflow.Context) any { return problem }).Get(&problem); err != nil {
					return res, wrap(err, "agent %s: record the output check of model call %d", spec.Name, turn)
				}
				left := typed.retries - corrections
				rt.emit(ctx, api.EventOutputInvalid, map[string]any{"turn": turn, "error": problem,
					"reply": clip(msg.Content, maxReplyEcho), "retries_left": max(left, 0)})
				if left <= 0 {
					return res, fmt.Errorf("agent %s: %w after %d retries (output_retries %d): %s",
						spec.Name, ErrOutputInvalid, corrections, typed.retries, problem)
				}
				corrections++
				conv.add(api.ChatMessage{Role: api.RoleUser, Content: correction(msg.Content, problem)})
				continue
			}
			res.Output = output
		}
		if len(msg.ToolCalls) == 0 {
			res.Content, res.ContentRef, res.ContentBytes = msg.Content, msg.ContentRef, msg.ContentBytes
			if !style.session {
				rt.emit(ctx, api.EventAgentDone, replyText(msg, msg.Content, map[string]any{"turns": turn}))
			}
			return res, nil
		}
		if done, err := rt.runToolCallsConcurrently(ctx, spec, tools, msg.ToolCalls, style.session, conv); done {
			if err != nil {
				return res, err
			}
			continue
		}
		for _, call := range msg.ToolCalls {
			result, err := rt.callTool(ctx, spec, tools, call, style.session, conv.byRef)
			if err != nil {
				return res, wrap(err, "agent %s: tool call %s (%s)", spec.Name, call.ID, call.Name)
			}
			conv.add(api.ChatMessage{Role: api.RoleTool, ToolCallID: call.ID, Content: result.Content,
				ContentRef: result.ContentRef, ContentBytes: result.ContentBytes, IsError: result.IsError})
		}
	}
}

// toolset is what the agent is offered: built-in tools its permissions can ever allow,
// and the MCP tools of its servers likewise.
type toolset struct {
	builtin []agents.Tool
	mcp     []api.MCPTool
	servers map[string]api.MCPServerSpec
	// a2a is, by tool name, where each A2A tool's calls go (its tools are in builtin).
	a2a map[string]api.A2AAgent
}

func (ts toolset) names() []string {
	var names []string
	for _, t := range ts.builtin {
		names = append(names, t.Name)
	}
	for _, t := range ts.mcp {
		names = append(names, t.QualifiedName)
	}
	return names
}

func (ts toolset) defs() []api.ToolDef {
	var defs []api.ToolDef
	for _, t := range ts.builtin {
		defs = append(defs, t.Def())
	}
	for _, t := range ts.mcp {
		params := t.InputSchema
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		defs = append(defs, api.ToolDef{Name: t.QualifiedName, Description: t.Description, Parameters: params})
	}
	return defs
}

// mcpCallOptions: a broken transport is retried a few times; then the model gets an error
// result naming the server, and the run goes on (the run never fails on it, so no budget
// of hours is needed here).
func mcpCallOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{api.ErrTypeBadInput, api.ErrTypeNotFound},
		},
	}
}

// mcpToolCallOptions are mcpCallOptions for one call of server's tools: a server timeout
// longer than the attempt's own bound widens that bound (the timeout plus time to connect),
// so the server's timeout, enforced inside CallMCPTool, is the one that ends a slow call.
// It changes an attribute of the call's command, not the commands (replay compares
// activity types, not timeouts), and a spec without a timeout keeps the options as they were.
func mcpToolCallOptions(server api.MCPServerSpec) workflow.ActivityOptions {
	o := mcpCallOptions()
	if t := time.Duration(server.Timeout) + time.Minute; t > o.StartToCloseTimeout {
		o.StartToCloseTimeout = t
	}
	return o
}

func (rt *runtime) toolset(ctx workflow.Context, spec agents.Spec) (toolset, error) {
	ts := toolset{builtin: append(agents.Offered(spec), delegateTools(spec, rt.depth)...), servers: map[string]api.MCPServerSpec{}}
	remotes, byTool, err := rt.a2aTools(ctx, spec)
	if err != nil {
		return ts, err
	}
	ts.builtin, ts.a2a = append(ts.builtin, remotes...), byTool
	if len(spec.MCP) == 0 {
		return ts, nil
	}
	for _, s := range spec.MCP {
		ts.servers[s.Name] = s
	}
	// The list is an activity: its result is in history, so replay never needs a live
	// server and the tools offered cannot change under a running agent.
	var list api.ListMCPToolsResult
	lctx := workflow.WithActivityOptions(ctx, mcpCallOptions())
	if err := workflow.ExecuteActivity(lctx, api.ActivityListMCPTools, api.ListMCPToolsRequest{RunID: rt.rec.ID, Servers: spec.MCP}).Get(ctx, &list); err != nil {
		return ts, wrap(err, "list MCP tools")
	}
	for _, name := range sortedKeys(list.Errors) {
		rt.emit(ctx, "mcp_server_error", map[string]string{"server": name, "error": list.Errors[name]})
	}
	byServer := map[string][]string{}
	for _, t := range list.Tools {
		if permissions.NeverAllowsMCP(spec.Permissions, t.QualifiedName) {
			continue
		}
		ts.mcp = append(ts.mcp, t)
		byServer[t.Server] = append(byServer[t.Server], t.Name)
	}
	rt.emit(ctx, "mcp_tools", byServer)
	return ts, nil
}

func (rt *runtime) closeMCP(ctx workflow.Context) {
	cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, HeartbeatTimeout: ActivityHeartbeatTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
	if err := workflow.ExecuteActivity(cctx, api.ActivityCloseMCP, api.CloseMCPRequest{RunID: rt.rec.ID}).Get(ctx, nil); err != nil {
		rt.emit(ctx, "mcp_close_failed", map[string]string{"error": errorMessage(err)})
	}
}

// callTool decides and runs one tool call. A tool that runs and fails, a denied call and
// a malformed call are results the model sees; only broken infrastructure is an error.
func (rt *runtime) callTool(ctx workflow.Context, spec agents.Spec, tools toolset, call api.ToolCall, session, byRef bool) (api.RunToolResult, error) {
	call = rt.inToolDir(call) // a session prompt's dir (session.go)
	var args map[string]any
	argErr := json.Unmarshal([]byte(orEmptyObject(call.Arguments)), &args)
	rt.emitToolStarted(ctx, call, args, session)

	storeOver := 0
	if byRef {
		storeOver = api.DefaultStoreOver
	}
	result, err := rt.decideAndRun(ctx, spec, tools, call, args, argErr, storeOver)
	if err != nil {
		return result, err
	}
	rt.emitToolEnded(ctx, call, result, session)
	return result, nil
}

func orEmptyObject(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

func argsForEvent(args map[string]any, raw string) any {
	if args != nil {
		return args
	}
	return raw
}

func errorResult(format string, a ...any) api.RunToolResult {
	return api.RunToolResult{Content: "error: " + fmt.Sprintf(format, a...), IsError: true}
}

func (rt *runtime) decideAndRun(ctx workflow.Context, spec agents.Spec, tools toolset, call api.ToolCall, args map[string]any, argErr error, storeOver int) (api.RunToolResult, error) {
	var (
		tool    agents.Tool
		mcpTool *api.MCPTool
	)
	for _, t := range tools.builtin {
		if t.Name == call.Name {
			tool = t
		}
	}
	for i, t := range tools.mcp {
		if t.QualifiedName == call.Name {
			mcpTool = &tools.mcp[i]
		}
	}
	if tool.Name == "" && mcpTool == nil {
		return errorResult("unknown tool %q (available: %s)", call.Name, strings.Join(tools.names(), ", ")), nil
	}
	if argErr != nil {
		return errorResult("arguments of %s are not a JSON object: %v", call.Name, argErr), nil
	}
	pc := permissions.Call{Capability: tool.Capability, Tool: tool.Name, Detail: agents.Detail(tool.Name, args), Args: args}
	if mcpTool != nil {
		pc = permissions.Call{Capability: permissions.CapMCP, Tool: mcpTool.QualifiedName, Args: args}
	}
	v := permissions.Decide(spec.Permissions, pc, rt.approvals)
	note := "" // tells the model when a human edited its call
	switch v.Decision {
	case permissions.Allow:
	case permissions.NeedsApproval:
		d, err := rt.tracedApproval(ctx, call, pc, v.Deadline)
		if err != nil {
			return api.RunToolResult{}, err
		}
		if d.Always {
			rt.approvals = rt.approvals.Remember(pc, d.Action == api.DecideApprove)
		}
		switch d.Action {
		case api.DecideDeny:
			reason := d.Reason
			if reason == "" {
				reason = "no reason given"
			}
			if d.By == decidedByTimeout {
				return errorResult("this %s call was denied: %s (its approval_timeout passed)", pc.Tool, reason), nil
			}
			return errorResult("a human denied this %s call: %s", pc.Tool, reason), nil
		case api.DecideAnswer:
			return api.RunToolResult{Content: "A human answered this call instead of running " + pc.Tool + "; their answer:\n" + d.Result}, nil
		}
		if len(d.Args) > 0 {
			edited := compactJSON(d.Args)
			call.Arguments = string(edited)
			args = nil
			_ = json.Unmarshal(edited, &args) // the validator made sure it is an object
			pc.Args, pc.Detail = args, ""
			if mcpTool == nil {
				pc.Detail = agents.Detail(tool.Name, args)
			}
			note = fmt.Sprintf("A human edited this call's arguments to %s\n", edited)
			// The edited call is decided again, as a model's call would be: an edit that
			// leaves the workspace, or that a remembered "never" covers, is refused with
			// the reason. An edit that would itself need approval is approved by the very
			// human who wrote it: the tool, hence the capability, cannot change by editing.
			if why := escapesWorkspace(tool.Name, args); why != "" {
				return errorResult("%spermission denied: the edited %s call %s", note, pc.Tool, why), nil
			}
			if v := permissions.Decide(spec.Permissions, pc, rt.approvals); v.Decision == permissions.Deny {
				return errorResult("%spermission denied: the edited call: %s", note, v.Reason), nil
			}
		}
	default:
		return errorResult("permission denied: %s", v.Reason), nil
	}
	res, err := rt.runAllowed(ctx, spec, tools, tool, mcpTool, call, pc, storeOver, note)
	if err == nil && note != "" && (mcpTool != nil || tools.a2a[tool.Name].Remote != "") && !res.Noted {
		// CallMCPTool writes the note before it stores a result (Noted), so a result by
		// reference tells the model of the edit too. A result recorded before that, an
		// error result, or one from a worker without it, gets the note here, as always.
		res.Content = note + res.Content
	}
	return res, err
}

// escapesWorkspace says how a file tool's path leaves the workspace, or "". It is the
// check an edited call gets before it runs; the sandbox refuses such a path anyway (and
// symbolic links), this names the edit as the cause.
func escapesWorkspace(tool string, args map[string]any) string {
	key := map[string]string{agents.ToolReadFile: "path", agents.ToolWriteFile: "path", agents.ToolGlob: "pattern"}[tool]
	p, _ := args[key].(string)
	if key == "" || p == "" {
		return ""
	}
	clean := path.Clean(p)
	if path.IsAbs(clean) {
		if clean == "/workspace" || strings.HasPrefix(clean, "/workspace/") {
			return ""
		}
		return fmt.Sprintf("names %s, outside the workspace", p)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Sprintf("names %s, which leads outside the workspace", p)
	}
	return ""
}

// runAllowed runs a call the permissions (or a human) allowed.
func (rt *runtime) runAllowed(ctx workflow.Context, spec agents.Spec, tools toolset, tool agents.Tool, mcpTool *api.MCPTool, call api.ToolCall, pc permissions.Call, storeOver int, note string) (api.RunToolResult, error) {
	if tool.Name == agents.ToolUpdatePlan {
		return rt.updatePlan(ctx, call), nil
	}
	if agent, ok := delegateOf(spec, tool.Name); ok {
		return rt.runDelegate(ctx, spec, agent, call, pc.Args, storeOver)
	}
	release, err := rt.toolSlot(ctx) // tool_concurrency (toolpar.go)
	if err != nil {
		return api.RunToolResult{}, err
	}
	defer release()
	if remote, ok := spec.A2ARemoteOf(tool.Name); ok && mcpTool == nil {
		return rt.callA2A(ctx, remote, tools.a2a[tool.Name], call, pc.Args, storeOver, note)
	}
	if mcpTool != nil {
		res := rt.callMCP(ctx, tools.servers[mcpTool.Server], *mcpTool, call, storeOver, note, spec.ToolHooks)
		rt.noteHooked(ctx, call.ID, tool.Name, &res)
		return res, nil
	}

	req := api.RunToolRequest{RunID: rt.rec.ID, Sandbox: spec.Sandbox, CallID: call.ID, Tool: tool.Name,
		Args: json.RawMessage(orEmptyObject(call.Arguments)), FetchAllow: spec.FetchAllow, StoreOver: storeOver, Note: note,
		Base: rt.snapshotBase(), Dir: rt.toolDir, Hooks: spec.ToolHooks}
	snapshots := (tool.Name == agents.ToolWriteFile || tool.Name == agents.ToolShell) && rt.snapshotsOn(ctx)
	req.Snapshot = snapshots
	key := ""
	if tool.Name == agents.ToolWriteFile || tool.Name == agents.ToolReadFile {
		key = stampKey(pc.Detail)
		if st, ok := rt.stamps[key]; ok {
			req.Seen = &st
		}
	}
	var res api.RunToolResult
	opts := toolCallOptions()
	if err := rt.onSandbox(ctx, &opts, api.ActivityRunTool, req, &res); err != nil {
		return api.RunToolResult{}, &wrapError{err: err}
	}
	rt.noteToolSnapshot(ctx, call.ID, &res)
	rt.noteEgress(ctx, call.ID, &res)
	rt.noteHooked(ctx, call.ID, tool.Name, &res)
	if !snapshots {
		rt.parkIfDue(ctx, tool.Name) // runs recorded before snapshots: one every park_every (hostq.go)
	}
	if key != "" && res.Stamp != nil {
		if rt.stamps == nil {
			rt.stamps = map[string]api.FileStamp{}
		}
		rt.stamps[key] = *res.Stamp
	}
	return res, nil
}

func stampKey(p string) string {
	return path.Clean(strings.TrimPrefix(p, "/workspace/"))
}

// decidedByTimeout is the "by" of a decision the deadline made.
const decidedByTimeout = "timeout"

// awaitApproval records the pending call, suspends the run until nexo.approval or
// nexo.decide names it, and returns the decision. Nothing before the gate runs again: the
// run continues here.
//
// A call with a deadline (dl, from the policy or the approve_when rule that made it need
// approval) also starts a durable timer, cancelled when a decision arrives; when it fires
// first, deny and approve decide the call "by timeout", escalate emits approval_escalated
// and the call keeps waiting with no further deadline.
func (rt *runtime) awaitApproval(ctx workflow.Context, call api.ToolCall, pc permissions.Call, dl permissions.Deadline) (api.DecideRequest, error) {
	now := workflow.Now(ctx).UTC()
	args := json.RawMessage(orEmptyObject(call.Arguments))
	if !json.Valid(args) {
		args, _ = json.Marshal(call.Arguments)
	}
	args = compactJSON(args)
	sum := api.ArgsSHA256(args)
	detail := pc.Tool
	if pc.Detail != "" {
		detail += " " + pc.Detail
	}
	info := api.ApprovalInfo{CallID: call.ID, Capability: string(pc.Capability), Tool: pc.Tool, Detail: pc.Detail, Args: args, ArgsSHA256: sum, At: now}
	// Only a spec with an approval_timeout gets the timer (specs recorded before
	// deadlines have none, so their histories never ask the version).
	timeout := dl.Duration()
	if timeout > 0 && workflow.GetVersion(ctx, ChangeApprovalDeadline, workflow.DefaultVersion, 1) < 1 {
		timeout = 0
	}
	if timeout > 0 {
		at := now.Add(timeout)
		info.ExpiresAt, info.OnTimeout = &at, string(dl.Action())
	}
	rt.setState(ctx, api.StateApproval, info)
	rt.setState(ctx, api.StateSuspend, api.SuspendInfo{Reason: "approval: " + detail, ResumeKey: call.ID, At: now})
	rt.pending = &approvalWaiter{callID: call.ID, tool: pc.Tool, argsSHA: sum}
	requested := map[string]any{"call_id": call.ID, "tool": pc.Tool, "capability": pc.Capability, "detail": pc.Detail, "args": pc.Args}
	if info.ExpiresAt != nil {
		requested["expires_at"], requested["on_timeout"] = info.ExpiresAt, info.OnTimeout
	}
	rt.emitApproval(ctx, api.EventApprovalRequested, call.ID, requested)
	rt.setStatus(ctx, api.StatusSuspended)

	expired := false
	cancelTimer := func() {}
	if timeout > 0 {
		tctx, cancel := workflow.WithCancel(ctx)
		cancelTimer = cancel
		timer := workflow.NewTimer(tctx, timeout)
		workflow.Go(ctx, func(gctx workflow.Context) {
			if timer.Get(gctx, nil) == nil {
				expired = true
			}
		})
	}
	wait := rt.waitForHuman
	for {
		err := wait(ctx, func() bool { return rt.pending.decision != nil || expired })
		if err != nil {
			cancelTimer()
			rt.pending = nil
			return api.DecideRequest{}, err
		}
		if rt.pending.decision != nil {
			cancelTimer() // a no-op once the timer fired
			break
		}
		expired = false
		if dl.Action() != permissions.OnTimeoutEscalate {
			action := api.DecideDeny
			if dl.Action() == permissions.OnTimeoutApprove {
				action = api.DecideApprove
			}
			rt.pending.decision = &api.DecideRequest{CallID: call.ID, Action: action, By: decidedByTimeout,
				Reason: "no decision within " + dl.Timeout}
			break
		}
		// Escalate: tell whoever listens (notifications hook approval events) and keep
		// waiting, now with no deadline.
		info.ExpiresAt, info.Escalated = nil, true
		rt.setState(ctx, api.StateApproval, info)
		rt.emitApproval(ctx, api.EventApprovalEscalated, call.ID, map[string]any{"call_id": call.ID, "tool": pc.Tool, "capability": pc.Capability,
			"detail": pc.Detail, "args": pc.Args, "after": dl.Timeout})
		if rt.parked {
			// The workspace is archived already; nothing more to park.
			wait = func(ctx workflow.Context, cond func() bool) error { return workflow.Await(ctx, cond) }
		}
	}
	d := *rt.pending.decision
	rt.pending = nil
	delete(rt.rec.State, api.StateApproval)
	delete(rt.rec.State, api.StateSuspend)
	how := d.Action + "d"
	if d.Action == api.DecideAnswer {
		how = "answered"
	}
	if d.By != "" {
		how += " by " + d.By
	}
	rt.rememberDecided(call.ID, how)
	data := map[string]any{"call_id": call.ID, "tool": pc.Tool, "action": d.Action, "approved": d.Action == api.DecideApprove,
		"reason": d.Reason, "by": d.By, "always": d.Always}
	switch {
	case len(d.Args) > 0:
		data["args"], data["edited_args"] = args, compactJSON(d.Args)
	case d.Action == api.DecideAnswer:
		data["result"] = d.Result
	}
	rt.emitApproval(ctx, api.EventApprovalDecided, call.ID, data)
	rt.setStatus(ctx, api.StatusRunning)
	return d, nil
}

// collectOutputs records the agent's declared outputs as artifacts. Errors never mask
// the agent's outcome: each becomes an artifact_skipped event.
func (rt *runtime) collectOutputs(ctx workflow.Context, patterns []string) {
	if len(patterns) == 0 {
		return
	}
	var paths []string
	req := api.CollectOutputsRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox, Patterns: patterns}
	if err := rt.onSandbox(ctx, nil, api.ActivityCollectOutputs, req, &paths); err != nil {
		rt.emit(ctx, "artifact_skipped", map[string]string{"error": errorMessage(err)})
		return
	}
	sort.Strings(paths)
	used := map[string]bool{}
	for _, p := range paths {
		// Named by file name; two outputs with one name (a/report.md, b/report.md) keep
		// their paths, flattened, so neither replaces the other.
		name := path.Base(p)
		if used[name] {
			name = strings.ReplaceAll(p, "/", "__")
		}
		used[name] = true
		if _, err := Artifact(ctx, name, ArtifactSource{Path: p}); err != nil {
			rt.emit(ctx, "artifact_skipped", map[string]string{"path": p, "error": err.Error()})
		}
	}
}

// callMCP runs an allowed MCP call. A server that keeps failing after the bounded retries
// gives the model an error result naming the server; the run goes on.
func (rt *runtime) callMCP(ctx workflow.Context, server api.MCPServerSpec, tool api.MCPTool, call api.ToolCall, storeOver int, note string, hooks []string) api.RunToolResult {
	req := api.CallMCPToolRequest{RunID: rt.rec.ID, CallID: call.ID, Server: server, Tool: tool.Name,
		Args: json.RawMessage(orEmptyObject(call.Arguments)), StoreOver: storeOver, Note: note, Hooks: hooks}
	var res api.RunToolResult
	mctx := workflow.WithActivityOptions(ctx, mcpToolCallOptions(server))
	if err := workflow.ExecuteActivity(mctx, api.ActivityCallMCPTool, req).Get(ctx, &res); err != nil {
		return errorResult("MCP server %s: %s failed: %s", server.Name, tool.Name, errorMessage(err))
	}
	return res
}

// replyText is the data of an event that carries reply text content (api.IsReplyText):
// data plus "content", and for a reply stored by reference (api.TextInlineMax) its
// preview as content, "content_ref" and "bytes", which readers resolve to the whole text.
// History thus holds the reference, never the text (ARCHITECTURE §10).
func replyText(msg api.ChatMessage, content string, data map[string]any) map[string]any {
	if msg.ContentRef != "" {
		// A typed agent's reply comes whole (KeepReply) with its reference: the event
		// keeps a preview of it, as for any reply stored by reference.
		if len(content) > api.TextInlineMax {
			content = clip(content, api.PreviewBytes)
		}
		data["content_ref"], data["bytes"] = msg.ContentRef, msg.ContentBytes
	}
	data["content"] = content
	return data
}
