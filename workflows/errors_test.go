package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/permissions"
)

// noteFlow is a user's workflow whose own update handler ("note") emits an event and
// stores a checkpoint through the authoring API; it ends on the update "done".
func noteFlow(ctx workflow.Context, _ struct{}) (string, error) {
	finished := false
	if err := workflow.SetUpdateHandler(ctx, "note", func(ctx workflow.Context, text string) (string, error) {
		if err := Emit(ctx, "note", map[string]string{"text": text}); err != nil {
			return "", err
		}
		return Checkpoint[string](ctx, "note:"+text, "Shout", text)
	}); err != nil {
		return "", err
	}
	if err := workflow.SetUpdateHandler(ctx, "done", func(ctx workflow.Context) error {
		finished = true
		return nil
	}); err != nil {
		return "", err
	}
	if err := workflow.Await(ctx, func() bool { return finished }); err != nil {
		return "", err
	}
	return "ok", nil
}

// TestUpdateHandlerEmitsAndCheckpoints: a user's update handler gets a context derived
// from the SDK's root, not the run's; Emit and Checkpoint from it still reach the run's
// record, and the checkpoint runs with the run's default activity options.
func TestUpdateHandlerEmitsAndCheckpoints(t *testing.T) {
	// Not parallel: it counts the process's run runtimes (runtimes.Len), which the
	// parallel tests' runs change; Go runs the parallel ones only after this one ended.
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(Wrap("NoteFlow", noteFlow, Options{}), workflow.RegisterOptions{Name: "NoteFlow"})
	shouts := 0
	env.RegisterActivityWithOptions(func(_ context.Context, s string) (string, error) {
		shouts++
		return strings.ToUpper(s), nil
	}, activity.RegisterOptions{Name: "Shout"})
	var got string
	var updErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow("note", "u1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { updErr = err },
			OnComplete: func(v any, err error) {
				if err != nil {
					updErr = err
					return
				}
				got, _ = v.(string)
			}}, "hello")
	}, time.Minute)
	var rec api.Record
	env.RegisterDelayedCallback(func() {
		rec = queryRecord(t, env)
		env.UpdateWorkflow("done", "u2", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}})
	}, 2*time.Minute)
	before := runtimes.Len()
	env.ExecuteWorkflow("NoteFlow", json.RawMessage(`{}`))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if n := runtimes.Len(); n != before {
		t.Errorf("runtimes held = %d after the run ended, want %d (the ended run's removed)", n, before)
	}
	if updErr != nil || got != "HELLO" {
		t.Fatalf("update note = %q, %v; want HELLO", got, updErr)
	}
	if shouts != 1 {
		t.Errorf("Shout ran %d times, want 1", shouts)
	}
	if n := countEvents(rec, "note"); n != 1 {
		t.Errorf("note events = %d, want 1 (events %+v)", n, rec.Events)
	}
	if string(rec.State["note:hello"]) != `"HELLO"` {
		t.Errorf("state[note:hello] = %s, want \"HELLO\"", rec.State["note:hello"])
	}
}

// TestAuthoringAPIWithoutRuntimeIsAnError: a workflow registered without Register has no
// run record; the authoring API says so with an error instead of panicking the task.
func TestAuthoringAPIWithoutRuntimeIsAnError(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) ([]string, error) {
		var msgs []string
		check := func(err error) {
			if !errors.Is(err, ErrNoRuntime) {
				msgs = append(msgs, "not ErrNoRuntime: "+err.Error())
				return
			}
			msgs = append(msgs, err.Error())
		}
		check(Emit(ctx, "x", nil))
		_, err := Checkpoint[string](ctx, "lookup", "Lookup")
		check(err)
		_, err = Suspend(ctx, "wait", "")
		check(err)
		return msgs, nil
	}, workflow.RegisterOptions{Name: "Bare"})
	env.ExecuteWorkflow("Bare")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error = %v, want the errors returned to the workflow, not a panic", err)
	}
	var msgs []string
	if err := env.GetWorkflowResult(&msgs); err != nil {
		t.Fatal(err)
	}
	want := []string{"emit x in workflow Bare", "checkpoint lookup in workflow Bare", "suspend (wait) in workflow Bare"}
	if len(msgs) != len(want) {
		t.Fatalf("errors = %q", msgs)
	}
	for i, w := range want {
		if !strings.HasPrefix(msgs[i], w) || !strings.HasSuffix(msgs[i], "register it with workflows.Register") {
			t.Errorf("error %d = %q, want it to start %q and say how to fix it", i, msgs[i], w)
		}
	}
}

