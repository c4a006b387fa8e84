package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// The gateway as an Agent2Agent server: each configured agent has an agent card at
// /a2a/<agent>/.well-known/agent-card.json and a JSON-RPC endpoint at /a2a/<agent>
// (a2a-go's server transport over a handler of ours). It is one more face of the same
// API, as /mcp is: a task is a run (task id = run id), every method does what its HTTP
// route does through the same Runs (token limits included) and needs the same scope.
//
// Nothing is kept here: a task is read from its run each time, so the gateway may
// restart, or another gateway answer, between a client's calls.
//
// A run waiting for a human is input-required; the client answers it with a message on
// the task whose text starts with "approve" or "deny" (then the reason), which needs
// scope approve. The inbox (starter approve, the API) decides the same call.

const (
	// a2aPrefix is where the agents answer: /a2a/<agent>.
	a2aPrefix = "/a2a/"
	// a2aCardPath is the card's path under an agent's prefix (A2A's well-known name).
	a2aCardPath = "/.well-known/agent-card.json"
	// a2aScheme names the bearer scheme in the cards.
	a2aScheme = "bearer"
)

// a2aAgents holds the JSON-RPC handler of each agent the gateway serves.
type a2aAgents map[string]http.Handler

func (s *Server) newA2A(agents []string) a2aAgents {
	out := a2aAgents{}
	for _, a := range agents {
		out[a] = a2asrv.NewJSONRPCHandler(&a2aAgent{s: s, agent: a})
	}
	return out
}

// a2aUnknownAgent says which agents there are.
func (s *Server) a2aUnknownAgent(agent string) string {
	names := make([]string, 0, len(s.a2a))
	for n := range s.a2a {
		names = append(names, n)
	}
	slices.Sort(names)
	return fmt.Sprintf("agent %q is not served over A2A here (agents: %s)", agent, strings.Join(names, ", "))
}

// a2aAdmits reports whether the caller may see agent: a configured agent its token's
// limits admit. A limited token is told of another agent what an unknown one gets.
func (s *Server) a2aAdmits(ctx context.Context, agent string) bool {
	if _, ok := s.a2a[agent]; !ok {
		return false
	}
	p := principalFrom(ctx)
	return p == nil || p.limits.Unlimited() || p.limits.admits(api.WorkflowAgentRun, agent)
}

// a2aCard serves GET /a2a/{agent}/.well-known/agent-card.json (any token).
func (s *Server) a2aCard(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	if !s.a2aAdmits(r.Context(), agent) {
		problem(w, r, http.StatusNotFound, s.a2aUnknownAgent(agent))
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	card := a2aCardOf(agent, scheme+"://"+r.Host+a2aPrefix+agent, s.Open())
	w.Header().Set("Content-Type", "application/json")
	if err := encodeJSON(w, card); err != nil {
		s.logger.Warn("gateway A2A card not sent", "agent", agent, "error", err)
	}
}

// a2aCardOf is the card of agent, whose JSON-RPC endpoint is url.
func a2aCardOf(agent, url string, open bool) *a2a.AgentCard {
	card := &a2a.AgentCard{
		Name: agent,
		Description: fmt.Sprintf("Nexo agent %s: a message starts a durable run of it on the message's text; "+
			"the task is the run. A run waiting for a tool approval is input-required: answer with a message on the task "+
			"saying \"approve\" or \"deny <reason>\".", agent),
		URL:                url,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1",
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID: "run", Name: "run " + agent, Tags: []string{"agent"},
			Description: fmt.Sprintf("Run agent %s on a prompt; the result is the task's artifact.", agent),
		}},
	}
	if !open {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{a2aScheme: a2a.HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "a gateway token (gateway.tokens): read for tasks/get, operate to send and cancel, approve to decide",
		}}
		card.Security = []a2a.SecurityRequirements{{a2aScheme: a2a.SecuritySchemeScopes{}}}
	}
	return card
}

// a2aRPC serves POST /a2a/{agent}: any token gets in, each method checks its scope.
func (s *Server) a2aRPC(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	if !s.a2aAdmits(r.Context(), agent) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
			"code": -32602, "message": a2a.ErrInvalidParams.Error(), "data": map[string]any{"error": s.a2aUnknownAgent(agent)},
		}})
		return
	}
	// A blocking send or a stream lasts as long as its run: it ends with the gateway.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel)
	defer stop()
	s.a2a[agent].ServeHTTP(w, r.WithContext(ctx))
}

// a2aAgent is a2a-go's RequestHandler for one agent.
type a2aAgent struct {
	s     *Server
	agent string
}

