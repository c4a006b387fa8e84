package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// The gateway as an MCP server: /mcp speaks MCP over streamable HTTP (mcp-go's server),
// so an MCP client (another agent, an IDE) runs the platform's agents and decides what
// they wait for as tools. It is one more face of the same API: every tool does what its
// HTTP route does, through the same Runs (limits included), and needs the same scope.
//
// The route itself only needs a token (any scope): the scope is checked per tool call,
// since one MCP session calls tools of different scopes. A call without the scope is a
// tool error naming it, so a model using the tools sees why.

const (
	// mcpPath is where the MCP server answers.
	mcpPath = "/mcp"
	// mcpRunPrefix names the tool of an agent: run_<agent>.
	mcpRunPrefix = "run_"

	mcpGetRun         = "get_run"
	mcpListApprovals  = "list_approvals"
	mcpDecideApproval = "decide_approval"
)

// MCPRun is what run_<agent> (with wait) and get_run answer: a run's outcome, without
// its events and checkpoints (GET /v1/runs/{id} has the whole record).
type MCPRun struct {
	ID       string          `json:"id"`
	Workflow string          `json:"workflow"`
	Status   api.Status      `json:"status"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *string         `json:"error,omitempty"`
	// Approval is the tool call a suspended run waits for (decide it with
	// decide_approval); Suspend the workflow's own pause (call id "suspend").
	Approval *api.ApprovalInfo `json:"approval,omitempty"`
	Suspend  *api.SuspendInfo  `json:"suspend,omitempty"`
	Usage    *api.RunUsage     `json:"usage,omitempty"`
}

// MCPStarted is what run_<agent> answers with wait false.
type MCPStarted struct {
	ID      string `json:"id"`
	Agent   string `json:"agent"`
	Message string `json:"message"`
}

func mcpRunOf(rec api.Record) MCPRun {
	out := MCPRun{ID: rec.ID, Workflow: rec.Workflow, Status: rec.Status, Error: rec.Error, Usage: rec.Usage}
	if len(rec.Result) > 0 && string(rec.Result) != "null" {
		out.Result = rec.Result
	}
	if !rec.Status.Closed() {
		if a, ok := rec.Approval(); ok {
			out.Approval = &a
		} else if si, ok := rec.Suspend(); ok {
			out.Suspend = &si
		}
	}
	return out
}

// checkAgentTools refuses agent names that cannot be tools (MCP tool names are letters,
// digits, _, - and .) or that repeat.
func checkAgentTools(agents []string) error {
	seen := map[string]bool{}
	for _, a := range agents {
		if a == "" || strings.IndexFunc(a, func(r rune) bool {
			return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))) && r != '_' && r != '-' && r != '.'
		}) >= 0 || len(mcpRunPrefix+a) > 128 {
			return fmt.Errorf("new gateway: agent %q cannot be the MCP tool %s%s: want letters, digits, _, - and . (at most %d)", a, mcpRunPrefix, a, 128-len(mcpRunPrefix))
		}
		if seen[a] {
			return fmt.Errorf("new gateway: agent %q is listed twice in Options.Agents", a)
		}
		seen[a] = true
	}
	return nil
}

// newMCP builds the /mcp handler: the tools of agents, get_run and the approvals inbox.
func (s *Server) newMCP(agents []string) http.Handler {
	ms := server.NewMCPServer("nexo-gateway", "1",
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions("Nexo runs durable agents. run_<agent> runs an agent on a prompt; "+
			"a run that waits for a human shows its pending tool call, which list_approvals lists and decide_approval decides; get_run reads a run."),
		// A limited token lists (and calls) the tools of its agents only.
		server.WithToolFilter(func(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
			p := principalFrom(ctx)
			if p == nil || p.limits.Unlimited() {
				return tools
			}
			return slices.DeleteFunc(tools, func(t mcp.Tool) bool {
				agent, ok := strings.CutPrefix(t.Name, mcpRunPrefix)
				return ok && !p.limits.admits(api.WorkflowAgentRun, agent)
			})
		}),
	)
	for _, a := range agents {
		ms.AddTool(mcp.NewTool(mcpRunPrefix+a,
			mcp.WithDescription(fmt.Sprintf("Run agent %s on a prompt (an AgentRun run; needs scope %s). "+
				"With wait (the default) it answers when the run is done, failed, or waiting for a human decision "+
				"(its pending tool call is in approval: decide it with decide_approval); with wait false it answers the run id at once.", a, api.ScopeOperate)),
			mcp.WithString("prompt", mcp.Required(), mcp.Description("what the agent is to do")),
			mcp.WithBoolean("wait", mcp.DefaultBool(true), mcp.Description("wait for the run's result (default true); false answers the run id at once")),
			mcp.WithOpenWorldHintAnnotation(true),
			mcp.WithDestructiveHintAnnotation(true),
		), s.mcpTool(api.ScopeOperate, s.mcpRunAgent(a)))
	}
	ms.AddTool(mcp.NewTool(mcpGetRun,
		mcp.WithDescription("Read a run's record: its status, result, error, and what it waits for (needs scope "+api.ScopeRead+")."),
		mcp.WithString("id", mcp.Required(), mcp.Description("the run id")),
		mcp.WithReadOnlyHintAnnotation(true),
	), s.mcpTool(api.ScopeRead, s.mcpGetRun))
	ms.AddTool(mcp.NewTool(mcpListApprovals,
		mcp.WithDescription("List every tool call waiting for a human decision, in every open run and session, oldest first (needs scope "+api.ScopeRead+")."),
		mcp.WithString("agent", mcp.Description("only the calls of this agent")),
		mcp.WithReadOnlyHintAnnotation(true),
	), s.mcpTool(api.ScopeRead, s.mcpListApprovals))
	ms.AddTool(mcp.NewTool(mcpDecideApproval,
		mcp.WithDescription("Approve or deny a pending tool call of a run (a row of list_approvals), or with call_id \"suspend\" "+
			"a workflow's own pause (needs scope "+api.ScopeApprove+"). A denial needs a reason, which the model or the workflow sees."),
		mcp.WithString("run", mcp.Required(), mcp.Description("the run id (a row's run)")),
		mcp.WithString("call_id", mcp.Required(), mcp.Description("the pending call's id (a row's call_id), or \"suspend\"")),
		mcp.WithString("decision", mcp.Required(), mcp.Enum(api.DecideApprove, api.DecideDeny)),
		mcp.WithString("reason", mcp.Description("why; required to deny")),
		mcp.WithString("by", mcp.Description("the person the token acts for, recorded after the token's name")),
		mcp.WithDestructiveHintAnnotation(true),
	), s.mcpTool(api.ScopeApprove, s.mcpDecide))

	h := server.NewStreamableHTTPServer(ms,
		// No standalone GET stream: the tools never change and nothing is pushed, so a
		// client's GET gets 405, which the transport allows; every answer comes on its POST.
		server.WithDisableStreaming(true),
		// The gateway's guard already refuses, on an open gateway, any Host that is not
		// this machine; with tokens the token is what admits a request, as on /v1.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(s.logger),
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A tool call that waits for a run lasts as long as the run: it ends with the
		// gateway, as event streams do.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// mcpHandler answers a tool call with a result; an error it returns is the tool error
// the client sees.
type mcpHandler func(ctx context.Context, name string, args json.RawMessage) (any, bool, error)

// mcpTool checks the caller's scope, then runs h: its value is the JSON result, its error
// (or isError true) a tool error.
func (s *Server) mcpTool(scope string, h mcpHandler) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name := req.Params.Name
		if p := principalFrom(ctx); !p.has(scope) {
			who, has := "this request", "none"
			if p != nil {
				who, has = "token "+p.name, strings.Join(p.scopes, ", ")
			}
			return mcp.NewToolResultError(fmt.Sprintf("%s lacks scope %s, which tool %s needs (it has: %s)", who, scope, name, has)), nil
		}
		args, err := json.Marshal(req.GetRawArguments())
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("%s: arguments: %v", name, err)), nil
		}
		v, isErr, err := h(ctx, name, args)
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil, err // the client went away, or the gateway stops
			}
			if statusOf(err) >= 500 {
				s.logger.Error("gateway MCP tool failed", "tool", name, "error", err)
			}
			return mcp.NewToolResultError(fmt.Sprintf("%s: %v", name, err)), nil
		}
		res, err := mcp.NewToolResultJSON(v)
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("%s: %v", name, err)), nil
		}
		res.IsError = isErr
		return res, nil
	}
}

// mcpArgs decodes a tool's arguments into v as the HTTP API decodes a body: an unknown
// argument is refused by name (with the one meant), a value of the wrong type too.
func mcpArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if _, err := decodeStrict(args, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badInput("argument %s: want a %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return badInput("arguments: %s", strings.Replace(err.Error(), "unknown field", "unknown argument", 1))
	}
	return nil
}

// mcpRunAgent is run_<agent>: POST /v1/runs of an AgentRun, then (with wait) following
// the run as `starter agent --wait` does, until it closes or waits for a decision.
func (s *Server) mcpRunAgent(agent string) mcpHandler {
	return func(ctx context.Context, name string, args json.RawMessage) (any, bool, error) {
		var in struct {
			Prompt *string `json:"prompt"`
			Wait   *bool   `json:"wait"`
		}
		if err := mcpArgs(args, &in); err != nil {
			return nil, false, err
		}
		if in.Prompt == nil || strings.TrimSpace(*in.Prompt) == "" {
			return nil, false, badInput("prompt is required: what agent %s is to do", agent)
		}
		payload, err := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: *in.Prompt})
		if err != nil {
			return nil, false, err
		}
		rs := s.runsFor(ctx)
		id, err := rs.Start(ctx, runs.StartRequest{Workflow: api.WorkflowAgentRun, Payload: payload})
		if err != nil {
			return nil, false, fmt.Errorf("start agent %s: %w", agent, err)
		}
		if in.Wait != nil && !*in.Wait {
			return MCPStarted{ID: id, Agent: agent, Message: fmt.Sprintf("started run %s of agent %s; get_run reads it", id, agent)}, false, nil
		}
		rec, err := rs.Follow(ctx, id, func(rec api.Record) bool {
			return rec.Status.Closed() || rec.Status == api.StatusSuspended
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("started run %s of agent %s, then could not follow it (the run goes on; get_run reads it): %w", id, agent, err)
		}
		out := mcpRunOf(rec)
		// The agent did not do what it was asked: a tool error, with the run's outcome.
		failed := rec.Status == api.StatusFailed || rec.Status == api.StatusInterrupted || rec.Status == api.StatusCanceled
		return out, failed, nil
	}
}

// mcpGetRun is get_run: GET /v1/runs/{id}.
func (s *Server) mcpGetRun(ctx context.Context, name string, args json.RawMessage) (any, bool, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := mcpArgs(args, &in); err != nil {
		return nil, false, err
	}
	if strings.TrimSpace(in.ID) == "" {
		return nil, false, badInput("id is required: the run id (run_<agent> and list_approvals give it)")
	}
	rec, err := s.runsFor(ctx).Get(ctx, in.ID)
	if err != nil {
		return nil, false, err
	}
	return mcpRunOf(rec), false, nil
}

// mcpListApprovals is list_approvals: GET /v1/approvals[?agent=].
func (s *Server) mcpListApprovals(ctx context.Context, name string, args json.RawMessage) (any, bool, error) {
	var in struct {
		Agent *string `json:"agent"`
	}
	if err := mcpArgs(args, &in); err != nil {
		return nil, false, err
	}
	var req runs.ApprovalsRequest
	if in.Agent != nil {
		if err := checkAgentName(*in.Agent); err != nil {
			return nil, false, err
		}
		req.Agent = *in.Agent
	}
	rows, err := s.runsFor(ctx).Approvals(ctx, req)
	if err != nil {
		return nil, false, err
	}
	if rows == nil {
		rows = []runs.Pending{}
	}
	return ApprovalList{Approvals: rows}, false, nil
}

// mcpDecide is decide_approval: POST /v1/runs/{run}/approvals/{call_id} with action
// approve or deny.
func (s *Server) mcpDecide(ctx context.Context, name string, args json.RawMessage) (any, bool, error) {
	var in struct {
		Run      string `json:"run"`
		CallID   string `json:"call_id"`
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
		By       string `json:"by"`
	}
	if err := mcpArgs(args, &in); err != nil {
		return nil, false, err
	}
	switch {
	case strings.TrimSpace(in.Run) == "":
		return nil, false, badInput("run is required: the run id (a row of list_approvals has it)")
	case strings.TrimSpace(in.CallID) == "":
		return nil, false, badInput("call_id is required: the pending call's id (a row of list_approvals has it), or %q for a workflow's own pause", SuspendCallID)
	case in.Decision != api.DecideApprove && in.Decision != api.DecideDeny:
		return nil, false, badInput("decision %q: want %s or %s", in.Decision, api.DecideApprove, api.DecideDeny)
	case in.Decision == api.DecideDeny && strings.TrimSpace(in.Reason) == "":
		return nil, false, badInput("a denial needs a reason (the workflow or the model sees it)")
	case len(in.By) > maxByLength || strings.IndexFunc(in.By, unicode.IsControl) >= 0:
		return nil, false, badInput("by: want at most %d characters without control characters", maxByLength)
	}
	approved := in.Decision == api.DecideApprove
	d := runs.Decision{Approved: approved, Action: in.Decision, Reason: in.Reason, By: principalFrom(ctx).decider(in.By)}
	var (
		what string
		err  error
	)
	if in.CallID == SuspendCallID {
		what, err = s.decideSuspend(ctx, in.Run, d)
	} else {
		d.CallID = in.CallID
		what, _, err = s.runsFor(ctx).Decide(ctx, in.Run, d)
	}
	if err != nil {
		return nil, false, err
	}
	return Accepted{ID: in.Run, Message: what, CallID: in.CallID, Approved: &approved, Action: in.Decision, By: d.By}, false, nil
}
