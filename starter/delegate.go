package main

import (
	"encoding/json"
	"fmt"

	"github.com/nexo-temporal/nexo/api"
)

// printDelegation shows an agent run's links of agents as tools: the run that delegated
// it (state parent), and the child runs it started (delegate_started events).
func printDelegation(row func(k, v string), rec api.Record) {
	if rec.Workflow != api.WorkflowAgentRun {
		return
	}
	if raw, ok := rec.State[api.StateParent]; ok {
		var p api.ParentLink
		if json.Unmarshal(raw, &p) == nil && p.Run != "" {
			row("Parent", fmt.Sprintf("%s (call %s of agent %s, depth %d)", p.Run, p.Call, p.Agent, p.Depth))
		}
	}
	for _, e := range rec.Events {
		if e.Type != api.EventDelegateStarted {
			continue
		}
		var d struct {
			CallID string `json:"call_id"`
			Agent  string `json:"agent"`
			Child  string `json:"child"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Child != "" {
			row("Delegate", fmt.Sprintf("%s (agent %s, call %s)", d.Child, d.Agent, d.CallID))
		}
	}
}
