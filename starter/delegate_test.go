package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// TestShowNamesDelegationLinks: `starter show` names a delegate's parent run (not as a
// checkpoint) and a lead's child runs.
func TestShowNamesDelegationLinks(t *testing.T) {
	child := api.Record{ID: "r-1.1", Workflow: api.WorkflowAgentRun, Status: api.StatusDone,
		State: map[string]json.RawMessage{api.StateParent: json.RawMessage(`{"run":"r","call":"1.1","agent":"lead","depth":1}`)}}
	var out bytes.Buffer
	printRecord(&out, child)
	if !strings.Contains(out.String(), "Parent") || !strings.Contains(out.String(), "r (call 1.1 of agent lead, depth 1)") {
		t.Errorf("show of a delegate:\n%s\nwant its parent named", out.String())
	}
	if strings.Contains(out.String(), "Checkpoints") {
		t.Errorf("show of a delegate lists its parent link as a checkpoint:\n%s", out.String())
	}
	lead := api.Record{ID: "r", Workflow: api.WorkflowAgentRun, Status: api.StatusDone, Events: []api.Event{
		{Seq: 1, Type: api.EventDelegateStarted, Data: json.RawMessage(`{"call_id":"1.1","agent":"researcher","child":"r-1.1"}`)}}}
	out.Reset()
	printRecord(&out, lead)
	if !strings.Contains(out.String(), "r-1.1 (agent researcher, call 1.1)") {
		t.Errorf("show of a lead:\n%s\nwant its delegate named", out.String())
	}
}