// lookupFlow checkpoints "lookup" through the LookupOrder activity.
func lookupFlow(ctx workflow.Context, in struct{ Order string }) (string, error) {
	out, err := Checkpoint[string](ctx, "lookup", "LookupOrder", in.Order)
	if err != nil {
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != api.ErrTypeNotFound || !app.NonRetryable() {
			return "", temporal.NewNonRetryableApplicationError("inside the workflow the checkpoint's error lost its type: "+err.Error(), "Test", nil)
		}
		return "", err
	}
	return out, nil
}

// TestFailedCheckpointKeepsItsType: an activity's non-retryable NexoNotFound reaches the
// workflow code (errors.As through the checkpoint's wrapping) and the run's caller (the top
// ApplicationError of the closed run) with its type and flag; the record keeps the text.
func TestFailedCheckpointKeepsItsType(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(Wrap("Lookup", lookupFlow, Options{}), workflow.RegisterOptions{Name: "Lookup"})
	env.RegisterActivityWithOptions(func(_ context.Context, id string) (string, error) {
		return "", temporal.NewNonRetryableApplicationError("order "+id+" not found", api.ErrTypeNotFound, nil)
	}, activity.RegisterOptions{Name: "LookupOrder"})
	env.ExecuteWorkflow("Lookup", json.RawMessage(`{"Order":"A-1"}`))
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("workflow error = %v, want an ApplicationError", err)
	}
	const wantMsg = "checkpoint lookup: LookupOrder: order A-1 not found"
	if app.Type() != api.ErrTypeNotFound || !app.NonRetryable() || app.Message() != wantMsg {
		t.Errorf("run failed with type %q non-retryable %v message %q; want %s, true, %q", app.Type(), app.NonRetryable(), app.Message(), api.ErrTypeNotFound, wantMsg)
	}
	var act *temporal.ActivityError
	if !errors.As(err, &act) || act.ActivityType().GetName() != "LookupOrder" {
		t.Errorf("the activity failure is not under the run's error: %v", err)
	}
	if rec := queryRecord(t, env); deref(rec.Error) != wantMsg || rec.Status != api.StatusFailed {
		t.Errorf("record = %s %q, want failed %q", rec.Status, deref(rec.Error), wantMsg)
	}
}

// TestCanceledCheckpointStaysCanceled: cancelling a run inside a checkpoint closes it
// canceled; the checkpoint's wrapping does not turn the cancellation into a failure.
func TestCanceledCheckpointStaysCanceled(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(Wrap("Lookup", lookupFlow, Options{}), workflow.RegisterOptions{Name: "Lookup"})
	env.RegisterActivityWithOptions(func(ctx context.Context, _ string) (string, error) {
		select { // an activity that only ends when canceled (bounded so a broken test cannot hang)
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return "", ctx.Err()
	}, activity.RegisterOptions{Name: "LookupOrder"})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow("Lookup", json.RawMessage(`{"Order":"A-1"}`))
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want a cancellation", err)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusCanceled {
		t.Errorf("record status = %s, want canceled", rec.Status)
	}
}

// flakyModel registers a CompleteChat that fails with fail for its first failures
// attempts, then answers "done"; it returns the times (simulated) of every attempt.
func flakyModel(env *testsuite.TestWorkflowEnvironment, failures int, fail error) *[]time.Time {
	var at []time.Time
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		at = append(at, env.Now())
		if len(at) <= failures {
			return api.CompleteChatResult{}, fail
		}
		return api.CompleteChatResult{Message: text("done"), Model: "fake"}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	return &at
}

func rateLimited(after time.Duration) error {
	return temporal.NewApplicationErrorWithOptions("model m: HTTP 429: slow down", api.ErrTypeModelUnavailable,
		temporal.ApplicationErrorOptions{NextRetryDelay: after})
}

