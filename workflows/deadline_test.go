package workflows

import (
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// deadlineResult is what a deadlineRun saw.
type deadlineResult struct {
	f      *agentFakes
	peeks  []api.Record // the record at each peek
	final  api.Record
	start  time.Time
	timers map[string]time.Duration // scheduled timer id → its duration
	ended  map[string]string        // timer id → "fired" / "cancelled"
}

// deadlineRun runs scribe with one gated shell call under p, querying the record at each
// peek (simulated time after the start); setup registers decisions.
func deadlineRun(t *testing.T, p permissions.Policy, setup func(env *testsuite.TestWorkflowEnvironment), peek ...time.Duration) deadlineResult {
	t.Helper()
	env := newEnv(t)
	spec := approveSpec()
	spec.Permissions = p
	r := deadlineResult{f: &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("shell", `{"command":"go test ./..."}`)),
		text("Done."),
	}}, start: env.Now(), peeks: make([]api.Record, len(peek)), timers: map[string]time.Duration{}, ended: map[string]string{}}
	r.f.register(env)
	env.SetOnTimerScheduledListener(func(id string, d time.Duration) { r.timers[id] = d })
	env.SetOnTimerFiredListener(func(id string) { r.ended[id] = "fired" })
	env.SetOnTimerCanceledListener(func(id string) { r.ended[id] = "cancelled" })
	for i, d := range peek {
		env.RegisterDelayedCallback(func() { r.peeks[i] = queryRecord(t, env) }, d)
	}
	if setup != nil {
		setup(env)
	}
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	r.final = queryRecord(t, env)
	return r
}

func approvePolicy(timeout string, on permissions.OnTimeout) permissions.Policy {
	return permissions.Policy{Mode: permissions.ModeApprove, ApprovalTimeout: timeout, OnTimeout: on}
}

func TestDeadlineDenyTellsTheModelNoDecision(t *testing.T) {
	t.Parallel()
	r := deadlineRun(t, approvePolicy("24h", permissions.OnTimeoutDeny), nil, time.Hour)
	a, ok := r.peeks[0].Approval()
	if want := r.start.Add(24 * time.Hour); !ok || a.ExpiresAt == nil || !a.ExpiresAt.Equal(want) || a.OnTimeout != "deny" {
		t.Fatalf("__approval__ while waiting = %+v (present %v), want expires_at %s, on_timeout deny", a, ok, want)
	}
	if len(r.f.tools) != 0 {
		t.Errorf("a timed-out deny ran the tool: %+v", r.f.tools)
	}
	if got, want := lastToolMessage(r.f.requests[1]), "error: this shell call was denied: no decision within 24h (its approval_timeout passed)"; got != want {
		t.Errorf("model got %q, want %q", got, want)
	}
	if d := eventsOf(r.final, "approval_decided"); len(d) != 1 || d[0]["action"] != "deny" || d[0]["by"] != "timeout" {
		t.Errorf("approval_decided = %v, want one deny by timeout", d)
	}
	if _, ok := r.final.Approval(); ok || r.final.Status != api.StatusDone {
		t.Errorf("after the deadline: status %s, __approval__ still present %v", r.final.Status, ok)
	}
}

func TestDeadlineApproveRunsTheCall(t *testing.T) {
	t.Parallel()
	r := deadlineRun(t, approvePolicy("2h", permissions.OnTimeoutApprove), nil)
	if len(r.f.tools) != 1 || r.f.tools[0].Tool != "shell" {
		t.Fatalf("tool calls = %+v, want the shell call run on timeout", r.f.tools)
	}
	if d := eventsOf(r.final, "approval_decided"); len(d) != 1 || d[0]["action"] != "approve" || d[0]["by"] != "timeout" || d[0]["reason"] != "no decision within 2h" {
		t.Errorf("approval_decided = %v, want one approve by timeout", d)
	}
}

