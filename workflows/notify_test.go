package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// notifyFake records every notification a run hands to its receivers' outbox
// (EnqueueNotification, the path of runs since ChangeNotifyOutbox) and, for the runs of
// the replayed histories before it, every NotifyApproval attempt, which fails with err
// (nil: delivered).
type notifyFake struct {
	mu       sync.Mutex
	attempts []api.NotifyApprovalRequest
	queues   []string // the task queue each hand-over named
	err      error
	// decided, when set, gets the receiver URL of every approval_decided hand-over.
	decided chan string
}

func (f *notifyFake) register(env interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}) {
	record := func(req api.NotifyApprovalRequest) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.attempts = append(f.attempts, req)
		if f.decided != nil && req.Event == api.EventApprovalDecided {
			select {
			case f.decided <- req.Target.URL:
			default:
			}
		}
	}
	env.RegisterActivityWithOptions(func(_ context.Context, req api.NotifyApprovalRequest) error {
		record(req)
		return f.err
	}, activity.RegisterOptions{Name: api.ActivityNotifyApproval})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.EnqueueNotificationRequest) error {
		record(req.Request)
		f.mu.Lock()
		f.queues = append(f.queues, req.TaskQueue)
		f.mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: api.ActivityEnqueueNotification})
}

// sent is, per event type and receiver URL, how many attempts there were.
func (f *notifyFake) sent() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, a := range f.attempts {
		out[a.Event+" "+a.Target.URL]++
	}
	return out
}

// TestApprovalNotifiesEveryReceiverWithoutBlocking: a gated call hands a notification per
// receiver to the receivers' outbox when it is requested and when it is decided, in seq
// order, carrying the call (the decided one with what the request said); nothing of the
// delivery is the run's, so it closes as soon as its answer is in, with no grace for
// receivers that may be down.
func TestApprovalNotifiesEveryReceiverWithoutBlocking(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := approveSpec()
	spec.Notify = []api.NotifyTarget{{URL: "https://a.example/hook", SecretEnv: "A_SECRET"}, {URL: "https://b.example/hook", SecretEnv: "B_SECRET"}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Wrote notes.md."),
	}}
	n := &notifyFake{err: errors.New("receiver down (503)")}
	f.register(env)
	n.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	var res api.AgentResult
	_ = env.GetWorkflowResult(&res)
	if res.Content != "Wrote notes.md." {
		t.Errorf("result = %+v, want the model's answer", res)
	}
	var got []string
	for _, a := range n.attempts {
		got = append(got, a.Event+" "+a.Target.URL)
	}
	want := []string{"approval_requested https://a.example/hook", "approval_requested https://b.example/hook",
		"approval_decided https://a.example/hook", "approval_decided https://b.example/hook"}
	if !slices.Equal(got, want) {
		t.Fatalf("hand-overs = %v, want %v (each once, in seq order)", got, want)
	}
	for _, q := range n.queues {
		if q == "" {
			t.Errorf("a hand-over names no task queue, want the run's")
		}
	}
	decided := n.attempts[2]
	var c map[string]any
	_ = json.Unmarshal(decided.Call, &c)
	if c["call_id"] != "1.1" || c["tool"] != "write_file" || c["capability"] != "write" || c["detail"] != "notes.md" ||
		c["approved"] != true || c["by"] != "ada" {
		t.Errorf("decided call = %v, want 1.1 write_file (write, notes.md) approved by ada", c)
	}
	if args, _ := c["args"].(map[string]any); args["path"] != "notes.md" {
		t.Errorf("decided call args = %v, want the requested arguments", c["args"])
	}
	if decided.RunID == "" || decided.Agent != "scribe" || decided.Workflow != api.WorkflowAgentRun || decided.Seq <= n.attempts[0].Seq {
		t.Errorf("decided request = %+v, want the run, its agent and the event's seq (after the request's)", decided)
	}
	rec := queryRecord(t, env)
	if took := rec.UpdatedAt.Sub(rec.CreatedAt); took >= time.Hour+NotifyCloseGrace {
		t.Errorf("the run closed %s after it started, decided at 1h: it waited on its receivers", took)
	}
	for _, e := range rec.Events {
		if e.Type == "failed" || e.Type == "notify_failed" {
			t.Errorf("a notification's failure reached the record: %+v", e)
		}
	}
}