// TestModelRetriesWithinItsBudget: a provider answering 429 for a minute (more than the
// six attempts a model call used to get) does not fail the run; the provider's Retry-After
// sets the delay. A budget that runs out fails the run with the provider's last answer.
func TestModelRetriesWithinItsBudget(t *testing.T) {
	t.Parallel()
	spec := agents.Spec{Name: "scribe", Permissions: permissions.Policy{Mode: permissions.ModeAuto}}
	t.Run("429 for a minute, then an answer", func(t *testing.T) {
		env := newEnv(t)
		(&agentFakes{spec: spec}).register(env)
		at := flakyModel(env, 12, rateLimited(5*time.Second))
		env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("run failed after %d attempts: %v", len(*at), err)
		}
		if len(*at) != 13 {
			t.Fatalf("attempts = %d, want 13", len(*at))
		}
		for i := 1; i < len(*at); i++ {
			if gap := (*at)[i].Sub((*at)[i-1]); gap < 5*time.Second {
				t.Fatalf("attempt %d came %s after the previous one, want the provider's Retry-After of 5s", i+1, gap)
			}
		}
		if rec := queryRecord(t, env); rec.Status != api.StatusDone {
			t.Errorf("status = %s, want done", rec.Status)
		}
	})
	t.Run("budget runs out", func(t *testing.T) {
		env := newEnv(t)
		short := spec
		short.RetryFor = api.Duration(10 * time.Minute)
		(&agentFakes{spec: short}).register(env)
		at := flakyModel(env, 1<<30, rateLimited(0))
		env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
		var app *temporal.ApplicationError
		err := env.GetWorkflowError()
		if !errors.As(err, &app) || app.Type() != api.ErrTypeModelUnavailable {
			t.Fatalf("workflow error = %v, want the provider's last answer (%s)", err, api.ErrTypeModelUnavailable)
		}
		if len(*at) <= 6 {
			t.Errorf("attempts = %d, want more than 6 within the 10m budget", len(*at))
		}
		if span := (*at)[len(*at)-1].Sub((*at)[0]); span > 10*time.Minute {
			t.Errorf("attempts spanned %s, past the 10m budget", span)
		}
		if rec := queryRecord(t, env); !strings.Contains(deref(rec.Error), "HTTP 429: slow down") {
			t.Errorf("record error = %q, want the provider's last answer", deref(rec.Error))
		}
	})
	t.Run("400 fails at once", func(t *testing.T) {
		env := newEnv(t)
		(&agentFakes{spec: spec}).register(env)
		at := flakyModel(env, 1<<30, temporal.NewNonRetryableApplicationError("model m: HTTP 400: unknown parameter", api.ErrTypeBadInput, nil))
		env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
		var app *temporal.ApplicationError
		err := env.GetWorkflowError()
		if !errors.As(err, &app) || app.Type() != api.ErrTypeBadInput || !app.NonRetryable() {
			t.Fatalf("workflow error = %v, want non-retryable %s at the top", err, api.ErrTypeBadInput)
		}
		if len(*at) != 1 {
			t.Errorf("attempts = %d, want 1", len(*at))
		}
		const want = "agent scribe: model call 1: CompleteChat: model m: HTTP 400: unknown parameter"
		if app.Message() != want {
			t.Errorf("message = %q, want %q", app.Message(), want)
		}
	})
}

// TestErrorMessageSaysTheBudgetRanOut: an activity the server gave up on because its
// schedule-to-close budget ran out (retry state TIMEOUT; Temporal's testsuite does not set
// it) reads as such in the record, after the last failure.
func TestErrorMessageSaysTheBudgetRanOut(t *testing.T) {
	t.Parallel()
	f := &failurepb.Failure{
		Message: "activity error",
		FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{
			ActivityType: &commonpb.ActivityType{Name: api.ActivityCompleteChat}, RetryState: enumspb.RETRY_STATE_TIMEOUT}},
		Cause: &failurepb.Failure{Message: "model m: HTTP 429: slow down", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
			ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: api.ErrTypeModelUnavailable}}},
	}
	err := temporal.GetDefaultFailureConverter().FailureToError(f)
	const want = "CompleteChat: model m: HTTP 429: slow down (retried until its retry budget ran out)"
	if got := errorMessage(err); got != want {
		t.Errorf("errorMessage = %q, want %q", got, want)
	}
}

// TestRuntimeIsForgottenWhenAnOpenRunIsUnwound: a run still waiting (here replayed from a
// fixture of a run suspended on an approval) is unwound by the SDK as an evicted one is
// (runtime.Goexit on its coroutines); its runtime does not stay behind in the process.
func TestRuntimeIsForgottenWhenAnOpenRunIsUnwound(t *testing.T) {
	// Not parallel: it counts the process's run runtimes (runtimes.Len), which the
	// parallel tests' runs change; Go runs the parallel ones only after this one ended.
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
		ExternalStorage: payloads.ExternalStorage(fixtureBlobs(t), 0)})
	if err != nil {
		t.Fatal(err)
	}
	RegisterAll(r)
	before := runtimes.Len()
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", "threadref_agent_suspended_on_approval.json")); err != nil {
		t.Fatal(err)
	}
	// The SDK unwinds the run's coroutines asynchronously, after the replay returns.
	for deadline := time.Now().Add(10 * time.Second); runtimes.Len() != before; {
		if time.Now().After(deadline) {
			t.Fatalf("runtimes held = %d 10s after the replay, want %d", runtimes.Len(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
