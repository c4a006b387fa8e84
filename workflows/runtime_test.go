package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// fakeActs are the example activities with counters, registered by their api names.
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
	completed := make(chan struct{}, 16)
	env.RegisterActivityWithOptions(func(_ context.Context, name string) (api.Metric, error) {
		f.mu.Lock()
		f.metricCalls[name]++
		failing := f.metricFails[name] > 0
		f.mu.Unlock()
		if failing {
			// Fail only after another step completed, so "completed steps stay" is what
			// the test sees rather than a race with the cancellation of the others.
			select {
			case <-completed:
				time.Sleep(20 * time.Millisecond)
			case <-time.After(5 * time.Second):
			}
			f.mu.Lock()
			f.metricFails[name]--
			f.mu.Unlock()
			return api.Metric{}, temporal.NewNonRetryableApplicationError(name+" backend down", "Boom", nil)
		}
		defer func() { completed <- struct{}{} }()
		return api.Metric{Name: name, Value: float64(len(name))}, nil
	}, activity.RegisterOptions{Name: api.ActivityFetchMetric})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		c := string(req.Content)
		return api.Artifact{Name: req.Name, Size: int64(len(req.Content)), Content: &c}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterAll(env)
	registerHostFakes(env) // every sandbox run claims a host first (hostq.go)
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

func TestDocumentApprovalSuspendsThenApproveCompletes(t *testing.T) {
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
	env := newEnv(t)
	acts := &fakeActs{}
	acts.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": false, "reason": "typos"}})
	}, time.Minute)
	env.ExecuteWorkflow(DocumentApprovalName, payload(t, DocumentApprovalInput{DocID: "8"}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	rec := queryRecord(t, env)
	if acts.publishes != 0 {
		t.Errorf("published %d times after a denial", acts.publishes)
	}
	if countEvents(rec, "rejected") != 1 || rec.Status != api.StatusDone {
		t.Errorf("status %s, rejected events %d", rec.Status, countEvents(rec, "rejected"))
	}
}

func TestCheckpointRunsOnce(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.RegisterActivityWithOptions(func(context.Context) (map[string]any, error) {
		calls++
		return map[string]any{"id": 7, "tags": []string{"a", "b"}}, nil
	}, activity.RegisterOptions{Name: "Answer"})
	wf := func(ctx workflow.Context, _ struct{}) ([]map[string]any, error) {
		a, err := Checkpoint[map[string]any](ctx, "step", "Answer")
		if err != nil {
			return nil, err
		}
		b, err := Checkpoint[map[string]any](ctx, "step", "Answer")
		return []map[string]any{a, b}, err
	}
	Register(env, "Twice", wf, Options{})
	env.ExecuteWorkflow("Twice", json.RawMessage(`{}`))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	var got []map[string]any
	_ = env.GetWorkflowResult(&got)
	if calls != 1 {
		t.Errorf("activity ran %d times, want 1", calls)
	}
	if len(got) != 2 || got[0]["id"] != float64(7) || got[1]["id"] != float64(7) {
		t.Errorf("results = %v, want both id 7", got)
	}
	rec := queryRecord(t, env)
	if string(rec.State["step"]) != `{"id":7,"tags":["a","b"]}` {
		t.Errorf("state[step] = %s", rec.State["step"])
	}
	if countEvents(rec, "checkpoint") != 1 {
		t.Errorf("checkpoint events = %d, want 1", countEvents(rec, "checkpoint"))
	}
}

func TestReservedCheckpointNameFailsRun(t *testing.T) {
	for _, name := range api.ReservedStateKeys {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			ran := false
			env.RegisterActivityWithOptions(func(context.Context) (int, error) { ran = true; return 1, nil }, activity.RegisterOptions{Name: "One"})
			Register(env, "Reserved", func(ctx workflow.Context, _ struct{}) (int, error) {
				return Checkpoint[int](ctx, name, "One")
			}, Options{})
			env.ExecuteWorkflow("Reserved", nil)
			err := env.GetWorkflowError()
			if err == nil || !strings.Contains(err.Error(), "reserved") {
				t.Fatalf("err = %v, want a reserved-name error", err)
			}
			rec := queryRecord(t, env)
			if rec.Status != api.StatusFailed || rec.Error == nil || !strings.Contains(*rec.Error, "reserved") {
				t.Errorf("status %s error %v", rec.Status, rec.Error)
			}
			if ran {
				t.Error("activity ran despite the reserved name")
			}
		})
	}
}

func TestCheckpointAllPartialFailureThenRerun(t *testing.T) {
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

func TestIllFittingSignalsAreRecordedAndIgnored(t *testing.T) {
	env := newEnv(t)
	acts := &fakeActs{}
	acts.register(env)
	wf := func(ctx workflow.Context, _ struct{}) (map[string]any, error) {
		// Let an early signal arrive while the run is not suspended.
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return nil, err
		}
		return Suspend(ctx, "needs a key", "k-1")
	}
	Register(env, "Keyed", wf, Options{})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"early": true}})
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"wrong": true}, ResumeKey: "nope"})
		env.SignalWorkflow(api.SignalResume, map[string]any{"inptu": map[string]any{}})
		env.SignalWorkflow(api.SignalResume, "not an object")
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "c1", Approved: true})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"right": true}, ResumeKey: "k-1"})
	}, 3*time.Minute)
	env.ExecuteWorkflow("Keyed", nil)
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	var res map[string]any
	_ = env.GetWorkflowResult(&res)
	if res["right"] != true || len(res) != 1 {
		t.Errorf("resume input = %v, want only the fitting signal's", res)
	}
	rec := queryRecord(t, env)
	var reasons []string
	for _, e := range rec.Events {
		if e.Type == "signal_ignored" {
			var d map[string]string
			_ = json.Unmarshal(e.Data, &d)
			reasons = append(reasons, d["signal"]+": "+d["reason"])
		}
	}
	want := []string{"not suspended (running)", "does not match", "unknown field", "malformed signal", "no tool call is waiting"}
	if len(reasons) != len(want) {
		t.Fatalf("ignored = %q, want %d entries", reasons, len(want))
	}
	for i, w := range want {
		if !strings.Contains(reasons[i], w) {
			t.Errorf("ignored[%d] = %q, want it to mention %q", i, reasons[i], w)
		}
	}
}

