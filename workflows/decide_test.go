package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// decideOutcome is what became of one nexo.decide: refused, or the recorded decision.
type decideOutcome struct {
	done bool
	err  error
	res  api.DecideResult
}

// update sends nexo.decide; the outcome is filled when the environment answers it.
func update(env *testsuite.TestWorkflowEnvironment, req api.DecideRequest) *decideOutcome {
	o := &decideOutcome{}
	env.UpdateWorkflow(api.UpdateDecide, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) { o.err, o.done = err, true },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			o.done, o.err = true, err
			if b, ok := v.([]byte); ok {
				_ = json.Unmarshal(b, &o.res)
			} else if v != nil {
				b, _ := json.Marshal(v)
				_ = json.Unmarshal(b, &o.res)
			}
		},
	}, req)
	return o
}

func eventsOf(rec api.Record, typ string) []map[string]any {
	var out []map[string]any
	for _, e := range rec.Events {
		if e.Type == typ {
			var m map[string]any
			_ = json.Unmarshal(e.Data, &m)
			out = append(out, m)
		}
	}
	return out
}

// TestDecideRefusalsNeverReachTheRun: every decision that does not fit is refused with
// a message naming what was wrong, and the run neither records it nor moves; the one that
// fits returns the decision as recorded.
func TestDecideRefusalsNeverReachTheRun(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path": "notes.md", "content": "hi"}`)),
		toolReply(call("write_file", `{"path":"todo.md","content":"-"}`)),
		text("Wrote both."),
	}}
	f.register(env)
	var (
		refused       []*decideOutcome
		first, second *decideOutcome
		again, late   *decideOutcome
		before, after int
		sha           string
	)
	env.RegisterDelayedCallback(func() {
		rec := queryRecord(t, env)
		before = len(rec.Events)
		a, _ := rec.Approval()
		sha = a.ArgsSHA256
		if want := api.ArgsSHA256([]byte(`{"path":"notes.md","content":"hi"}`)); a.ArgsSHA256 != want || string(a.Args) != `{"path":"notes.md","content":"hi"}` {
			t.Errorf("pending args %s sha %s, want the compact args and sha %s", a.Args, a.ArgsSHA256, want)
		}
		for _, bad := range []api.DecideRequest{
			{CallID: "9.9", Action: api.DecideApprove, ArgsSHA256: sha},
			{CallID: "1.1", Action: api.DecideApprove, ArgsSHA256: strings.Repeat("0", 64)},
			{CallID: "1.1", Action: api.DecideApprove},
			{CallID: "1.1", Action: "aprove", ArgsSHA256: sha},
			{CallID: "1.1", Action: api.DecideDeny, ArgsSHA256: sha, Args: json.RawMessage(`{"path":"x"}`)},
			{CallID: "1.1", Action: api.DecideApprove, ArgsSHA256: sha, Result: "text"},
			{CallID: "1.1", Action: api.DecideApprove, ArgsSHA256: sha, Args: json.RawMessage(`{"path":"x"}`), Always: true},
			{CallID: "1.1", Action: api.DecideApprove, ArgsSHA256: sha, Args: json.RawMessage(`["x"]`)},
			{CallID: "1.1", Action: api.DecideAnswer, ArgsSHA256: sha},
		} {
			refused = append(refused, update(env, bad))
		}
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		after = len(queryRecord(t, env).Events)
		ok := api.DecideRequest{CallID: "1.1", Action: api.DecideApprove, ArgsSHA256: sha, By: "ada"}
		first = update(env, ok)
		second = update(env, ok) // lands after the first: already decided
	}, 2*time.Hour)
	env.RegisterDelayedCallback(func() {
		// The run moved on to call 2.1: 1.1 is refused as decided, naming who decided it.
		again = update(env, api.DecideRequest{CallID: "1.1", Action: api.DecideApprove, ArgsSHA256: sha})
		a, _ := queryRecord(t, env).Approval()
		late = update(env, api.DecideRequest{CallID: a.CallID, Action: api.DecideDeny, ArgsSHA256: a.ArgsSHA256, Reason: "enough"})
	}, 3*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`unknown tool call "9.9": the pending call is 1.1 (write_file)`,
		"changed since the request",
		"args_sha256 is empty",
		`action "aprove" is not one of approve, deny, answer`,
		"args (edited arguments) go with action approve only",
		"result goes with action answer only",
		"always does not go with edited args",
		"args must be a JSON object",
		"answer needs a result",
	}
	for i, w := range want {
		if o := refused[i]; !o.done || o.err == nil || !strings.Contains(o.err.Error(), w) {
			t.Errorf("refusal %d = %+v, want it to say %q", i, o, w)
		}
	}
	if after != before {
		t.Errorf("refused decisions added %d events", after-before)
	}
	if first == nil || first.err != nil || first.res.CallID != "1.1" || first.res.Tool != "write_file" || first.res.Action != api.DecideApprove || first.res.By != "ada" || first.res.At.IsZero() {
		t.Errorf("recorded decision = %+v", first)
	}
	if second == nil || second.err == nil || !strings.Contains(second.err.Error(), "already decided") {
		t.Errorf("second decision on 1.1 = %+v, want already decided", second)
	}
	if again == nil || again.err == nil || !strings.Contains(again.err.Error(), "tool call 1.1 was already decided (approved by ada); the pending call is 2.1 (write_file)") {
		t.Errorf("decision on 1.1 after the run moved on = %+v", again)
	}
	if late == nil || late.err != nil || late.res.Action != api.DecideDeny {
		t.Errorf("denial of 2.1 = %+v", late)
	}
	if len(f.tools) != 1 {
		t.Errorf("tool ran %d times, want once (1.1 approved, 2.1 denied)", len(f.tools))
	}
	rec := queryRecord(t, env)
	if n := len(eventsOf(rec, "signal_ignored")); n != 0 {
		t.Errorf("%d signal_ignored events; a refused update leaves none", n)
	}
	if d := eventsOf(rec, "approval_decided"); len(d) != 2 || d[0]["action"] != "approve" || d[0]["by"] != "ada" || d[1]["action"] != "deny" {
		t.Errorf("approval_decided = %v", d)
	}
}

