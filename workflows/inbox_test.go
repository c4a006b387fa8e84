package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// The inbox is one visibility query because the run names the waiting agent in
// NexoApprovalAgent while a call waits, and removes it once the call is decided.
func TestApprovalAgentAttributeFollowsThePendingCall(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		toolReply(call("write_file", `{"path":"more.md","content":"ho"}`)),
		text("Wrote both."),
	}}
	f.register(env)
	var log []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		vals := args.Get(0).(temporal.SearchAttributes).GetUntypedValues()
		if len(vals) == 0 {
			// The SDK hides removed keys from the upsert it hands the mock; the runtime's
			// only upsert that sets nothing is the removal of NexoApprovalAgent (NexoStatus
			// is always set).
			log = append(log, "-")
		}
		for k, v := range vals {
			if k.GetName() == api.SearchAttributeApprovalAgent {
				log = append(log, v.(string))
			}
		}
	}).Return(nil)
	var whileWaiting, afterFirst []string
	env.RegisterDelayedCallback(func() {
		whileWaiting = append([]string(nil), log...)
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		afterFirst = append([]string(nil), log...)
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "2.1", Approved: false, Reason: "no"})
	}, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: NexoApprovalAgent upserts = %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: NexoApprovalAgent upserts = %q, want %q", what, got, want)
			}
		}
	}
	check("while the first call waits", whileWaiting, "scribe")
	check("while the second call waits", afterFirst, "scribe", "-", "scribe")
	check("after the run", log, "scribe", "-", "scribe", "-")
}

// A run that never waits for a human records neither the version marker nor an upsert of
// NexoApprovalAgent.
func TestNoApprovalNoApprovalAgentAttribute(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := approveSpec()
	f := &agentFakes{spec: spec, script: []api.ChatMessage{text("Nothing to do.")}}
	f.register(env)
	touched := false
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		for k := range args.Get(0).(temporal.SearchAttributes).GetUntypedValues() {
			if k.GetName() == api.SearchAttributeApprovalAgent {
				touched = true
			}
		}
	}).Return(nil)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if touched {
		t.Error("a run with no approval upserted NexoApprovalAgent")
	}
}