func TestScheduledResumeUsesATimer(t *testing.T) {
	env := newEnv(t)
	(&fakeActs{}).register(env)
	var start time.Time
	var mid api.Record
	env.RegisterDelayedCallback(func() {
		start = env.Now()
		at := start.Add(2 * time.Hour)
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}, At: &at})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { mid = queryRecord(t, env) }, time.Hour)
	env.ExecuteWorkflow(DocumentApprovalName, json.RawMessage(`{"doc_id":"9"}`))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if mid.Status != api.StatusSuspended {
		t.Errorf("status one hour into a two-hour schedule = %s, want suspended", mid.Status)
	}
	if si, _ := mid.Suspend(); si.ResumeAt == nil {
		t.Error("__suspend__.resume_at not recorded")
	}
	if d := env.Now().Sub(start); d < 2*time.Hour {
		t.Errorf("resumed after %v, want at least 2h", d)
	}
}

func TestArtifactEncodingAndNames(t *testing.T) {
	env := newEnv(t)
	var sent []api.WriteArtifactRequest
	env.RegisterActivityWithOptions(func(_ context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
		sent = append(sent, req)
		return api.Artifact{Name: req.Name, Size: int64(len(req.Content))}, nil
	}, activity.RegisterOptions{Name: api.ActivityWriteArtifact})
	Register(env, "Arts", func(ctx workflow.Context, _ struct{}) (int, error) {
		if _, err := Artifact(ctx, "page.html", ArtifactSource{Template: "<p>{{.}}</p>", Data: "<script>x</script>"}); err != nil {
			return 0, err
		}
		if _, err := Artifact(ctx, "note.txt", ArtifactSource{Template: "Hello {{.Name}}!", Data: map[string]string{"Name": "Ada"}}); err != nil {
			return 0, err
		}
		if _, err := Artifact(ctx, "../evil", ArtifactSource{Content: []byte("x")}); err == nil {
			return 0, errors.New("a path-like artifact name was accepted")
		}
		if _, err := Artifact(ctx, "nothing", ArtifactSource{}); err == nil || !strings.Contains(err.Error(), "needs Content, Template or Path") {
			return 0, errors.New("an artifact without a body was accepted")
		}
		return 0, nil
	}, Options{})
	env.ExecuteWorkflow("Arts", nil)
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if len(sent) != 2 {
		t.Fatalf("WriteArtifact calls = %d, want 2", len(sent))
	}
	if got := string(sent[0].Content); got != "<p>&lt;script&gt;x&lt;/script&gt;</p>" {
		t.Errorf("html artifact = %q, want escaped data", got)
	}
	if got := string(sent[1].Content); got != "Hello Ada!" {
		t.Errorf("text artifact = %q", got)
	}
}

func TestCancelWhileSuspended(t *testing.T) {
	env := newEnv(t)
	(&fakeActs{}).register(env)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(DocumentApprovalName, json.RawMessage(`{"doc_id":"1"}`))
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusCanceled {
		t.Errorf("status = %s, want canceled", rec.Status)
	}
}

func TestSanitize(t *testing.T) {
	big := strings.Repeat("x", MaxEventString+1)
	for _, tc := range []struct{ name, in, want string }{
		{"short strings pass", `{"a":"hi","n":3}`, `{"a":"hi","n":3}`},
		{"long string omitted", `{"a":"` + big + `"}`, `{"a":"[omitted]"}`},
		{"exactly 8KB kept", `{"a":"` + big[:MaxEventString] + `"}`, `{"a":"` + big[:MaxEventString] + `"}`},
		{"data uri omitted", `{"img":"data:image/png;base64,AAAA"}`, `{"img":"[omitted]"}`},
		{"nested", `{"l":[{"b":"data:text/plain;base64,eA=="},"ok"]}`, `{"l":[{"b":"[omitted]"},"ok"]}`},
		{"plain text passes", `"` + big + `"`, `"` + big + `"`},
		{"data word in text kept", `{"a":"data: not a blob"}`, `{"a":"data: not a blob"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(SanitizeJSON(json.RawMessage(tc.in))); got != tc.want {
				if len(got) > 80 {
					got = got[:80] + "..."
				}
				t.Errorf("got %s", got)
			}
		})
	}
}

// TestDocumentApprovalIgnoresMisfitResumeInput: a raw nexo.resume whose input is not a
// decision (a misspelled field, a wrong type, no "approved") is recorded as ignored and
// the run keeps waiting; the real decision that follows is the one taken.
func TestDocumentApprovalIgnoresMisfitResumeInput(t *testing.T) {
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
