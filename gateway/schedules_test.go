package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// scheduleRuns is a fakeRuns that also keeps schedules, in memory, the way runs.Client
// answers: a taken name is a ScheduleExistsError, an unknown one a ScheduleNotFoundError.
type scheduleRuns struct {
	*fakeRuns
	schedules map[string]api.Schedule
	created   []runs.ScheduleRequest
}

func newScheduleRuns() *scheduleRuns {
	next := t0.Add(time.Hour)
	return &scheduleRuns{fakeRuns: &fakeRuns{}, schedules: map[string]api.Schedule{
		"scribe-daily": {Name: "scribe-daily", Workflow: api.WorkflowAgentRun, Input: json.RawMessage(`{"agent":"scribe","prompt":"notes"}`),
			Spec: "cron 0 2 * * *", NextRun: &next, LastRun: &api.ScheduleRun{ID: "nexo-schedule:scribe-daily-x", Status: api.StatusDone, At: t0}},
		"billing-hourly": {Name: "billing-hourly", Workflow: api.WorkflowAgentRun, Input: json.RawMessage(`{"agent":"billing","prompt":"refunds"}`),
			Spec: "every 1h0m0s", NextRun: &next},
	}}
}

func (f *scheduleRuns) ListSchedules(context.Context) ([]api.Schedule, error) {
	var out []api.Schedule
	for _, name := range []string{"billing-hourly", "scribe-daily", "zz"} {
		if s, ok := f.schedules[name]; ok {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *scheduleRuns) Schedule(_ context.Context, name string) (api.Schedule, error) {
	s, ok := f.schedules[name]
	if !ok {
		return api.Schedule{}, &runs.ScheduleNotFoundError{Name: name}
	}
	return s, nil
}

func (f *scheduleRuns) CreateSchedule(_ context.Context, req runs.ScheduleRequest) (api.Schedule, error) {
	if _, ok := f.schedules[req.Name]; ok {
		return api.Schedule{}, &runs.ScheduleExistsError{Name: req.Name}
	}
	f.created = append(f.created, req)
	s := api.Schedule{Name: req.Name, Workflow: req.Workflow, Input: req.Payload, Spec: "every " + req.Every.String()}
	f.schedules[req.Name] = s
	return s, nil
}

func (f *scheduleRuns) PauseSchedule(_ context.Context, name, note string) error {
	s, ok := f.schedules[name]
	if !ok {
		return &runs.ScheduleNotFoundError{Name: name}
	}
	s.Paused, s.Note, s.NextRun = true, note, nil
	f.schedules[name] = s
	return nil
}

func (f *scheduleRuns) UnpauseSchedule(_ context.Context, name, note string) error {
	s, ok := f.schedules[name]
	if !ok {
		return &runs.ScheduleNotFoundError{Name: name}
	}
	s.Paused, s.Note = false, note
	f.schedules[name] = s
	return nil
}

func (f *scheduleRuns) DeleteSchedule(_ context.Context, name string) error {
	if _, ok := f.schedules[name]; !ok {
		return &runs.ScheduleNotFoundError{Name: name}
	}
	delete(f.schedules, name)
	return nil
}

func newScheduleServer(t *testing.T, f *scheduleRuns, tokens []Token) *Server {
	t.Helper()
	s, err := New(Options{Runs: f, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scheduleNames(t *testing.T, resp *http.Response) []string {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/schedules: %d %s", resp.StatusCode, body)
	}
	var l ScheduleList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var names []string
	for _, s := range l.Schedules {
		names = append(names, s.Name)
	}
	return names
}

// TestScheduleAPI: the schedules are listed, created, paused, unpaused and deleted over
// the API, with the starter's errors as HTTP statuses naming what is wrong.
func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	f := newScheduleRuns()
	s := newScheduleServer(t, f, nil)
	if got := scheduleNames(t, do(t, s, request{method: "GET", path: "/v1/schedules"})); strings.Join(got, ",") != "billing-hourly,scribe-daily" {
		t.Errorf("GET /v1/schedules = %v", got)
	}
	resp := do(t, s, request{method: "POST", path: "/v1/schedules", body: `{"name":"tick","workflow":"BuildDashboard","input":{"title":"T"},"every":"30s"}`})
	if body := readBody(t, resp); resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/schedules/tick" {
		t.Fatalf("POST /v1/schedules: %d %s (Location %q)", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	if req := f.created[0]; req.Every != 30*time.Second || req.Workflow != "BuildDashboard" || string(req.Payload) != `{"title":"T"}` {
		t.Errorf("created %+v", req)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/schedules", body: `{"name":"tick","workflow":"BuildDashboard","every":"30s"}`}),
		http.StatusConflict, "schedule tick already exists")
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/schedules", body: `{"name":"t2","workflow":"BuildDashboard","every":"soon"}`}),
		http.StatusBadRequest, `every "soon": want a duration`)
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/schedules", body: `{"name":"t2","workflow":"BuildDashboard","evrey":"1h"}`}),
		http.StatusBadRequest, `unknown field "evrey"`)

	resp = do(t, s, request{method: "POST", path: "/v1/schedules/tick/pause", body: `{"note":"until Monday"}`})
	var got api.Schedule
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || !got.Paused || got.Note != "until Monday" {
		t.Errorf("pause: %d %s", resp.StatusCode, body)
	}
	resp = do(t, s, request{method: "POST", path: "/v1/schedules/tick/unpause"})
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.Paused {
		t.Errorf("unpause with no body: %d %s", resp.StatusCode, body)
	}
	if resp := do(t, s, request{method: "DELETE", path: "/v1/schedules/tick"}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %d %s", resp.StatusCode, readBody(t, resp))
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/schedules/tick/pause"}), http.StatusNotFound, "no schedule tick")
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/schedules/tick"}), http.StatusNotFound, "no schedule tick")
	resp = do(t, s, request{method: "PUT", path: "/v1/schedules/tick"})
	wantProblem(t, resp, http.StatusMethodNotAllowed, "use GET or DELETE")

	// A client without schedules says so instead of a 500.
	plain := newServer(t, &fakeRuns{}, Options{})
	wantProblem(t, do(t, plain, request{method: "GET", path: "/v1/schedules"}), http.StatusNotImplemented, "no schedules")
}

// TestScheduleAPILimitedTokens: a limited token sees and changes only the schedules whose
// runs it could see; any other answers as an unknown name does, and creating one outside
// its limits is 403 naming them.
func TestScheduleAPILimitedTokens(t *testing.T) {
	t.Parallel()
	f := newScheduleRuns()
	s := newScheduleServer(t, f, limitTokens)
	if got := scheduleNames(t, do(t, s, request{method: "GET", path: "/v1/schedules", header: bearer(teamSecret)})); strings.Join(got, ",") != "scribe-daily" {
		t.Errorf("team lists %v, want scribe-daily alone", got)
	}
	if got := scheduleNames(t, do(t, s, request{method: "GET", path: "/v1/schedules", header: bearer(adminSecret)})); len(got) != 2 {
		t.Errorf("admin lists %v, want both", got)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/schedules/billing-hourly/pause", header: bearer(teamSecret)}),
		http.StatusNotFound, "no schedule billing-hourly")
	wantProblem(t, do(t, s, request{method: "DELETE", path: "/v1/schedules/billing-hourly", header: bearer(teamSecret)}),
		http.StatusNotFound, "no schedule billing-hourly")
	if f.schedules["billing-hourly"].Paused {
		t.Errorf("team paused billing's schedule")
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/schedules", header: bearer(teamSecret),
		body: `{"name":"b2","workflow":"AgentRun","input":{"agent":"billing","prompt":"x"},"every":"1h"}`}),
		http.StatusForbidden, "token team may not start a run of workflow AgentRun of agent billing")
	if len(f.created) != 0 {
		t.Errorf("created %v", f.created)
	}
	resp := do(t, s, request{method: "POST", path: "/v1/schedules/scribe-daily/pause", header: bearer(teamSecret)})
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK {
		t.Errorf("team pauses its own schedule: %d %s", resp.StatusCode, body)
	}
}

// TestSchedulesPage: the page lists the schedules with a link to each last run, text
// escaped.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	f := newScheduleRuns()
	sch := f.schedules["billing-hourly"]
	sch.Paused, sch.Note, sch.NextRun = true, `<script>alert(1)</script>`, nil
	f.schedules["billing-hourly"] = sch
	s := newScheduleServer(t, f, nil)
	resp := do(t, s, request{method: "GET", path: "/schedules"})
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /schedules: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{"scribe-daily", "cron 0 2 * * *", `href="/runs/nexo-schedule:scribe-daily-x"`, "every 1h0m0s", "&lt;script&gt;alert(1)&lt;/script&gt;", `href="/schedules"`} {
		if !strings.Contains(body, want) {
			t.Errorf("schedules page has no %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>alert(1)") {
		t.Errorf("schedules page does not escape the note:\n%s", body)
	}
}
