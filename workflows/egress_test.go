package workflows

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// TestEgressEvents: each request a tool call's commands made through the egress proxy is
// an egress event of the run, after the call and before its result, with what was
// dropped past the bound counted; the model's result carries none of it.
func TestEgressEvents(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "fetcher", Permissions: permissions.Policy{Mode: permissions.ModeAuto}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{toolReply(call("read_file", `{"path":"a.txt"}`)), text("done")},
		egress: []api.EgressRecord{
			{Host: "127.0.0.1", Port: 8080, Method: "GET", Status: 200, BytesDown: 42, Injected: "Authorization"},
			{Host: "evil.example", Port: 443, Method: "CONNECT", Status: 403, Denied: "egress to evil.example:443 is not allowed for agent fetcher"},
		}, egressDropped: 3}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "fetcher"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	rec := queryRecord(t, env)
	var types []string
	var egress []map[string]any
	for _, ev := range rec.Events {
		types = append(types, ev.Type)
		if ev.Type == EventEgress {
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			egress = append(egress, d)
		}
	}
	joined := strings.Join(types, ",")
	if !strings.Contains(joined, "agent_tool_call,egress,egress,egress,agent_tool_result") {
		t.Errorf("events = %s, want three egress events between the call and its result", joined)
	}
	if len(egress) != 3 {
		t.Fatalf("egress events = %+v", egress)
	}
	if e := egress[0]; e["host"] != "127.0.0.1" || e["port"] != float64(8080) || e["status"] != float64(200) || e["injected"] != "Authorization" || e["call_id"] != "1.1" {
		t.Errorf("first egress event = %v", e)
	}
	if e := egress[1]; e["method"] != "CONNECT" || e["status"] != float64(403) || !strings.Contains(e["denied"].(string), "not allowed for agent fetcher") {
		t.Errorf("second egress event = %v", e)
	}
	if e := egress[2]; e["dropped"] != float64(3) {
		t.Errorf("last egress event = %v, want dropped 3", e)
	}
	if got := lastToolMessage(f.requests[1]); strings.Contains(got, "evil.example") {
		t.Errorf("the model's tool result holds the egress records: %q", got)
	}
}