var _ a2asrv.RequestHandler = (*a2aAgent)(nil)

// need refuses a caller without scope, naming the method.
func (h *a2aAgent) need(ctx context.Context, scope, method string) error {
	p := principalFrom(ctx)
	if p.has(scope) {
		return nil
	}
	who, has := "this request", "none"
	if p != nil {
		who, has = "token "+p.name, strings.Join(p.scopes, ", ")
	}
	return fmt.Errorf("%w: %s lacks scope %s, which %s needs (it has: %s)", a2a.ErrInvalidRequest, who, scope, method, has)
}

// a2aErr gives err the A2A error its HTTP status stands for, keeping its text.
func a2aErr(err error) error {
	if err == nil {
		return nil
	}
	var base error
	switch statusOf(err) {
	case http.StatusNotFound:
		base = a2a.ErrTaskNotFound
	case http.StatusBadRequest:
		base = a2a.ErrInvalidParams
	case http.StatusForbidden, http.StatusConflict:
		base = a2a.ErrInvalidRequest
	default:
		base = a2a.ErrInternalError
	}
	return fmt.Errorf("%w: %v", base, err)
}

// record reads the run of task id, refusing a run that is not an AgentRun of this agent
// as unknown.
func (h *a2aAgent) record(ctx context.Context, id a2a.TaskID) (api.Record, error) {
	if strings.TrimSpace(string(id)) == "" {
		return api.Record{}, fmt.Errorf("%w: id is required: the task id (the run id message/send answered)", a2a.ErrInvalidParams)
	}
	rec, err := h.s.runsFor(ctx).Get(ctx, string(id))
	if err != nil {
		return api.Record{}, a2aErr(err)
	}
	var in api.AgentRunInput
	if rec.Workflow != api.WorkflowAgentRun || json.Unmarshal(rec.Payload, &in) != nil || in.Agent != h.agent {
		return api.Record{}, fmt.Errorf("%w: task %s is not a run of agent %s", a2a.ErrTaskNotFound, id, h.agent)
	}
	return rec, nil
}

// OnGetTask is tasks/get (scope read).
func (h *a2aAgent) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if err := h.need(ctx, api.ScopeRead, "tasks/get"); err != nil {
		return nil, err
	}
	rec, err := h.record(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	return a2aTaskOf(rec), nil
}

// OnCancelTask is tasks/cancel (scope operate): it cancels the run.
func (h *a2aAgent) OnCancelTask(ctx context.Context, id *a2a.TaskIDParams) (*a2a.Task, error) {
	if err := h.need(ctx, api.ScopeOperate, "tasks/cancel"); err != nil {
		return nil, err
	}
	rec, err := h.record(ctx, id.ID)
	if err != nil {
		return nil, err
	}
	if rec.Status.Closed() {
		return nil, fmt.Errorf("%w: task %s is %s (run %s)", a2a.ErrTaskNotCancelable, id.ID, a2aStateOf(rec), rec.Status)
	}
	rs := h.s.runsFor(ctx)
	if _, err := rs.Cancel(ctx, rec.ID); err != nil {
		return nil, a2aErr(err)
	}
	rec, err = rs.Follow(ctx, rec.ID, func(rec api.Record) bool { return rec.Status.Closed() })
	if err != nil {
		return nil, a2aErr(fmt.Errorf("canceled run %s, then could not read it: %w", id.ID, err))
	}
	return a2aTaskOf(rec), nil
}

// OnSendMessage is message/send (scope operate; approve to answer an input-required
// task). Blocking (the default) answers when the run closes or waits for a human.
func (h *a2aAgent) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	id, err := h.send(ctx, p, "message/send")
	if err != nil {
		return nil, err
	}
	rs := h.s.runsFor(ctx)
	if p.Config != nil && p.Config.Blocking != nil && !*p.Config.Blocking {
		rec, err := rs.Get(ctx, id)
		if err != nil {
			return nil, a2aErr(err)
		}
		return a2aTaskOf(rec), nil
	}
	rec, err := rs.Follow(ctx, id, a2aSettled)
	if err != nil {
		return nil, a2aErr(fmt.Errorf("task %s goes on, but could not be followed (tasks/get reads it): %w", id, err))
	}
	return a2aTaskOf(rec), nil
}

// OnSendMessageStream is message/stream: as message/send, then the run's changes as
// status and artifact updates until it closes or waits for a human.
func (h *a2aAgent) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		id, err := h.send(ctx, p, "message/stream")
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, id, yield)
	}
}

