package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// schedules is `starter schedule list --json`, by name.
func (p *platform) schedules() map[string]api.Schedule {
	p.t.Helper()
	var list []api.Schedule
	out := p.ok("schedule", "list", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		p.t.Fatalf("decode schedule list --json: %v\n%s", err, out)
	}
	m := map[string]api.Schedule{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// waitSchedule polls `schedule list --json` until cond holds of the named schedule (ok is
// false while it is not listed), and returns it.
func (p *platform) waitSchedule(name, what string, cond func(s api.Schedule, ok bool) bool) api.Schedule {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, ok := p.schedules()[name]
		if cond(s, ok) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("schedule %s: not %s after 60s: %+v (listed: %v)\nworker:\n%s", name, what, s, ok, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSchedulesAsWritten runs the Schedules block (docs/cli.md) as printed, then what it
// promises: a schedule's runs are normal runs (listed, shown, done, in the API and on the
// page), a paused schedule has no next run and starts none, a start due while the last run
// is open is skipped, a deleted schedule is gone and its runs stay, and bad input is
// refused naming what is wrong, with the exit codes of `starter run`.
func TestSchedulesAsWritten(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Match: "Say hi.", Content: "Hi from the schedule."})
	p := newPlatform(t)
	p.writeConfig(historyAgentConfig(model.Start(t)))
	p.writeWorkspace(map[string]string{"brief.md": "# Brief\n"})
	p.start()

	cmds := readmeBlockCommands(t, "bin/starter schedule create pulse")
	if len(cmds) < 5 {
		t.Fatalf("README Schedules block has %d starter commands, want the create, list, pause, unpause and delete it shows", len(cmds))
	}
	for _, c := range cmds {
		if len(c) > 1 && c[0] == "schedule" && c[1] == "list" {
			// Visibility may lag a create by a moment: the same command, until it shows both.
			deadline := time.Now().Add(30 * time.Second)
			for out := p.ok(c...); !strings.Contains(out, "pulse") || !strings.Contains(out, "nightly"); out = p.ok(c...) {
				if time.Now().After(deadline) {
					t.Fatalf("starter %s after 30s:\n%s", strings.Join(c, " "), out)
				}
				time.Sleep(100 * time.Millisecond)
			}
			out := p.ok(c...)
			for _, want := range []string{"NAME", "NEXT RUN", "LAST RUN", "PAUSED", "every 10s", "cron 0 2 * * *"} {
				if !strings.Contains(out, want) {
					t.Errorf("starter %s: no %q in\n%s", strings.Join(c, " "), want, out)
				}
			}
			continue
		}
		out := p.ok(c...)
		switch {
		case c[1] == "create" && !strings.Contains(out, "schedule "+c[2]+" created: BuildDashboard run "):
			t.Errorf("starter %s printed %q", strings.Join(c, " "), out)
		case c[1] == "pause":
			if s := p.schedules()["pulse"]; !s.Paused || s.NextRun != nil || s.Note != "until the figures are fixed" {
				t.Errorf("after %s: %+v, want pulse paused with its note and no next run", strings.Join(c, " "), s)
			}
		case c[1] == "unpause":
			if s := p.schedules()["pulse"]; s.Paused || s.NextRun == nil {
				t.Errorf("after %s: %+v, want pulse unpaused with a next run", strings.Join(c, " "), s)
			}
		case c[1] == "delete":
			p.waitSchedule(c[2], "deleted", func(_ api.Schedule, ok bool) bool { return !ok })
			if r := p.starter("schedule", "pause", c[2]); r.code != 1 || !strings.Contains(r.stderr, "no schedule "+c[2]) {
				t.Errorf("pause of the deleted schedule %s: exit %d, %q; want exit 1 naming it", c[2], r.code, r.stderr)
			}
		}
	}

	// A schedule's run is a normal run: listed, shown, done with the schedule's input.
	created := time.Now()
	p.ok("schedule", "create", "tick", "--workflow", "BuildDashboard", "--input", `{"title":"Tick"}`, "--every", "1s")
	s := p.waitSchedule("tick", "with a first run done", func(s api.Schedule, ok bool) bool {
		return ok && s.LastRun != nil && s.LastRun.Status == api.StatusDone
	})
	t.Logf("schedule tick (every 1s): its first run started %v and was seen done %v after the create command began",
		s.LastRun.At.Sub(created).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	var in bytes.Buffer
	_ = json.Compact(&in, s.Input)
	if s.Spec != "every 1s" || s.Workflow != "BuildDashboard" || in.String() != `{"title":"Tick"}` || !strings.HasPrefix(s.LastRun.ID, "nexo-schedule:tick-") {
		t.Errorf("schedule tick = %+v (input %s, last run %s), want BuildDashboard every 1s with its input, runs named nexo-schedule:tick-<time>", s, in.String(), s.LastRun.ID)
	}
	rec := p.record(s.LastRun.ID)
	if rec.Status != api.StatusDone || rec.Workflow != "BuildDashboard" || !strings.Contains(string(rec.Result), "dashboard.html") || !strings.Contains(string(rec.Payload), "Tick") {
		t.Errorf("show %s: %s %s, payload %s, result %s; want a done BuildDashboard of the schedule's input", s.LastRun.ID, rec.Workflow, rec.Status, rec.Payload, rec.Result)
	}
	if out := p.ok("list", "--workflow", "BuildDashboard"); !strings.Contains(out, s.LastRun.ID) {
		t.Errorf("list --workflow BuildDashboard does not show the scheduled run %s:\n%s", s.LastRun.ID, out)
	}

	// The HTTP API and the page list it too.
	gw := gateway(t, p)
	var apiList struct{ Schedules []api.Schedule }
	if err := json.Unmarshal(gw.must(http.StatusOK, "GET", "/v1/schedules", nil), &apiList); err != nil || !slices.ContainsFunc(apiList.Schedules, func(x api.Schedule) bool { return x.Name == "tick" && x.Spec == "every 1s" }) {
		t.Errorf("GET /v1/schedules = %+v (%v), want tick every 1s", apiList, err)
	}
	if page := string(gw.must(http.StatusOK, "GET", "/schedules", nil)); !strings.Contains(page, "tick") || !strings.Contains(page, "every 1s") {
		t.Errorf("the schedules page does not list tick:\n%s", page)
	}
	var made api.Schedule
	if err := json.Unmarshal(gw.must(http.StatusCreated, "POST", "/v1/schedules",
		map[string]any{"name": "api-made", "workflow": "BuildDashboard", "cron": "30 3 * * 1"}), &made); err != nil || made.Spec != "cron 30 3 * * 1" || made.NextRun == nil {
		t.Errorf("POST /v1/schedules = %+v (%v), want cron 30 3 * * 1 with its next run", made, err)
	}
	if status, body := gw.call("POST", "/v1/schedules", map[string]any{"name": "api-bad", "workflow": "BuildDashboard", "cron": "61 * * * *"}); status != http.StatusBadRequest || !strings.Contains(string(body), `cron spec \"61 * * * *\"`) {
		t.Errorf("POST /v1/schedules with a bad cron: %d %s, want 400 naming the cron spec", status, body)
	}
	gw.must(http.StatusNoContent, "DELETE", "/v1/schedules/api-made", nil)
	if status, body := gw.call("POST", "/v1/schedules/api-made/pause", nil); status != http.StatusNotFound {
		t.Errorf("pause of the deleted api-made: %d %s, want 404", status, body)
	}

	// Paused, it has no next run and starts none, past the time its next one was due.
	before := p.schedules()["tick"]
	p.ok("schedule", "pause", "tick")
	paused := p.schedules()["tick"]
	if !paused.Paused || paused.NextRun != nil {
		t.Fatalf("after pause: %+v, want paused with no next run", paused)
	}
	due := time.Now().Add(time.Second)
	if before.NextRun != nil {
		due = *before.NextRun
	}
	for until := due.Add(2 * time.Second); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
		if n := p.schedules()["tick"].Runs; n != paused.Runs {
			t.Fatalf("paused schedule tick started a run: %d runs, %d when paused", n, paused.Runs)
		}
	}
	p.ok("schedule", "delete", "tick")
	p.waitSchedule("tick", "deleted", func(_ api.Schedule, ok bool) bool { return !ok })
	if rec := p.record(s.LastRun.ID); rec.Status != api.StatusDone {
		t.Errorf("the run of the deleted schedule is %s, want it kept done", rec.Status)
	}

	// Overlap policy skip: while its first run waits for an approval, the starts due are
	// skipped, not queued beside it; approved, the next due start runs.
	p.ok("schedule", "create", "review", "--workflow", "DocumentApproval", "--input", `{"doc_id":"42"}`, "--every", "1s")
	rv := p.waitSchedule("review", "skipping a start", func(s api.Schedule, ok bool) bool { return ok && s.Skipped >= 1 })
	if rv.Runs != 1 || rv.LastRun == nil {
		t.Fatalf("schedule review = %+v, want one run and the starts due since skipped", rv)
	}
	p.waitStatus(rv.LastRun.ID, api.StatusSuspended)
	p.ok("approve", rv.LastRun.ID)
	p.waitSchedule("review", "starting a second run", func(s api.Schedule, ok bool) bool { return ok && s.Runs >= 2 })
	p.ok("schedule", "delete", "review")

	// --agent: AgentRun runs of a configured agent, as `starter agent` starts them.
	p.ok("schedule", "create", "hello", "--agent", "scribe", "--prompt", "Say hi.", "--every", "1s")
	h := p.waitSchedule("hello", "with a first run done", func(s api.Schedule, ok bool) bool {
		return ok && s.LastRun != nil && s.LastRun.Status == api.StatusDone
	})
	if rec := p.record(h.LastRun.ID); h.Workflow != api.WorkflowAgentRun || !strings.Contains(string(rec.Result), "Hi from the schedule.") {
		t.Errorf("schedule hello: %s run %s, result %s; want an AgentRun of scribe with the model's reply", h.Workflow, h.LastRun.ID, rec.Result)
	}
	p.ok("schedule", "delete", "hello")

	// Bad input, named; usage mistakes exit 2, what the platform refuses 1 (as run does).
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"create", "x", "--workflow", "BuildDashboard"}, 2, "wants exactly one of --every DURATION or --cron SPEC"},
		{[]string{"create", "x", "--workflow", "BuildDashboard", "--every", "1h", "--cron", "0 2 * * *"}, 2, "wants exactly one of --every DURATION or --cron SPEC"},
		{[]string{"create", "x", "--workflow", "BuildDashboard", "--cron", "61 * * * *"}, 2, `cron spec "61 * * * *"`},
		{[]string{"create", "x", "--workflow", "BuildDashboard", "--cron", "every day"}, 2, `cron spec "every day"`},
		{[]string{"create", "x", "--workflow", "BuildDashboard", "--every", "0.5s"}, 2, "--every 500ms: want an interval of at least 1s"},
		{[]string{"create", "x y", "--workflow", "BuildDashboard", "--every", "1h"}, 2, `schedule name "x y"`},
		{[]string{"create", "x", "--workflow", "BuildDashbord", "--every", "1h"}, 1, `offers workflow type "BuildDashbord"`},
		{[]string{"create", "x", "--workflow", "BuildDashboard", "--input", `{"titel":"x"}`, "--every", "1h"}, 2, `unknown field "titel" (did you mean "title"?)`},
		{[]string{"create", "pulse", "--workflow", "BuildDashboard", "--every", "1h"}, 1, "schedule pulse already exists"},
		{[]string{"create", "x", "--agent", "scrib", "--prompt", "hi", "--every", "1h"}, 1, `offers agent "scrib" (offered: scribe); did you mean "scribe"?`},
		{[]string{"pause", "nope"}, 1, "no schedule nope"},
		{[]string{"unpause", "nope"}, 1, "no schedule nope"},
		{[]string{"delete", "nope"}, 1, "no schedule nope"},
	} {
		r := p.starter(append([]string{"schedule"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("starter schedule %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.want)
		}
	}
	if _, ok := p.schedules()["x"]; ok {
		t.Errorf("a refused create left schedule x behind")
	}
}
