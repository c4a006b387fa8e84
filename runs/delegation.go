package runs

import (
	"encoding/json"

	"github.com/nexo-temporal/nexo/api"
)

// DelegateLink is one child run an agent run started through a delegate tool call (its
// delegate_started event).
type DelegateLink struct {
	Child  string `json:"child"`
	Agent  string `json:"agent"`
	CallID string `json:"call_id"`
}

// Delegation returns an agent run's links of agents as tools: the run that delegated it
// (state parent; nil for a top run) and the child runs it started, in the order they
// started. Any other workflow has neither. `starter show` and the run page both read the
// links here.
func Delegation(rec api.Record) (parent *api.ParentLink, children []DelegateLink) {
	if rec.Workflow != api.WorkflowAgentRun {
		return nil, nil
	}
	if raw, ok := rec.State[api.StateParent]; ok {
		var p api.ParentLink
		if json.Unmarshal(raw, &p) == nil && p.Run != "" {
			parent = &p
		}
	}
	for _, e := range rec.Events {
		if e.Type != api.EventDelegateStarted {
			continue
		}
		var d DelegateLink
		if json.Unmarshal(e.Data, &d) == nil && d.Child != "" {
			children = append(children, d)
		}
	}
	return parent, children
}
