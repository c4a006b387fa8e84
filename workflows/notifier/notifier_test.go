package notifier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var target = api.NotifyTarget{URL: "https://hooks.example.com/nexo", SecretEnv: "NOTIFY_SECRET"}

// receiver is the fake DeliverNotification: answer decides each attempt's outcome (nil:
// delivered); delivered and attempts record what happened, by ref, in order.
type receiver struct {
	mu        sync.Mutex
	answer    func(ref string, attempt int) error
	attempts  map[string]int
	delivered []string
	at        map[string]time.Time // when each ref was delivered, workflow time of the attempt
}

func (r *receiver) register(env *testsuite.TestWorkflowEnvironment) {
	r.attempts, r.at = map[string]int{}, map[string]time.Time{}
	env.RegisterActivityWithOptions(func(ctx context.Context, req api.DeliverNotificationRequest) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.Target != target {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("target %+v, want the notifier's", req.Target), api.ErrTypeBadInput, nil)
		}
		r.attempts[req.Ref]++
		var err error
		if r.answer != nil {
			err = r.answer(req.Ref, r.attempts[req.Ref])
		}
		if err == nil {
			r.delivered = append(r.delivered, req.Ref)
			r.at[req.Ref] = activity.GetInfo(ctx).StartedTime
		}
		return err
	}, activity.RegisterOptions{Name: api.ActivityDeliverNotification})
}

func unavailable() error {
	return temporal.NewApplicationError("notify https://hooks.example.com/nexo: the receiver answered 503 Service Unavailable", api.ErrTypeNotifyUnavailable)
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(epoch)
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: api.WorkflowNotifier})
	return env
}

// item is notification seq of run, whose event happened at workflow time at.
func item(run string, seq int64, at time.Duration) api.NotifyItem {
	return api.NotifyItem{RunID: run, Event: api.EventApprovalRequested, Seq: seq, At: epoch.Add(at), Ref: fmt.Sprintf("%s-%d", run, seq)}
}

