package demo

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/api"
)

// fakeActs are the demo activities with counters, registered by their api names.
type fakeActs struct {
	mu                 sync.Mutex // the test suite runs a checkpoint group's activities at once
	fetches, publishes int
	metricFails        map[string]int // name → failures left
	metricCalls        map[string]int
}

func (f *fakeActs) register(env *testsuite.TestWorkflowEnvironment) {
	if f.metricCalls == nil {
		f.metricCalls = map[string]int{}
	}
	env.RegisterActivityWithOptions(func(_ context.Context, id string) (api.Document, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.fetches++
		return api.Document{ID: id, Title: "T" + id}, nil
	}, activity.RegisterOptions{Name: api.ActivityFetchDocument})
	env.RegisterActivityWithOptions(func(_ context.Context, d api.Document) (string, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.publishes++
		return "published/" + d.ID, nil
	}, activity.RegisterOptions{Name: api.ActivityPublishDocument})
	// A failing metric fails only once another metric's result reached the workflow, so
	// "completed steps stay" is what a test sees rather than a race with the cancellation
	// of the others. The test environment hands a result to the workflow before it calls
	// the completed listener, so the listener is the event to wait on.
	completed := make(chan struct{}, 16)
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		if info.ActivityType.Name == api.ActivityFetchMetric && err == nil {
			completed <- struct{}{}
		}
	})
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (api.Metric, error) {
		f.mu.Lock()
		f.metricCalls[name]++
		failing := f.metricFails[name] > 0
		f.mu.Unlock()
		if failing {
			select {
			case <-completed:
			case <-time.After(5 * time.Second):
			}
			f.mu.Lock()
			f.metricFails[name]--
			f.mu.Unlock()
			return api.Metric{}, temporal.NewNonRetryableApplicationError(name+" backend down", "Boom", nil)
		}
		return api.Metric{Name: name, Value: float64(len(name))}, nil
	}, activity.RegisterOptions{Name: api.ActivityFetchMetric})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		c := string(req.Content)
		return api.Artifact{Name: req.Name, Size: int64(len(req.Content)), Content: &c}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
	registerStoreRecord(env)
}

// registerStoreRecord answers the StoreRecord every closing run calls.
func registerStoreRecord(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(context.Context, api.Record) (api.RecordRef, error) {
		return api.RecordRef{SHA256: strings.Repeat("0", 64), Size: 1}, nil
	}, activity.RegisterOptions{Name: api.ActivityStoreRecord})
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	// BuildDashboard's artifact runs on the run's sandbox, which a run claims a host for
	// first and releases at its end.
	env.RegisterActivityWithOptions(func(context.Context, api.ClaimHostRequest) (api.SandboxHost, error) {
		return api.SandboxHost{Queue: "nexo@host-a", Host: "a", HostTimeout: api.Duration(5 * time.Second)}, nil
	}, activity.RegisterOptions{Name: api.ActivityClaimSandboxHost})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
	return env
}

func queryRecord(t *testing.T, env *testsuite.TestWorkflowEnvironment) api.Record {
	t.Helper()
	v, err := env.QueryWorkflow(api.QueryRun)
	if err != nil {
		t.Fatalf("query %s: %v", api.QueryRun, err)
	}
	var rec api.Record
	if err := v.Get(&rec); err != nil {
		t.Fatalf("decode record: %v", err)
	}
	return rec
}

func countEvents(rec api.Record, typ string) int {
	n := 0
	for _, e := range rec.Events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func payload(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestEveryActivityHasAHeartbeatTimeout: each activity the demos schedule has a heartbeat
// timeout, so one in flight on a killed worker is retried within seconds instead of
// waiting out its start-to-close timeout (FetchMetric waited 5 minutes).
func TestEveryActivityHasAHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		workflow string
		in       any
	}{
		{DocumentApprovalName, DocumentApprovalInput{DocID: "1", Approved: true}},
		{BuildDashboardName, BuildDashboardInput{Title: "Q4"}},
	} {
		t.Run(tc.workflow, func(t *testing.T) {
			env := newEnv(t)
			(&fakeActs{}).register(env)
			seen := map[string]bool{}
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				seen[info.ActivityType.Name] = true
				if info.HeartbeatTimeout <= 0 || info.HeartbeatTimeout > 30*time.Second {
					t.Errorf("%s runs with heartbeat timeout %v, want one of at most 30s", info.ActivityType.Name, info.HeartbeatTimeout)
				}
			})
			env.ExecuteWorkflow(tc.workflow, payload(t, tc.in))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if len(seen) == 0 {
				t.Fatal("no activity ran")
			}
		})
	}
}