// TestDeadlineEscalateKeepsWaiting: escalate raises approval_escalated, the call waits on
// with no deadline in the record, and a human's later decision runs it.
func TestDeadlineEscalateKeepsWaiting(t *testing.T) {
	t.Parallel()
	r := deadlineRun(t, approvePolicy("1h", permissions.OnTimeoutEscalate), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			a, _ := queryRecord(t, env).Approval()
			update(env, api.DecideRequest{CallID: a.CallID, ArgsSHA256: a.ArgsSHA256, Action: api.DecideApprove, By: "ada"})
		}, 72*time.Hour)
	}, 30*time.Minute, 2*time.Hour)
	if a, _ := r.peeks[0].Approval(); a.ExpiresAt == nil || a.OnTimeout != "escalate" || a.Escalated {
		t.Errorf("__approval__ before the deadline = %+v", a)
	}
	a, ok := r.peeks[1].Approval()
	if !ok || a.ExpiresAt != nil || !a.Escalated || r.peeks[1].Status != api.StatusSuspended {
		t.Errorf("after the deadline: status %s, __approval__ = %+v (present %v), want still waiting, escalated, no expiry", r.peeks[1].Status, a, ok)
	}
	if e := eventsOf(r.final, "approval_escalated"); len(e) != 1 || e[0]["call_id"] != "1.1" || e[0]["after"] != "1h" {
		t.Errorf("approval_escalated = %v, want one for 1.1", e)
	}
	if d := eventsOf(r.final, "approval_decided"); len(d) != 1 || d[0]["by"] != "ada" || d[0]["action"] != "approve" {
		t.Errorf("approval_decided = %v, want ada's approval", d)
	}
	if len(r.f.tools) != 1 {
		t.Errorf("tool calls = %+v, want the approved call", r.f.tools)
	}
}

// TestDeadlineDecisionCancelsTheTimer: a decision before the deadline is the decision, and
// the deadline's timer is cancelled (nothing fires after the run moved on).
func TestDeadlineDecisionCancelsTheTimer(t *testing.T) {
	t.Parallel()
	r := deadlineRun(t, approvePolicy("24h", permissions.OnTimeoutApprove), func(env *testsuite.TestWorkflowEnvironment) {
		decideOnce(t, env, api.DecideRequest{Action: api.DecideDeny, Reason: "not now", By: "ada"})
	})
	if d := eventsOf(r.final, "approval_decided"); len(d) != 1 || d[0]["by"] != "ada" || d[0]["action"] != "deny" {
		t.Errorf("approval_decided = %v, want ada's deny only", d)
	}
	if len(r.f.tools) != 0 {
		t.Errorf("the denied call ran: %+v", r.f.tools)
	}
	var deadline []string
	for id, d := range r.timers {
		if d == 24*time.Hour {
			deadline = append(deadline, id)
		}
	}
	if len(deadline) != 1 || r.ended[deadline[0]] != "cancelled" {
		t.Errorf("24h timers %v ended %v, want one, cancelled", deadline, r.ended)
	}
}

// TestDeadlineRuleOverridesPolicy: the approve_when rule with a deadline decides the
// call's timeout and action, not the policy's.
func TestDeadlineRuleOverridesPolicy(t *testing.T) {
	t.Parallel()
	p := approvePolicy("24h", permissions.OnTimeoutDeny)
	p.ApproveWhen = []permissions.Rule{{Capability: permissions.CapShell, Detail: "go test *", ApprovalTimeout: "15m", OnTimeout: permissions.OnTimeoutApprove}}
	r := deadlineRun(t, p, nil, time.Minute)
	if a, _ := r.peeks[0].Approval(); a.ExpiresAt == nil || !a.ExpiresAt.Equal(r.start.Add(15*time.Minute)) || a.OnTimeout != "approve" {
		t.Errorf("__approval__ = %+v, want the rule's 15m approve", a)
	}
	if len(r.f.tools) != 1 {
		t.Errorf("tool calls = %+v, want the call run when the rule's 15m passed", r.f.tools)
	}
	if d := eventsOf(r.final, "approval_decided"); len(d) != 1 || d[0]["reason"] != "no decision within 15m" {
		t.Errorf("approval_decided = %v", d)
	}
}

// TestDeadlineEscalationNotifies: the escalation a deadline raises reaches the agent's
// notification receivers, after the request and before the decision.
func TestDeadlineEscalationNotifies(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	n := &notifyFake{}
	n.register(env)
	spec := approveSpec()
	spec.Permissions = approvePolicy("1h", permissions.OnTimeoutEscalate)
	spec.Notify = []api.NotifyTarget{{URL: "https://a.example/hook", SecretEnv: "A_SECRET"}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{toolReply(call("shell", `{"command":"make deploy"}`)), text("Done.")}}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		a, _ := queryRecord(t, env).Approval()
		update(env, api.DecideRequest{CallID: a.CallID, ArgsSHA256: a.ArgsSHA256, Action: api.DecideDeny, Reason: "not today", By: "ada"})
	}, 3*time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// The notifications run as concurrent activities: order them by the event they carry.
	attempts := slices.Clone(n.attempts)
	slices.SortFunc(attempts, func(a, b api.NotifyApprovalRequest) int { return int(a.Seq - b.Seq) })
	var events []string
	for _, a := range attempts {
		events = append(events, a.Event)
	}
	if want := []string{api.EventApprovalRequested, api.EventApprovalEscalated, api.EventApprovalDecided}; !slices.Equal(events, want) {
		t.Errorf("notifications = %v, want %v", events, want)
	}
}