// TestApprovalWithoutReceiversNotifiesNothing: an agent without approvals.notify schedules
// no notification (and so records no version marker: runs recorded before keep replaying).
func TestApprovalWithoutReceiversNotifiesNothing(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Wrote notes.md."),
	}}
	f.register(env)
	n := &notifyFake{}
	n.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	if len(n.attempts) != 0 {
		t.Errorf("notifications without receivers: %+v", n.attempts)
	}
}

// TestSessionApprovalNotifies: a session's gated call notifies its receivers when requested
// and when decided, as a run's does, naming the session's workflow and agent.
func TestSessionApprovalNotifies(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := approveSpec()
	spec.Notify = []api.NotifyTarget{{URL: "https://a.example/hook", SecretEnv: "A_SECRET"}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)), text("written")}}
	f.register(env)
	n := &notifyFake{}
	n.register(env)
	var out []promptResult
	prompt(env, time.Minute, "write it", &out)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1.1", Approved: true, By: "ada"})
	}, 30*time.Minute)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "scribe", Instance: "ada"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].reply.Reply != "written" {
		t.Fatalf("replies = %+v, want the approved write done", out)
	}
	got := n.sent()
	if got["approval_requested https://a.example/hook"] != 1 || got["approval_decided https://a.example/hook"] != 1 {
		t.Errorf("notifications = %v, want one requested and one decided", got)
	}
	for _, a := range n.attempts {
		if a.Workflow != api.WorkflowSession || a.Agent != "scribe" || a.RunID == "" {
			t.Errorf("notification %+v, want the session's workflow, agent and id", a)
		}
	}
}

// TestEscalationNotifiesWithTheRequestedCall: approval_escalated (emitted once approval
// deadlines land) notifies the receivers too, carrying what the call's request said.
func TestEscalationNotifiesWithTheRequestedCall(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	n := &notifyFake{}
	n.register(env)
	spec := approveSpec()
	spec.Notify = []api.NotifyTarget{{URL: "https://a.example/hook", SecretEnv: "A_SECRET"}}
	env.RegisterWorkflowWithOptions(Wrap("Escalating", func(ctx workflow.Context, _ struct{}) (string, error) {
		rt, err := runtimeOf(ctx, "escalate")
		if err != nil {
			return "", err
		}
		rt.notify.use(spec)
		rt.emitApproval(ctx, api.EventApprovalRequested, "1.1", map[string]any{"call_id": "1.1", "tool": "shell", "capability": "shell",
			"detail": "make deploy", "args": map[string]any{"command": "make deploy"}})
		rt.emitApproval(ctx, api.EventApprovalEscalated, "1.1", map[string]any{"call_id": "1.1", "after": "24h"})
		rt.emit(ctx, "checkpoint", map[string]any{"name": "other"}) // not an approval event: no notification
		return "ok", workflow.Sleep(ctx, time.Minute)
	}, Options{}), workflow.RegisterOptions{Name: "Escalating"})
	env.ExecuteWorkflow("Escalating", struct{}{})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// The two activities run concurrently: their order is the events' (seq), not the attempts'.
	attempts := append([]api.NotifyApprovalRequest(nil), n.attempts...)
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].Seq < attempts[j].Seq })
	if len(attempts) != 2 || attempts[0].Event != api.EventApprovalRequested || attempts[1].Event != api.EventApprovalEscalated {
		t.Fatalf("notifications = %+v, want requested then escalated", attempts)
	}
	var c map[string]any
	_ = json.Unmarshal(attempts[1].Call, &c)
	if c["tool"] != "shell" || c["detail"] != "make deploy" || c["after"] != "24h" {
		t.Errorf("escalated call = %v, want the requested shell make deploy with the escalation's own fields", c)
	}
}