func TestDocumentApprovalSuspendsThenApproveCompletes(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	acts := &fakeActs{}
	acts.register(env)

	var suspended api.Record
	env.RegisterDelayedCallback(func() {
		suspended = queryRecord(t, env)
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true, "approver": "ada"}})
	}, time.Hour)
	env.ExecuteWorkflow(DocumentApprovalName, payload(t, DocumentApprovalInput{DocID: "7"}))

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow completed=%v err=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if suspended.Status != api.StatusSuspended {
		t.Errorf("status while waiting = %q, want suspended", suspended.Status)
	}
	si, ok := suspended.Suspend()
	if !ok || si.Reason != "awaiting approval" {
		t.Errorf("__suspend__ = %+v (present %v), want reason %q", si, ok, "awaiting approval")
	}
	if _, ok := suspended.State["fetch"]; !ok {
		t.Errorf("checkpoint fetch not stored while suspended: %v", suspended.State)
	}

	rec := queryRecord(t, env)
	if rec.Status != api.StatusDone {
		t.Errorf("final status = %q, want done", rec.Status)
	}
	for _, k := range api.ReservedStateKeys {
		if _, ok := rec.State[k]; ok {
			t.Errorf("reserved key %s still in state after done", k)
		}
	}
	for _, k := range []string{"fetch", "publish"} {
		if _, ok := rec.State[k]; !ok {
			t.Errorf("checkpoint %s missing from state after done", k)
		}
	}
	if acts.fetches != 1 || countEvents(rec, "fetching") != 1 {
		t.Errorf("fetch ran %d times, %d fetching events; want 1 and 1", acts.fetches, countEvents(rec, "fetching"))
	}
	var res DocumentApprovalResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.Published != "published/7" || res.Approver != "ada" {
		t.Errorf("result = %+v", res)
	}
	if string(rec.Payload) != `{"doc_id":"7","approved":false}` {
		t.Errorf("payload = %s", rec.Payload)
	}
	for i, e := range rec.Events {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
	}
}

func TestDocumentApprovalDenied(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	acts := &fakeActs{}
	acts.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": false, "reason": "typos", "approver": "bob"}})
	}, time.Minute)
	env.ExecuteWorkflow(DocumentApprovalName, payload(t, DocumentApprovalInput{DocID: "8"}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	var res DocumentApprovalResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if want := (DocumentApprovalResult{Done: true, Denied: true, Reason: "typos", Approver: "bob"}); res != want {
		t.Errorf("result after a denial = %+v, want %+v (the reason is what the user asks for)", res, want)
	}
	rec := queryRecord(t, env)
	if acts.publishes != 0 {
		t.Errorf("published %d times after a denial", acts.publishes)
	}
	if countEvents(rec, "rejected") != 1 || rec.Status != api.StatusDone {
		t.Errorf("status %s, rejected events %d", rec.Status, countEvents(rec, "rejected"))
	}
}

func TestCheckpointAllPartialFailureThenRerun(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	acts := &fakeActs{metricFails: map[string]int{"traffic": 1}}
	acts.register(env)
	env.ExecuteWorkflow(BuildDashboardName, json.RawMessage(`{"title":"Q1"}`))
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "traffic backend down") {
		t.Fatalf("err = %v, want the traffic failure", err)
	}
	rec := queryRecord(t, env)
	if rec.Status != api.StatusFailed {
		t.Errorf("status = %s, want failed", rec.Status)
	}
	if _, ok := rec.State["sales"]; !ok {
		t.Errorf("completed step sales not kept: %v", rec.State)
	}
	if _, ok := rec.State["traffic"]; ok {
		t.Errorf("failed step traffic stored")
	}
	if !strings.Contains(*rec.Error, "checkpoint traffic") {
		t.Errorf("error %q does not name the step", *rec.Error)
	}

	// Re-run seeded with the failed run's state: only traffic runs.
	env2 := newEnv(t)
	acts2 := &fakeActs{}
	acts2.register(env2)
	env2.ExecuteWorkflow(BuildDashboardName, json.RawMessage(`{"title":"Q1"}`), &api.RunOptions{Seed: rec.State, RerunOf: rec.ID})
	if env2.GetWorkflowError() != nil {
		t.Fatal(env2.GetWorkflowError())
	}
	if acts2.metricCalls["sales"] != 0 || acts2.metricCalls["traffic"] != 1 {
		t.Errorf("re-run calls = %v, want only traffic once", acts2.metricCalls)
	}
	rec2 := queryRecord(t, env2)
	if rec2.Status != api.StatusDone || countEvents(rec2, "checkpoint") != 1 || countEvents(rec2, "rerun") != 1 {
		t.Errorf("re-run status %s, checkpoint events %d, rerun events %d", rec2.Status, countEvents(rec2, "checkpoint"), countEvents(rec2, "rerun"))
	}
	if len(rec2.Artifacts) != 1 || rec2.Artifacts[0].Name != "dashboard.html" {
		t.Fatalf("artifacts = %+v", rec2.Artifacts)
	}
	if c := *rec2.Artifacts[0].Content; !strings.Contains(c, "<td>traffic</td>") || !strings.Contains(c, "<title>Q1</title>") {
		t.Errorf("dashboard = %q", c)
	}
}

