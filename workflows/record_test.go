package workflows

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
)

// storedRef is what the fake StoreRecord answers; the memo must carry exactly it.
var storedRef = api.RecordRef{SHA256: "5f0c6a3e2b1d4f5a6c7b8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c", Size: 1234}

// registerStoreRecord registers a StoreRecord that keeps the records it was given.
func registerStoreRecord(env *testsuite.TestWorkflowEnvironment, got *[]api.Record) {
	env.RegisterActivityWithOptions(func(_ context.Context, rec api.Record) (api.RecordRef, error) {
		*got = append(*got, rec)
		return storedRef, nil
	}, activity.RegisterOptions{Name: api.ActivityStoreRecord})
}

func queryEvents(t *testing.T, env *testsuite.TestWorkflowEnvironment, after int64, limit int) api.EventPage {
	t.Helper()
	v, err := env.QueryWorkflow(api.QueryEvents, after, limit)
	if err != nil {
		t.Fatalf("query %s(%d, %d): %v", api.QueryEvents, after, limit, err)
	}
	var p api.EventPage
	if err := v.Get(&p); err != nil {
		t.Fatalf("decode event page: %v", err)
	}
	return p
}

func TestRecordStoredAndReferencedAtClose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		input   gateInput
		decide  func(env *testsuite.TestWorkflowEnvironment)
		want    api.Status
		lastEvt string
	}{
		{"done", gateInput{ID: "7"}, func(env *testsuite.TestWorkflowEnvironment) {
			env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}})
		}, api.StatusDone, "done"},
		{"canceled", gateInput{ID: "8"}, func(env *testsuite.TestWorkflowEnvironment) {
			env.CancelWorkflow()
		}, api.StatusCanceled, "canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			registerGate(env)
			var stored []api.Record
			registerStoreRecord(env, &stored)
			env.OnUpsertMemo(map[string]any{api.MemoRecord: storedRef}).Return().Once()
			env.RegisterDelayedCallback(func() { tc.decide(env) }, time.Hour)
			env.ExecuteWorkflow(gateName, payload(t, tc.input))
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			env.AssertExpectations(t) // the memo holds the reference StoreRecord returned

			if len(stored) != 1 {
				t.Fatalf("StoreRecord ran %d times, want once", len(stored))
			}
			got, want := stored[0], queryRecord(t, env)
			if got.Status != tc.want || got.Events[len(got.Events)-1].Type != tc.lastEvt {
				t.Errorf("stored record: status %s, last event %s; want %s, %s", got.Status, got.Events[len(got.Events)-1].Type, tc.want, tc.lastEvt)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("stored record differs from the final query:\n got %s\nwant %s", gj, wj)
			}
			if _, ok := got.State["fetch"]; !ok {
				t.Errorf("stored record lacks checkpoint fetch: %v", got.State)
			}
		})
	}
}

func TestRecordStoreFailureKeepsOutcome(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	registerGate(env)
	var attempts int32
	env.RegisterActivityWithOptions(func(context.Context, api.Record) (api.RecordRef, error) {
		attempts++
		return api.RecordRef{}, context.DeadlineExceeded
	}, activity.RegisterOptions{Name: api.ActivityStoreRecord})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}})
	}, time.Hour)
	env.ExecuteWorkflow(gateName, payload(t, gateInput{ID: "7"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a failed record store changed the outcome: %v", err)
	}
	if attempts != storeRecordOptions.RetryPolicy.MaximumAttempts {
		t.Errorf("StoreRecord attempts = %d, want %d", attempts, storeRecordOptions.RetryPolicy.MaximumAttempts)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusDone || rec.Events[len(rec.Events)-1].Type != "done" {
		t.Errorf("record after a failed store: status %s, last event %s", rec.Status, rec.Events[len(rec.Events)-1].Type)
	}
}

func TestEventsQueryPages(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	registerGate(env)
	var stored []api.Record
	registerStoreRecord(env, &stored)
	var all []api.Event
	var suspended, tail, past api.EventPage
	env.RegisterDelayedCallback(func() {
		rec := queryRecord(t, env)
		// Page through in twos from the start: every event once, in order.
		after := int64(0)
		for i := 0; ; i++ {
			p := queryEvents(t, env, after, 2)
			if len(p.Events) > 2 {
				t.Errorf("page of limit 2 has %d events", len(p.Events))
			}
			all = append(all, p.Events...)
			if !p.More {
				suspended = p
				break
			}
			if len(p.Events) == 0 || i > 100 {
				t.Fatalf("page after %d: more but no events", after)
			}
			after = p.Events[len(p.Events)-1].Seq
		}
		if len(all) != len(rec.Events) {
			t.Errorf("paged %d events, the record has %d", len(all), len(rec.Events))
		}
		tail = queryEvents(t, env, rec.Events[len(rec.Events)-2].Seq, 0)
		past = queryEvents(t, env, rec.Events[len(rec.Events)-1].Seq+5, 0)
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}})
	}, time.Hour)
	env.ExecuteWorkflow(gateName, payload(t, gateInput{ID: "7"}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Errorf("paged event %d has seq %d", i, ev.Seq)
		}
	}
	if suspended.Status != api.StatusSuspended || suspended.Waiting[api.StateSuspend] == nil {
		t.Errorf("page while suspended: status %s, waiting %v; want suspended with %s", suspended.Status, suspended.Waiting, api.StateSuspend)
	}
	if len(suspended.Checkpoints) != 1 || suspended.Checkpoints[0] != "fetch" {
		t.Errorf("checkpoints while suspended = %v, want [fetch]", suspended.Checkpoints)
	}
	if suspended.LastSeq != int64(len(all)) || suspended.FirstSeq != 1 {
		t.Errorf("last_seq %d first_seq %d, want %d and 1", suspended.LastSeq, suspended.FirstSeq, len(all))
	}
	if len(tail.Events) != 1 || tail.Events[0].Seq != int64(len(all)) || tail.More {
		t.Errorf("page after the next-to-last event = %+v, want only the last", tail.Events)
	}
	if len(past.Events) != 0 || past.More {
		t.Errorf("page after the last event: %d events, more %v; want none", len(past.Events), past.More)
	}

	final := queryEvents(t, env, suspended.LastSeq, 0)
	if final.Status != api.StatusDone || len(final.Events) == 0 || final.Events[len(final.Events)-1].Type != "done" || final.Waiting != nil {
		t.Errorf("page after done: status %s, %d events, waiting %v", final.Status, len(final.Events), final.Waiting)
	}
}
