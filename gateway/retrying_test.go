package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// retryingRun is an agent run whose model call's attempt is retried after a failure that
// carries markup.
func retryingRun(attempt int32) api.Record {
	next := time.Now().Add(16 * time.Second)
	return api.Record{
		ID: "run-retry", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning,
		Payload: json.RawMessage(`{"agent":"scribe","prompt":"Write a note."}`),
		Events:  []api.Event{{Seq: 1, Type: "agent_start", Data: json.RawMessage(`{"agent":"scribe"}`), At: t0}},
		State:   map[string]json.RawMessage{}, Artifacts: []api.Artifact{}, CreatedAt: t0, UpdatedAt: t0,
		Retrying: []api.PendingActivity{{Name: "model call", Activity: api.ActivityCompleteChat, ActivityID: "7",
			Attempt: attempt, LastFailure: "connect: connection refused <b>x</b>", NextAttemptAt: &next}},
	}
}

// TestRunPageSaysWhatIsRetrying: the run page of a run whose model call is retried says
// so under its status, as text; a run retrying nothing shows no such list.
func TestRunPageSaysWhatIsRetrying(t *testing.T) {
	rec := retryingRun(5)
	quiet := retryingRun(1)
	quiet.ID, quiet.Retrying = "run-quiet", nil
	s := newServer(t, &fakeRuns{get: getRecords(rec, quiet)}, Options{})
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/run-retry"}))
	want := `<ul class="retrying" id="retrying"><li>model call retrying (attempt 5, next in 16 s): connect: connection refused &lt;b&gt;x&lt;/b&gt;</li></ul>`
	if !strings.Contains(page, want) && !strings.Contains(page, strings.Replace(want, "16 s", "15 s", 1)) {
		t.Errorf("the page lacks %s\n%s", want, page)
	}
	page = readBody(t, do(t, s, request{method: "GET", path: "/runs/run-quiet"}))
	if !strings.Contains(page, `<ul class="retrying" id="retrying" hidden></ul>`) {
		t.Errorf("a run retrying nothing shows a retry list:\n%s", page)
	}
}

// TestRunResourceSaysWhatIsRetrying: GET /v1/runs/{id} carries the retried activities as
// the record's "retrying".
func TestRunResourceSaysWhatIsRetrying(t *testing.T) {
	s := newServer(t, &fakeRuns{get: getRecords(retryingRun(5))}, Options{})
	body := readBody(t, do(t, s, request{method: "GET", path: "/v1/runs/run-retry"}))
	var got struct {
		Retrying []map[string]any `json:"retrying"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Retrying) != 1 || got.Retrying[0]["name"] != "model call" || got.Retrying[0]["attempt"] != 5.0 ||
		got.Retrying[0]["last_failure"] != "connect: connection refused <b>x</b>" || got.Retrying[0]["next_attempt_at"] == nil {
		t.Errorf("retrying = %v\n%s", got.Retrying, body)
	}
}

// TestEventStreamSaysWhatIsRetrying: the run's event stream sends a retrying event when
// the retried attempt changes (not when the same attempt comes again), an empty one when
// the retries end, and none for a run that never retried.
func TestEventStreamSaysWhatIsRetrying(t *testing.T) {
	quiet := retryingRun(1)
	quiet.Retrying = nil
	done := quiet
	done.Status = api.StatusDone
	steps := []api.Record{quiet, retryingRun(2), retryingRun(2), retryingRun(3), quiet, done}
	f := &fakeRuns{follow: func(ctx context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
		for _, rec := range steps {
			if fn(rec) {
				return rec, nil
			}
		}
		return done, nil
	}}
	srv := httptest.NewServer(newServer(t, f, Options{}))
	defer srv.Close()
	_, sse := openStream(t, srv.URL+"/v1/runs/run-retry/events", nil)
	var got []string
	for {
		m, err := sse.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch m.event {
		case "retrying":
			var r StreamRetrying
			if err := json.Unmarshal([]byte(m.data), &r); err != nil || r.ID != "run-retry" || r.Retrying == nil {
				t.Fatalf("retrying data %s", m.data)
			}
			attempts := "none"
			if len(r.Retrying) > 0 {
				attempts = itoa(int64(r.Retrying[0].Attempt))
			}
			got = append(got, "retrying "+attempts)
		default:
			got = append(got, m.event+"#"+m.id)
		}
	}
	want := "#1 status# retrying 2 retrying 3 retrying none status# end#"
	if strings.Join(got, " ") != want {
		t.Errorf("stream %q, want %q", strings.Join(got, " "), want)
	}
}