func TestCheckpointAllEventsCarryNameOnly(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	(&fakeActs{}).register(env)
	env.ExecuteWorkflow(BuildDashboardName, nil)
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	rec := queryRecord(t, env)
	n := 0
	for _, e := range rec.Events {
		if e.Type == "checkpoint" {
			n++
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			if len(d) != 1 || (d["name"] != "sales" && d["name"] != "traffic") {
				t.Errorf("checkpoint event data = %s, want only the name", e.Data)
			}
		}
	}
	if n != 2 {
		t.Errorf("checkpoint events = %d, want 2", n)
	}
}

// TestDocumentApprovalIgnoresMisfitResumeInput: a raw nexo.resume whose input is not a
// decision (a misspelled field, a wrong type, no "approved") is recorded as ignored and
// the run keeps waiting; the real decision that follows is the one taken.
func TestDocumentApprovalIgnoresMisfitResumeInput(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	acts := &fakeActs{}
	acts.register(env)
	misfits := []map[string]any{
		{"aproved": true},
		{"approved": "true"},
		{"approved": 1},
		{},
	}
	for i, in := range misfits {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: in})
		}, time.Duration(i+1)*time.Minute)
	}
	var waiting api.Record
	env.RegisterDelayedCallback(func() {
		waiting = queryRecord(t, env)
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true, "approver": "ada"}})
	}, time.Hour)
	env.ExecuteWorkflow(DocumentApprovalName, payload(t, DocumentApprovalInput{DocID: "7"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if waiting.Status != api.StatusSuspended {
		t.Errorf("status after %d misfit signals = %s, want still suspended", len(misfits), waiting.Status)
	}
	if n := countEvents(waiting, "signal_ignored"); n != len(misfits) {
		t.Errorf("signal_ignored events = %d, want %d: %+v", n, len(misfits), waiting.Events)
	}
	var res DocumentApprovalResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Published != "published/7" || res.Approver != "ada" || acts.publishes != 1 {
		t.Errorf("result = %+v after %d publishes, want published by ada", res, acts.publishes)
	}
}

// TestFailureMessageIsBounded: a run that fails with an error quoting a huge input (an
// unknown metric named with 3 MB) fails with a bounded message: a failure message is
// never offloaded, and an oversized one would wedge the closing workflow task.
func TestFailureMessageIsBounded(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	// The run handles a 3 MB input in one workflow task, which under -race on a loaded
	// machine can take longer than the SDK's 1 s deadlock detector allows; this test is
	// about size.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	(&fakeActs{}).register(env)
	huge := strings.Repeat("m", 3<<20)
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (api.Metric, error) {
		return api.Metric{}, temporal.NewNonRetryableApplicationError("unknown metric "+name, api.ErrTypeNotFound, nil)
	}, activity.RegisterOptions{Name: api.ActivityFetchMetric})
	env.ExecuteWorkflow(BuildDashboardName, payload(t, BuildDashboardInput{Metrics: []string{huge}}))
	err := env.GetWorkflowError()
	if err == nil {
		t.Fatal("the run did not fail")
	}
	if size := len(err.Error()); size > api.MaxFailureMessage+1024 {
		t.Errorf("the run fails with a message of %d bytes, want at most about %d", size, api.MaxFailureMessage)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusFailed || rec.Error == nil || len(*rec.Error) > api.MaxFailureMessage+100 {
		t.Errorf("record: status %s, error of %d bytes", rec.Status, len(deref(rec.Error)))
	}
}

// TestActivitiesRefuseBadInput: the demo activities answer what a user can get wrong with
// a non-retryable error that names it, not a retry loop.
func TestActivitiesRefuseBadInput(t *testing.T) {
	t.Parallel()
	var a Activities
	_, err := a.FetchMetric(context.Background(), "revenue")
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != api.ErrTypeNotFound || !strings.Contains(app.Message(), `unknown metric "revenue" (known: [sales signups traffic])`) {
		t.Errorf("FetchMetric(revenue) = %v, want a non-retryable %s naming the known metrics", err, api.ErrTypeNotFound)
	}
	if m, err := a.FetchMetric(context.Background(), "sales"); err != nil || m.Name != "sales" {
		t.Errorf("FetchMetric(sales) = %+v, %v", m, err)
	}
	if _, err := a.FetchDocument(context.Background(), ""); !errors.As(err, &app) || app.Type() != api.ErrTypeBadInput {
		t.Errorf("FetchDocument(\"\") = %v, want a %s error", err, api.ErrTypeBadInput)
	}
	if _, err := a.PublishDocument(context.Background(), api.Document{}); !errors.As(err, &app) || app.Type() != api.ErrTypeBadInput {
		t.Errorf("PublishDocument(no id) = %v, want a %s error", err, api.ErrTypeBadInput)
	}
}
