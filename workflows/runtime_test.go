package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// gateName is a workflow of the shape the runtime tests need, as a user would write it: a
// checkpoint "fetch", a human gate (Suspend), then a checkpoint "publish" once approved.
const gateName = "Gate"

type gateInput struct {
	ID string `json:"id"`
}

func gate(ctx workflow.Context, in gateInput) (string, error) {
	if _, err := Checkpoint[string](ctx, "fetch", "Fetch", in.ID); err != nil {
		return "", err
	}
	input, err := Suspend(ctx, "awaiting approval", "")
	if err != nil {
		return "", err
	}
	if ok, _ := input["approved"].(bool); !ok {
		return "", nil
	}
	return Checkpoint[string](ctx, "publish", "Publish", in.ID)
}

// registerGate registers Gate and its two activities.
func registerGate(env *testsuite.TestWorkflowEnvironment) {
	Register(env, gateName, gate, Options{})
	env.RegisterActivityWithOptions(func(_ context.Context, id string) (string, error) { return "doc " + id, nil },
		activity.RegisterOptions{Name: "Fetch"})
	env.RegisterActivityWithOptions(func(_ context.Context, id string) (string, error) { return "published/" + id, nil },
		activity.RegisterOptions{Name: "Publish"})
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

func TestCheckpointRunsOnce(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

func TestIllFittingSignalsAreRecordedAndIgnored(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
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
	t.Parallel()
	env := newEnv(t)
	registerGate(env)
	var start time.Time
	var mid api.Record
	env.RegisterDelayedCallback(func() {
		start = env.Now()
		at := start.Add(2 * time.Hour)
		env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}, At: &at})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { mid = queryRecord(t, env) }, time.Hour)
	env.ExecuteWorkflow(gateName, json.RawMessage(`{"id":"9"}`))
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
	t.Parallel()
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
		if _, err := Artifact(ctx, "answer.md", ArtifactSource{Blob: strings.Repeat("ab", 32)}); err != nil {
			return 0, err
		}
		if _, err := Artifact(ctx, "../evil", ArtifactSource{Content: []byte("x")}); err == nil {
			return 0, errors.New("a path-like artifact name was accepted")
		}
		if _, err := Artifact(ctx, "nothing", ArtifactSource{}); err == nil || !strings.Contains(err.Error(), "needs Content, Template, Path or Blob") {
			return 0, errors.New("an artifact without a body was accepted")
		}
		return 0, nil
	}, Options{})
	env.ExecuteWorkflow("Arts", nil)
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if len(sent) != 3 {
		t.Fatalf("WriteArtifact calls = %d, want 3", len(sent))
	}
	if sent[2].Blob != strings.Repeat("ab", 32) || sent[2].Content != nil {
		t.Errorf("blob artifact sent %+v, want the blob's name and no bytes", sent[2])
	}
	if got := string(sent[0].Content); got != "<p>&lt;script&gt;x&lt;/script&gt;</p>" {
		t.Errorf("html artifact = %q, want escaped data", got)
	}
	if got := string(sent[1].Content); got != "Hello Ada!" {
		t.Errorf("text artifact = %q", got)
	}
}

func TestCancelWhileSuspended(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	registerGate(env)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(gateName, json.RawMessage(`{"id":"1"}`))
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusCanceled {
		t.Errorf("status = %s, want canceled", rec.Status)
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
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