// decideOnce registers a callback that decides the pending call with req (its
// args_sha256 read from the record).
func decideOnce(t *testing.T, env *testsuite.TestWorkflowEnvironment, req api.DecideRequest) {
	env.RegisterDelayedCallback(func() {
		a, ok := queryRecord(t, env).Approval()
		if !ok {
			t.Error("no pending call")
			return
		}
		req.CallID, req.ArgsSHA256 = a.CallID, a.ArgsSHA256
		o := update(env, req)
		t.Cleanup(func() {
			if !o.done || o.err != nil {
				t.Errorf("decision %+v: %+v", req, o)
			}
		})
	}, time.Hour)
}

func TestDecideEditRunsTheEditedCallAndTellsTheModel(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Wrote it."),
	}}
	f.register(env)
	decideOnce(t, env, api.DecideRequest{Action: api.DecideApprove, By: "ada",
		Args: json.RawMessage(`{"path": "drafts/notes.md", "content": "hi"}`)})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 1 || string(f.tools[0].Args) != `{"path":"drafts/notes.md","content":"hi"}` {
		t.Fatalf("tool calls = %+v, want one write with the edited args", f.tools)
	}
	got := lastToolMessage(f.requests[1])
	if want := "A human edited this call's arguments to {\"path\":\"drafts/notes.md\",\"content\":\"hi\"}\nok: write_file"; got != want {
		t.Errorf("model got %q, want %q", got, want)
	}
	d := eventsOf(queryRecord(t, env), "approval_decided")
	if len(d) != 1 || d[0]["action"] != "approve" {
		t.Fatalf("approval_decided = %v", d)
	}
	if orig, _ := json.Marshal(d[0]["args"]); !strings.Contains(string(orig), `"notes.md"`) || strings.Contains(string(orig), "drafts") {
		t.Errorf("recorded original args = %s", orig)
	}
	if ed, _ := json.Marshal(d[0]["edited_args"]); !strings.Contains(string(ed), "drafts/notes.md") {
		t.Errorf("recorded edited args = %s", ed)
	}
}

func TestDecideEditThatLeavesTheWorkspaceIsRefused(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Could not write."),
	}}
	f.register(env)
	decideOnce(t, env, api.DecideRequest{Action: api.DecideApprove, Args: json.RawMessage(`{"path":"../../etc/passwd","content":"hi"}`)})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 0 {
		t.Errorf("an edit that leaves the workspace ran: %+v", f.tools)
	}
	got := lastToolMessage(f.requests[1])
	if !strings.Contains(got, "permission denied: the edited write_file call names ../../etc/passwd, which leads outside the workspace") ||
		!strings.HasPrefix(got, "error: A human edited this call's arguments to") {
		t.Errorf("model got %q", got)
	}
}

func TestDecideAnswerRunsNoTool(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("shell", `{"command":"date"}`)),
		text("It is Tuesday."),
	}}
	f.register(env)
	decideOnce(t, env, api.DecideRequest{Action: api.DecideAnswer, Result: "Tuesday, 1 December", By: "ada"})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 0 {
		t.Errorf("an answered call ran: %+v", f.tools)
	}
	if got, want := lastToolMessage(f.requests[1]), "A human answered this call instead of running shell; their answer:\nTuesday, 1 December"; got != want {
		t.Errorf("model got %q, want %q", got, want)
	}
	d := eventsOf(queryRecord(t, env), "approval_decided")
	if len(d) != 1 || d[0]["action"] != "answer" || d[0]["result"] != "Tuesday, 1 December" || d[0]["by"] != "ada" {
		t.Errorf("approval_decided = %v", d)
	}
}

// TestDecideEditIsDecidedAgainByThePolicy: an edit is no way around the agent's rules: a
// human who edits a gated shell call into one a deny_when rule refuses gets it refused with
// the rule's reason, and nothing runs.
func TestDecideEditIsDecidedAgainByThePolicy(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := approveSpec()
	spec.Permissions.DenyWhen = []permissions.Rule{{Capability: permissions.CapShell, ArgsRegex: map[string]string{"command": `rm\s+-rf`}, Reason: "never rm -rf"}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("shell", `{"command":"ls build"}`)),
		text("Could not."),
	}}
	f.register(env)
	decideOnce(t, env, api.DecideRequest{Action: api.DecideApprove, Args: json.RawMessage(`{"command":"rm -rf build"}`)})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 0 {
		t.Errorf("an edit a deny_when rule refuses ran: %+v", f.tools)
	}
	if got := lastToolMessage(f.requests[1]); !strings.HasPrefix(got, `error: A human edited this call's arguments to {"command":"rm -rf build"}`) ||
		!strings.Contains(got, "permission denied: the edited call:") || !strings.Contains(got, "never rm -rf") {
		t.Errorf("model got %q", got)
	}
}