// OnResubscribeToTask is tasks/resubscribe (scope read): the stream of a task.
func (h *a2aAgent) OnResubscribeToTask(ctx context.Context, id *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := h.need(ctx, api.ScopeRead, "tasks/resubscribe"); err != nil {
			yield(nil, err)
			return
		}
		rec, err := h.record(ctx, id.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, rec.ID, yield)
	}
}

// a2aSettled is where a send or a stream stops following: the run closed or waits.
func a2aSettled(rec api.Record) bool {
	return rec.Status.Closed() || rec.Status == api.StatusSuspended
}

// stream yields the task, then a status update on each change of its state (and of the
// call it waits for), and at the end the result as an artifact and a final status
// update (also when the run had settled before the stream began).
func (h *a2aAgent) stream(ctx context.Context, id string, yield func(a2a.Event, error) bool) {
	var (
		sent    bool
		last    string
		stopped bool
	)
	_, err := h.s.runsFor(ctx).Follow(ctx, id, func(rec api.Record) bool {
		task := a2aTaskOf(rec)
		settled, first := a2aSettled(rec), !sent
		if first {
			sent = true
			if !yield(task, nil) {
				stopped = true
				return true
			}
		} else if a2aKey(rec) == last {
			return settled
		}
		last = a2aKey(rec)
		if first && !settled {
			return false // the task said its state
		}
		if settled {
			for _, art := range task.Artifacts {
				if !yield(&a2a.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Artifact: art, LastChunk: true}, nil) {
					stopped = true
					return true
				}
			}
		}
		if !yield(&a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status, Final: settled}, nil) {
			stopped = true
			return true
		}
		return settled
	})
	if err != nil && !stopped && ctx.Err() == nil {
		yield(nil, a2aErr(fmt.Errorf("follow task %s: %w", id, err)))
	}
}

// a2aKey is what a status update reports a change of.
func a2aKey(rec api.Record) string {
	k := string(a2aStateOf(rec))
	if a, ok := rec.Approval(); ok && rec.Status == api.StatusSuspended {
		k += "/" + a.CallID
	}
	return k
}

// send starts a run of the message's text, or answers the input-required task it names,
// and returns the run id.
func (h *a2aAgent) send(ctx context.Context, p *a2a.MessageSendParams, method string) (string, error) {
	if p == nil || p.Message == nil {
		return "", fmt.Errorf("%w: message is required", a2a.ErrInvalidParams)
	}
	if p.Config != nil && p.Config.PushConfig != nil {
		return "", fmt.Errorf("%w: this agent sends no push notifications; follow the task with message/stream or tasks/get", a2a.ErrPushNotificationNotSupported)
	}
	text := a2aText(p.Message)
	if p.Message.TaskID == "" {
		if err := h.need(ctx, api.ScopeOperate, method); err != nil {
			return "", err
		}
		if strings.TrimSpace(text) == "" {
			return "", fmt.Errorf("%w: the message has no text: a text part is the prompt of agent %s", a2a.ErrInvalidParams, h.agent)
		}
		payload, err := json.Marshal(api.AgentRunInput{Agent: h.agent, Prompt: text})
		if err != nil {
			return "", err
		}
		id, err := h.s.runsFor(ctx).Start(ctx, runs.StartRequest{Workflow: api.WorkflowAgentRun, Payload: payload})
		if err != nil {
			return "", a2aErr(fmt.Errorf("start agent %s: %w", h.agent, err))
		}
		return id, nil
	}
	if err := h.need(ctx, api.ScopeApprove, method+" on a task (a decision)"); err != nil {
		return "", err
	}
	rec, err := h.record(ctx, p.Message.TaskID)
	if err != nil {
		return "", err
	}
	if rec.Status != api.StatusSuspended {
		return "", fmt.Errorf("%w: task %s is %s (run %s), not input-required: it takes a message only while it waits for a decision; a new task is a message without taskId",
			a2a.ErrInvalidRequest, rec.ID, a2aStateOf(rec), rec.Status)
	}
	d, err := a2aDecision(text)
	if err != nil {
		return "", err
	}
	d.By = principalFrom(ctx).decider("")
	if a, ok := rec.Approval(); ok {
		d.CallID = a.CallID
		_, err = h.s.runsFor(ctx).DecideRecord(ctx, rec, d)
	} else {
		_, err = h.s.decideSuspend(ctx, rec.ID, d)
	}
	if err != nil {
		return "", a2aErr(fmt.Errorf("decide task %s: %w", rec.ID, err))
	}
	return rec.ID, nil
}

