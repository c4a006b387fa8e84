package runs

import (
	"encoding/json"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/api/searchattr"
)

// What a run says of itself at start, for lists: the agent in the NexoAgent search
// attribute (so a search finds an agent's runs in one visibility query) and the start of
// its prompt in the memo (so a list shows it without reading each run's input). Neither
// is a workflow command: they ride on the start request, so no history changes shape.

// startAttributes are the search attributes and memo a run of workflow with payload is
// started with: an AgentRun's agent and prompt; nothing for other workflows.
func startAttributes(workflow string, payload json.RawMessage) (temporal.SearchAttributes, map[string]any) {
	if workflow != api.WorkflowAgentRun {
		return temporal.SearchAttributes{}, nil
	}
	var in api.AgentRunInput
	if json.Unmarshal(payload, &in) != nil || in.Agent == "" {
		return temporal.SearchAttributes{}, nil
	}
	var memo map[string]any
	if p := api.PromptHead(in.Prompt); p != "" {
		memo = map[string]any{api.MemoPrompt: p}
	}
	return temporal.NewSearchAttributes(searchattr.Agent.ValueSet(in.Agent)), memo
}

// sessionAttributes are a session's: its agent (the prompts are its turns).
func sessionAttributes(agent string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(searchattr.Agent.ValueSet(agent))
}

// rowAgent is the agent of a visibility row: its NexoAgent attribute, or a session's
// from its id (sessions started before the attribute was set have none); "" when
// neither says.
func rowAgent(e *workflowpb.WorkflowExecutionInfo) string {
	if p := e.GetSearchAttributes().GetIndexedFields()[api.SearchAttributeAgent]; p != nil {
		var v string
		if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil && v != "" {
			return v
		}
	}
	if e.GetType().GetName() == api.WorkflowSession {
		if agent, _, ok := api.ParseSessionID(e.GetExecution().GetWorkflowId()); ok {
			return agent
		}
	}
	return ""
}

// rowPrompt is the prompt head a row's memo holds, "" when none (or unreadable).
func (c *Client) rowPrompt(memo *commonpb.Memo) string {
	p := memo.GetFields()[api.MemoPrompt]
	if p == nil {
		return ""
	}
	dc := c.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var v string
	if dc.FromPayload(p, &v) != nil {
		return ""
	}
	return v
}

// MaxSearchLength bounds ListRequest.Search.
const MaxSearchLength = 200

// quoteQuery is s as a visibility query string literal. Temporal's query parser reads
// backslash escapes inside quotes, so a quote or backslash in s is escaped and never ends
// the literal: a search for it' OR 'x' = 'x is a search for that text.
func quoteQuery(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// searchClause is the visibility query of a search term: a run whose id starts with it,
// whose workflow type is it, or whose agent is it (the NexoAgent attribute, or a session
// id session:<agent>:… for sessions started before it was set).
func searchClause(term string) (string, error) {
	switch {
	case len(term) > MaxSearchLength:
		return "", &BadRequestError{Msg: fmt.Sprintf("search %.40q…: %d bytes, want at most %d", term, len(term), MaxSearchLength)}
	case strings.ContainsFunc(term, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", &BadRequestError{Msg: fmt.Sprintf("search %q contains a control character; want an id prefix, a workflow type or an agent name", term)}
	}
	q := quoteQuery(term)
	return fmt.Sprintf("(WorkflowId STARTS_WITH %s OR WorkflowType = %s OR %s = %s OR WorkflowId STARTS_WITH %s)",
		q, q, api.SearchAttributeAgent, q, quoteQuery(api.SessionID(term, ""))), nil
}