// hand signals it to the notifier at workflow time at.
func hand(env *testsuite.TestWorkflowEnvironment, at time.Duration, it api.NotifyItem) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.SignalNotify, it) }, at)
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) api.NotifierStatus {
	t.Helper()
	v, err := env.QueryWorkflow(api.QueryNotifications)
	if err != nil {
		t.Fatalf("query %s: %v", api.QueryNotifications, err)
	}
	var st api.NotifierStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNotifierDeliversEachRunInSeqOrder: a run's notifications reach the receiver in the
// order of their seq, its first retried until the receiver is back; another run's are
// delivered meanwhile, not held behind it. A repeated hand-over is delivered once.
func TestNotifierDeliversEachRunInSeqOrder(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	r := &receiver{answer: func(ref string, attempt int) error {
		if ref == "a-1" && attempt <= 5 { // down for the run's first five attempts (a minute or so)
			return unavailable()
		}
		return nil
	}}
	r.register(env)
	hand(env, time.Second, item("a", 1, 0))
	hand(env, 2*time.Second, item("a", 4, time.Second))
	hand(env, 2*time.Second, item("a", 4, time.Second)) // the hand-over's local activity retried
	hand(env, 3*time.Second, item("b", 2, 2*time.Second))
	hand(env, 4*time.Second, item("a", 7, 3*time.Second))
	var during api.NotifierStatus
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 10*time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(api.WorkflowNotifier, api.NotifierInput{Target: target})

	if len(during.Pending) != 3 || during.Pending[0].Ref != "a-1" || during.Pending[0].Attempts == 0 ||
		during.Pending[0].LastError == "" || during.Pending[0].NextAttempt == nil {
		t.Errorf("while the receiver was down the notifier showed %+v; want a-1, a-4, a-7 pending, a-1 with its attempts, last error and next attempt", during.Pending)
	}
	if during.Receiver != target.Name() {
		t.Errorf("receiver = %q, want %q", during.Receiver, target.Name())
	}
	var order []string
	for _, ref := range r.delivered {
		if ref != "b-2" {
			order = append(order, ref)
		}
	}
	if fmt.Sprint(order) != "[a-1 a-4 a-7]" {
		t.Errorf("run a delivered %v, want [a-1 a-4 a-7] (seq order, each once)", order)
	}
	if !r.at["b-2"].Before(r.at["a-1"]) {
		t.Errorf("run b's notification was delivered at %s, after run a's first (%s): one run's retries held another's", r.at["b-2"], r.at["a-1"])
	}
	if r.attempts["a-1"] != 6 {
		t.Errorf("a-1 was attempted %d times, want 6 (5 refused, then delivered)", r.attempts["a-1"])
	}
	after := query(t, env)
	if len(after.Pending) != 0 || len(after.Failed) != 0 || after.Delivered != 4 {
		t.Errorf("after: %+v, want nothing pending or failed and 4 delivered", after)
	}
}

// TestNotifierRetriesForItsWholeWindow: a receiver that stays down gets the notification
// retried for api.NotifyRetryFor from its event, then it is failed, visible with its
// attempts and last error; a refused one (a 4xx) fails at once and the run's next goes on.
func TestNotifierRetriesForItsWholeWindow(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	r := &receiver{answer: func(ref string, attempt int) error {
		switch ref {
		case "a-1":
			return unavailable()
		case "b-1":
			return temporal.NewNonRetryableApplicationError("notify https://hooks.example.com/nexo: the receiver answered 410 Gone", api.ErrTypeBadInput, nil)
		}
		return nil
	}}
	r.register(env)
	hand(env, time.Second, item("a", 1, 0))
	hand(env, time.Second, item("b", 1, 0))
	hand(env, 2*time.Second, item("b", 3, time.Second))
	var at5h api.NotifierStatus
	env.RegisterDelayedCallback(func() { at5h = query(t, env) }, 5*time.Hour+50*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 8*time.Hour)
	env.ExecuteWorkflow(api.WorkflowNotifier, api.NotifierInput{Target: target})

	if len(at5h.Pending) != 1 || at5h.Pending[0].Ref != "a-1" {
		t.Errorf("5h50m after its event: pending %+v, want a-1 still retried", at5h.Pending)
	}
	st := query(t, env)
	if len(st.Failed) != 2 || st.Delivered != 1 || fmt.Sprint(r.delivered) != "[b-3]" {
		t.Fatalf("at the end: %+v, delivered %v; want b-1 refused, a-1 out of time, b-3 delivered", st, r.delivered)
	}
	byRef := map[string]api.NotifyItem{}
	for _, f := range st.Failed {
		byRef[f.Ref] = f
	}
	gone, down := byRef["b-1"], byRef["a-1"]
	if gone.Status != api.NotifyFailed || gone.Attempts != 1 || gone.LastError == "" || gone.GaveUpAt == nil {
		t.Errorf("refused notification %+v, want failed after 1 attempt naming the answer", gone)
	}
	if down.Status != api.NotifyFailed || down.Attempts < 30 || down.GaveUpAt == nil {
		t.Fatalf("unreachable receiver's notification %+v, want failed after many attempts", down)
	}
	if took := down.GaveUpAt.Sub(down.At); took < api.NotifyRetryFor-MaxBackoff || took > api.NotifyRetryFor {
		t.Errorf("given up %s after its event, want within %s of %s", took, MaxBackoff, api.NotifyRetryFor)
	}
	if want := "503 Service Unavailable"; !strings.Contains(down.LastError, want) || !strings.Contains(down.LastError, "gave up") {
		t.Errorf("last error %q, want it to say it gave up and name %q", down.LastError, want)
	}
}

// TestNotifierContinuesAsNewWithItsPending: past its history bound the notifier continues
// as new carrying what is pending with its attempts and next attempt, and the new execution
// delivers it, in order, within the window the event started.
func TestNotifierContinuesAsNewWithItsPending(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	r := &receiver{answer: func(string, int) error { return unavailable() }}
	r.register(env)
	hand(env, time.Second, item("a", 1, 0))
	hand(env, time.Second, item("a", 2, 0))
	hand(env, time.Second, item("b", 5, 0))
	env.ExecuteWorkflow(api.WorkflowNotifier, api.NotifierInput{Target: target, ContinueAfter: 8})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("notifier ended with %v, want it to continue as new", err)
	}
	var carried api.NotifierInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &carried); err != nil {
		t.Fatal(err)
	}
	if len(carried.Pending) != 3 || carried.Pending[0].Ref != "a-1" || carried.Pending[1].Ref != "a-2" || carried.Pending[2].Ref != "b-5" {
		t.Fatalf("carried %+v, want a-1, a-2, b-5 pending in order", carried.Pending)
	}
	if a1 := carried.Pending[0]; a1.Attempts == 0 || a1.LastError == "" || a1.NextAttempt == nil {
		t.Errorf("a-1 carried as %+v, want its attempts, last error and next attempt", a1)
	}
	if carried.Target != target || carried.LastSeq["a"].Seq != 2 {
		t.Errorf("carried target %+v, last seq %+v; want the receiver and run a's seq 2", carried.Target, carried.LastSeq)
	}

	// The next execution: the receiver is back.
	env2 := newEnv(t)
	env2.SetStartTime(epoch.Add(10 * time.Minute))
	r2 := &receiver{}
	r2.register(env2)
	hand(env2, time.Second, item("a", 2, 0)) // a repeat from before: dropped
	env2.RegisterDelayedCallback(env2.CancelWorkflow, time.Hour)
	carried.ContinueAfter = 0
	env2.ExecuteWorkflow(api.WorkflowNotifier, carried)
	if fmt.Sprint(r2.delivered) != "[a-1 b-5 a-2]" && fmt.Sprint(r2.delivered) != "[a-1 a-2 b-5]" && fmt.Sprint(r2.delivered) != "[b-5 a-1 a-2]" {
		t.Errorf("after continue-as-new delivered %v, want a-1 before a-2, b-5, each once", r2.delivered)
	}
	if len(r2.delivered) != 3 {
		t.Errorf("delivered %v, want 3", r2.delivered)
	}
}