// a2aDecision reads an answer to an input-required task: "approve [why]" or
// "deny <reason>" (case does not matter; a denial needs its reason, as everywhere).
func a2aDecision(text string) (runs.Decision, error) {
	word, reason, _ := strings.Cut(strings.TrimSpace(text), " ")
	word = strings.ToLower(strings.TrimRightFunc(word, func(r rune) bool { return unicode.IsPunct(r) }))
	reason = strings.TrimSpace(reason)
	switch word {
	case api.DecideApprove:
		return runs.Decision{Approved: true, Action: api.DecideApprove, Reason: reason}, nil
	case api.DecideDeny:
		if reason == "" {
			return runs.Decision{}, fmt.Errorf("%w: a denial needs a reason after \"deny\" (the model or the workflow sees it)", a2a.ErrInvalidParams)
		}
		return runs.Decision{Action: api.DecideDeny, Reason: reason}, nil
	}
	return runs.Decision{}, fmt.Errorf("%w: the task waits for a decision: answer \"approve\" or \"deny <reason>\", not %q", a2a.ErrInvalidParams, text)
}

// a2aText joins the text parts of m.
func a2aText(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		switch t := p.(type) {
		case a2a.TextPart:
			parts = append(parts, t.Text)
		case *a2a.TextPart:
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// a2aStateOf maps a run's status to a task state.
func a2aStateOf(rec api.Record) a2a.TaskState {
	switch rec.Status {
	case api.StatusPending, api.StatusQueued:
		return a2a.TaskStateSubmitted
	case api.StatusRunning:
		return a2a.TaskStateWorking
	case api.StatusSuspended:
		return a2a.TaskStateInputRequired
	case api.StatusDone:
		return a2a.TaskStateCompleted
	case api.StatusCanceled:
		return a2a.TaskStateCanceled
	case api.StatusFailed, api.StatusInterrupted:
		return a2a.TaskStateFailed
	}
	return a2a.TaskStateUnknown
}

// a2aTaskOf is the task of a run: its state, a status message saying what it waits for
// or why it failed, and its result as the artifact "result".
func a2aTaskOf(rec api.Record) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(rec.ID), ContextID: rec.ID, Status: a2a.TaskStatus{State: a2aStateOf(rec)}}
	if !rec.UpdatedAt.IsZero() {
		at := rec.UpdatedAt
		t.Status.Timestamp = &at
	}
	say := func(text string, data map[string]any) {
		parts := a2a.ContentParts{a2a.TextPart{Text: text}}
		if data != nil {
			parts = append(parts, a2a.DataPart{Data: data})
		}
		t.Status.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, t, parts...)
	}
	switch {
	case rec.Status == api.StatusSuspended:
		if a, ok := rec.Approval(); ok {
			var args any
			_ = json.Unmarshal(a.Args, &args)
			what := a.Tool
			if a.Detail != "" {
				what += " " + a.Detail
			}
			say(fmt.Sprintf("tool call %s waits for approval: %s (capability %s); answer \"approve\" or \"deny <reason>\"", a.CallID, what, a.Capability),
				map[string]any{"call_id": a.CallID, "tool": a.Tool, "capability": a.Capability, "detail": a.Detail, "args": args})
		} else if si, ok := rec.Suspend(); ok {
			say(fmt.Sprintf("the run waits: %s; answer \"approve\" or \"deny <reason>\"", si.Reason), map[string]any{"reason": si.Reason})
		}
	case rec.Error != nil:
		say(*rec.Error, nil)
	case rec.Status == api.StatusInterrupted || rec.Status == api.StatusCanceled:
		say(fmt.Sprintf("run %s is %s", rec.ID, rec.Status), nil)
	}
	if rec.Status == api.StatusDone && len(rec.Result) > 0 && string(rec.Result) != "null" {
		var parts a2a.ContentParts
		var res api.AgentResult
		if json.Unmarshal(rec.Result, &res) == nil && res.Content != "" {
			parts = append(parts, a2a.TextPart{Text: res.Content})
		}
		var obj map[string]any
		if json.Unmarshal(rec.Result, &obj) != nil {
			var v any
			_ = json.Unmarshal(rec.Result, &v)
			obj = map[string]any{"output": v}
		}
		parts = append(parts, a2a.DataPart{Data: obj})
		t.Artifacts = []*a2a.Artifact{{ID: "result", Name: "result", Parts: parts}}
	}
	return t
}

// The methods below are not offered: the cards say so (no push notifications, no
// extended card).

func (h *a2aAgent) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2aAgent) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2aAgent) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2aAgent) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

func (h *a2aAgent) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}
