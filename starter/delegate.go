package main

import (
	"fmt"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// printDelegation shows an agent run's links of agents as tools: the run that delegated
// it (state parent), and the child runs it started (delegate_started events).
func printDelegation(row func(k, v string), rec api.Record) {
	parent, children := runs.Delegation(rec)
	if p := parent; p != nil {
		row("Parent", fmt.Sprintf("%s (call %s of agent %s, depth %d)", p.Run, p.Call, p.Agent, p.Depth))
	}
	for _, d := range children {
		row("Delegate", fmt.Sprintf("%s (agent %s, call %s)", d.Child, d.Agent, d.CallID))
	}
}