// TestRunsBeforeTheOutboxKeepTheirActivities: a run that took the notifications' old path
// (ChangeNotifyOutbox at DefaultVersion, as every run recorded before it replays) still
// notifies through NotifyApproval activities of its own, retried, and gives them the close
// grace, as it did: the outbox changes nothing for it.
func TestRunsBeforeTheOutboxKeepTheirActivities(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnGetVersion(ChangeNotifyOutbox, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	spec := approveSpec()
	spec.Notify = []api.NotifyTarget{{URL: "https://a.example/hook", SecretEnv: "A_SECRET"}}
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("write_file", `{"path":"notes.md","content":"hi"}`)),
		text("Wrote notes.md."),
	}}
	n := &notifyFake{err: errors.New("receiver down (503)")}
	f.register(env)
	n.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true, By: "ada"})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	if len(n.queues) != 0 {
		t.Errorf("a run on the old path handed %d notifications to the outbox", len(n.queues))
	}
	if got := n.sent()["approval_requested https://a.example/hook"]; got < 2 {
		t.Errorf("the requested call's NotifyApproval was attempted %d times within the hour, want it retried", got)
	}
	rec := queryRecord(t, env)
	if took := rec.UpdatedAt.Sub(rec.CreatedAt); took < time.Hour+NotifyCloseGrace {
		t.Errorf("the run closed %s after it started, decided at 1h: want the %s close grace of notify-before-close", took, NotifyCloseGrace)
	}
}

// TestConcurrentApprovalsHandOverInSeqOrder: approval events of calls gated at once (the
// calls of one reply under tool_concurrency, each in its own goroutine) reach the
// receiver's outbox one after the other in seq order, even when the first hand-over is
// slow: the notifier drops a seq older than one it already has, so a hand-over that
// overtook another would lose it.
func TestConcurrentApprovalsHandOverInSeqOrder(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	var mu sync.Mutex
	var seqs []int64
	second := make(chan struct{})
	var once sync.Once
	env.RegisterActivityWithOptions(func(_ context.Context, req api.EnqueueNotificationRequest) error {
		if strings.Contains(string(req.Request.Call), `"1.1"`) {
			// The first event's hand-over is slow: one that does not wait its turn overtakes
			// it meanwhile (and would close second); one that waits never comes.
			select {
			case <-second:
			case <-time.After(time.Second):
			}
		} else {
			once.Do(func() { close(second) })
		}
		mu.Lock()
		seqs = append(seqs, req.Request.Seq)
		mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: api.ActivityEnqueueNotification})
	spec := approveSpec()
	spec.Notify = []api.NotifyTarget{{URL: "https://a.example/hook", SecretEnv: "A_SECRET"}}
	env.RegisterWorkflowWithOptions(Wrap("Concurrent", func(ctx workflow.Context, _ struct{}) (string, error) {
		rt, err := runtimeOf(ctx, "concurrent")
		if err != nil {
			return "", err
		}
		rt.notify.use(spec)
		wg := workflow.NewWaitGroup(ctx)
		for _, id := range []string{"1.1", "1.2", "1.3"} {
			wg.Add(1)
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				rt.emitApproval(ctx, api.EventApprovalRequested, id, map[string]any{"call_id": id, "tool": "shell"})
			})
		}
		wg.Wait(ctx)
		return "ok", nil
	}, Options{}), workflow.RegisterOptions{Name: "Concurrent"})
	env.ExecuteWorkflow("Concurrent", struct{}{})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || !slices.IsSorted(seqs) {
		t.Errorf("hand-overs in the order %v, want the three requests in seq order", seqs)
	}
}
