package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// threadVersion is the run's version of ChangeThreadByRef, asked once: the first call
// records the marker (or, replaying a run from before the change, finds none).
func (rt *runtime) threadVersion(ctx workflow.Context) workflow.Version {
	if rt.threadV == nil {
		v := workflow.GetVersion(ctx, ChangeThreadByRef, workflow.DefaultVersion, 1)
		rt.threadV = &v
	}
	return *rt.threadV
}

// recentMessages bounds the newest messages a conversation keeps in workflow memory for
// the session view; the thread itself lives in the blob store.
const recentMessages = 40

// conversation is an agent's thread as the workflow holds it. By value (runs recorded
// before ChangeThreadByRef) it is every message, sent whole in every model call. By
// reference it is the stored thread's head, the messages not stored yet (the last step's
// tool results, a new prompt), and the newest messages for viewers: a model call carries
// the head and what is new, and large tool outputs are previews with a reference.
type conversation struct {
	byRef bool
	// thread: the by-value shape.
	thread []api.ChatMessage

	ref     api.ThreadRef
	pending []api.ChatMessage
	recent  []api.ChatMessage
	// ctxName names the stored instructions, skills and tool definitions once the first
	// call stored them; ctxTokens estimates their share of a request.
	ctxName   string
	ctxTokens int
}

// newConversation continues a thread: by reference from ref plus the messages after it
// (all of them when ref is nil: a carry from a session run before the change is stored
// by the first model call).
func newConversation(byRef bool, ref *api.ThreadRef, after, recent []api.ChatMessage) *conversation {
	c := &conversation{byRef: byRef}
	if !byRef {
		c.thread = append([]api.ChatMessage(nil), after...)
		return c
	}
	if ref != nil {
		c.ref = *ref
	}
	c.pending = append([]api.ChatMessage(nil), after...)
	c.recent = append([]api.ChatMessage(nil), recent...)
	if len(c.recent) == 0 {
		c.remember(after...)
	}
	return c
}

// clone is a copy to restore when a session's turn fails.
func (c *conversation) clone() *conversation {
	d := *c
	d.thread = append([]api.ChatMessage(nil), c.thread...)
	d.pending = append([]api.ChatMessage(nil), c.pending...)
	d.recent = append([]api.ChatMessage(nil), c.recent...)
	return &d
}

func (c *conversation) remember(msgs ...api.ChatMessage) {
	c.recent = append(c.recent, msgs...)
	if n := len(c.recent) - recentMessages; n > 0 {
		c.recent = append([]api.ChatMessage(nil), c.recent[n:]...)
	}
}

// add appends a message the workflow made (a prompt, a tool result).
func (c *conversation) add(m api.ChatMessage) {
	if !c.byRef {
		c.thread = append(c.thread, m)
		return
	}
	c.pending = append(c.pending, m)
	c.remember(m)
}

// request fills the thread part of a model call.
func (c *conversation) request(req *api.CompleteChatRequest, spec agents.Spec, skills []string, defs []api.ToolDef, callTag string) {
	if !c.byRef {
		req.System, req.Skills, req.Tools, req.Messages = spec.Instructions, skills, defs, c.thread
		return
	}
	ref := c.ref
	req.Thread, req.Messages, req.CallID = &ref, c.pending, callTag
	if c.ctxName != "" {
		req.Context = c.ctxName
		return
	}
	req.System, req.Skills, req.Tools, req.StoreContext = spec.Instructions, skills, defs, true
	c.ctxTokens = len(mustJSON(api.ChatContext{System: spec.Instructions, Skills: skills, Tools: defs}))/4 + 4
}

// replied records the model's reply (msg, with the workflow's call ids).
func (c *conversation) replied(out api.CompleteChatResult, msg api.ChatMessage) {
	if !c.byRef {
		c.thread = append(c.thread, msg)
		return
	}
	if out.Thread != nil {
		c.ref = *out.Thread
	}
	if out.Context != "" {
		c.ctxName = out.Context
	}
	c.pending = nil
	c.remember(msg)
}

// count is the number of messages in the thread.
func (c *conversation) count() int {
	if !c.byRef {
		return len(c.thread)
	}
	return c.ref.Messages + len(c.pending)
}

// view is what a viewer gets: the whole thread by value, else the newest messages.
func (c *conversation) view() []api.ChatMessage {
	if !c.byRef {
		return append([]api.ChatMessage(nil), c.thread...)
	}
	return append([]api.ChatMessage(nil), c.recent...)
}

// nextTokens estimates the next request: the provider's count of the last one (or the
// constant part's estimate before any), plus what was added since.
func (c *conversation) nextTokens() int {
	return max(c.ref.Tokens, c.ctxTokens) + api.EstimateTokens(c.pending)
}

// compact summarises the oldest turns when the next request would pass the agent's
// context budget, and records a context_compacted event.
func (rt *runtime) compact(ctx workflow.Context, spec agents.Spec, c *conversation) error {
	limit := spec.Context.MaxTokens
	if !c.byRef || limit <= 0 || c.nextTokens() <= limit {
		return nil
	}
	req := api.CompactThreadRequest{RunID: rt.rec.ID, Model: spec.Model, Thread: c.ref, Messages: c.pending,
		KeepRecent: spec.Context.Recent(), MaxTokens: limit, ContextTokens: c.ctxTokens, Endpoint: spec.LLM}
	var res api.CompactThreadResult
	// One summary request: a provider hiccup is retried like a model call.
	cctx := workflow.WithActivityOptions(ctx, modelCallOptionsFor(ctx, spec))
	if err := workflow.ExecuteActivity(cctx, api.ActivityCompactThread, req).Get(ctx, &res); err != nil {
		return err
	}
	c.ref, c.pending = res.Thread, nil
	rt.countCompaction(spec, res) // budget.go
	rt.emit(ctx, "context_compacted", map[string]any{"tokens_before": res.TokensBefore, "tokens_after": res.TokensAfter,
		"summarised": res.Summarised, "messages": res.Thread.Messages, "max_tokens": limit})
	return nil
}

// rememberDecided records that callID was decided, and how, so nexo.decide refuses a
// second decision on it.
func (rt *runtime) rememberDecided(callID, how string) {
	if rt.decided == nil {
		rt.decided = map[string]string{}
	}
	if _, ok := rt.decided[callID]; !ok {
		rt.decidedOrder = append(rt.decidedOrder, callID)
	}
	rt.decided[callID] = how
}

// carryDecided is the newest api.MaxCarriedDecisions decided calls, oldest first, for a
// session's continuation (and the carry a reopened session starts from).
func (rt *runtime) carryDecided() []api.DecidedCall {
	ids := rt.decidedOrder[max(0, len(rt.decidedOrder)-api.MaxCarriedDecisions):]
	if len(ids) == 0 {
		return nil
	}
	out := make([]api.DecidedCall, len(ids))
	for i, id := range ids {
		out[i] = api.DecidedCall{CallID: id, How: rt.decided[id]}
	}
	return out
}

// restoreDecided takes the decided calls a session's carry remembers.
func (rt *runtime) restoreDecided(calls []api.DecidedCall) {
	for _, d := range calls[max(0, len(calls)-api.MaxCarriedDecisions):] {
		if d.CallID != "" {
			rt.rememberDecided(d.CallID, d.How)
		}
	}
}

// carryApprovals encodes the run's remembered decisions for a continuation.
func (rt *runtime) carryApprovals() json.RawMessage {
	if len(rt.approvals.Always) == 0 && len(rt.approvals.Never) == 0 {
		return nil
	}
	return mustJSON(rt.approvals)
}
