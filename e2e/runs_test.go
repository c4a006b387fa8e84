package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// TestQuickstart is the README's quickstart: run DocumentApproval, see it suspended in
// list, approve it, read show and logs.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()

	r := p.starter("run", "DocumentApproval", "--input", `{"doc_id":"42"}`, "--wait")
	if r.code != 0 {
		t.Fatalf("run --wait: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "is suspended: awaiting approval") || !strings.Contains(r.stderr, "starter approve") {
		t.Fatalf("run --wait output does not say it is suspended and how to continue:\n%s", r.stderr)
	}
	// Issue 29 item 9: stdout is the run id alone, so ID=$(starter run ... --wait) works.
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "run "+lines[0]+" is suspended") {
		t.Fatalf("run --wait stdout = %q, want the run id alone", r.stdout)
	}
	if !strings.Contains(r.stderr, "fetching") {
		t.Errorf("run --wait showed no progress (events) on stderr:\n%s", r.stderr)
	}
	id := strings.Fields(strings.TrimPrefix(r.stderr[strings.Index(r.stderr, "started DocumentApproval run "):], "started DocumentApproval run "))[0]

	list := p.ok("list", "--status", "suspended")
	if !strings.Contains(list, id) {
		t.Errorf("list --status suspended does not show %s:\n%s", id, list)
	}
	if l := p.ok("list", "--status", "done"); strings.Contains(l, id) {
		t.Errorf("list --status done shows the suspended run %s", id)
	}

	rec := p.record(id)
	if si, ok := rec.Suspend(); rec.Status != api.StatusSuspended || !ok || si.Reason != "awaiting approval" {
		t.Fatalf("record while waiting: status %s, __suspend__ %+v", rec.Status, si)
	}

	ar := p.starter("approve", id, "--wait", "--by", "ada")
	if ar.code != 0 || !strings.Contains(ar.stderr, "approved run "+id) || !strings.Contains(ar.stderr, "is done") {
		t.Errorf("approve --wait: exit %d\nstdout: %s\nstderr: %s", ar.code, ar.stdout, ar.stderr)
	}
	var printed map[string]any // stdout: the result alone
	if err := json.Unmarshal([]byte(ar.stdout), &printed); err != nil || printed["done"] != true {
		t.Errorf("approve --wait stdout = %q (%v), want the run's result alone", ar.stdout, err)
	}
	rec = p.record(id)
	if rec.Status != api.StatusDone {
		t.Fatalf("status after approve = %s", rec.Status)
	}
	var res map[string]any
	_ = json.Unmarshal(rec.Result, &res)
	if res["done"] != true || res["approver"] != "ada" {
		t.Errorf("result = %s", rec.Result)
	}
	if _, ok := rec.State[api.StateSuspend]; ok {
		t.Error("__suspend__ left in state after done")
	}
	if countEvents(rec, "fetching") != 1 {
		t.Errorf("fetching events = %d, want 1", countEvents(rec, "fetching"))
	}

	show := p.ok("show", id)
	for _, want := range []string{"DocumentApproval", "done", "fetch, publish"} {
		if !strings.Contains(show, want) {
			t.Errorf("show does not mention %q:\n%s", want, show)
		}
	}
	logs := strings.Split(strings.TrimSpace(p.ok("logs", id)), "\n")
	if len(logs) != len(rec.Events) || !strings.Contains(logs[0], "#1") {
		t.Errorf("logs printed %d lines for %d events:\n%s", len(logs), len(rec.Events), strings.Join(logs, "\n"))
	}

	// A second approval is a clear error, not a silent no-op.
	r = p.starter("approve", id)
	if r.code != 1 || !strings.Contains(r.stderr, "run "+id+" is not suspended (done)") {
		t.Errorf("approve on a done run: exit %d, stderr %q", r.code, r.stderr)
	}

	// The Web UI is served.
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(p.ui) + "/")
	if err != nil {
		t.Fatalf("Web UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Web UI status %d", resp.StatusCode)
	}
}

// TestKilledWorkerLosesNothing: the worker is SIGKILLed while a run is suspended and
// started again on the same database; the run continues and fetch ran exactly once.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"k1"}`))
	p.waitStatus(id, api.StatusSuspended)

	p.kill()
	if r := p.starter("show", id); r.code == 0 {
		t.Fatalf("show succeeded with the platform down:\n%s", r.stdout)
	} else if !strings.Contains(r.stderr, "connect to Temporal") {
		t.Errorf("show with the platform down: stderr %q, want a connection error", r.stderr)
	}
	p.start()

	p.ok("approve", id)
	rec := p.waitStatus(id, api.StatusDone)
	if n := countEvents(rec, "fetching"); n != 1 {
		t.Errorf("fetching events after a kill = %d, want 1", n)
	}
	if _, ok := rec.State["publish"]; !ok {
		t.Errorf("publish checkpoint missing: %v", rec.State)
	}
}

// TestApproveWithRawSignal approves with a plain Temporal signal, as the Temporal UI or
// `temporal workflow signal --name nexo.resume --input '{"input":{"approved":true}}'` would.
func TestApproveWithRawSignal(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"raw"}`))
	p.waitStatus(id, api.StatusSuspended)

	c := p.dial()
	ctx := context.Background()
	// What the CLI sends for --input '{"input":{"approved":true}}': a JSON payload.
	var sig map[string]any
	_ = json.Unmarshal([]byte(`{"input":{"approved":true,"approver":"ui"}}`), &sig)
	if err := c.SignalWorkflow(ctx, id, "", api.SignalResume, sig); err != nil {
		t.Fatal(err)
	}
	rec := p.waitStatus(id, api.StatusDone)
	var res map[string]any
	_ = json.Unmarshal(rec.Result, &res)
	if res["approver"] != "ui" {
		t.Errorf("result = %s", rec.Result)
	}
}

func TestDashboardArtifactAndRerun(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	r := p.starter("run", "BuildDashboard", "--input", `{"title":"Q4"}`, "--wait")
	if r.code != 0 || !strings.Contains(r.stderr, "is done") {
		t.Fatalf("run --wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	ids := strings.Fields(p.ok("list", "--workflow", "BuildDashboard", "--status", "done"))
	id := ids[len(ids)-4] // header is 4 words; one row of 4 columns
	out := filepath.Join(t.TempDir(), "dash.html")
	p.ok("artifact", id, "dashboard.html", "-o", out)
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), "<title>Q4</title>") || !strings.Contains(string(b), "<td>traffic</td>") {
		t.Errorf("artifact dashboard.html = %q, %v", b, err)
	}
	if a := p.ok("artifacts", id); !strings.Contains(a, "dashboard.html") {
		t.Errorf("artifacts list:\n%s", a)
	}
	if r := p.starter("artifact", id, "nope.txt"); r.code != 1 || !strings.Contains(r.stderr, `has no artifact "nope.txt"`) {
		t.Errorf("missing artifact: exit %d, %q", r.code, r.stderr)
	}

	// A run that fails after one step completed; the re-run pays only for what is missing.
	r = p.starter("run", "BuildDashboard", "--input", `{"metrics":["sales","bogus"]}`, "--wait")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown metric "bogus"`) {
		t.Fatalf("failing run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	failed := p.ok("list", "--status", "failed", "--json")
	var rows []struct{ ID string }
	if err := json.Unmarshal([]byte(failed), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("list --status failed --json = %s (%v)", failed, err)
	}
	rec := p.record(rows[0].ID)
	if _, ok := rec.State["sales"]; !ok || rec.Error == nil {
		t.Fatalf("failed run: state %v, error %v", rec.State, rec.Error)
	}
	newID := strings.TrimSpace(p.ok("rerun", rows[0].ID))
	rec2 := p.waitStatus(newID, api.StatusFailed)
	if countEvents(rec2, "rerun") != 1 || countEvents(rec2, "checkpoint") != 0 {
		t.Errorf("re-run events: %d rerun, %d checkpoint; want 1 and 0 (sales is seeded, bogus fails again)", countEvents(rec2, "rerun"), countEvents(rec2, "checkpoint"))
	}
	if string(rec2.State["sales"]) != string(rec.State["sales"]) {
		t.Errorf("seeded sales = %s, want %s", rec2.State["sales"], rec.State["sales"])
	}
	if r := p.starter("rerun", id); r.code != 1 || !strings.Contains(r.stderr, "is not failed, interrupted or canceled (done)") {
		t.Errorf("rerun of a done run: exit %d, %q", r.code, r.stderr)
	}

	// The README's walkthrough, its commands as printed: fail on bogus, re-run with the
	// input fixed, read the re-run's artifact.
	cmds := readmeBlockCommands(t, "starter rerun <id>")
	if len(cmds) != 3 || cmds[0][0] != "run" || cmds[1][0] != "rerun" || cmds[2][0] != "artifact" {
		t.Fatalf("README's BuildDashboard block = %q; want run, rerun, artifact", cmds)
	}
	r = p.starter(cmds[0]...)
	const started = "started BuildDashboard run "
	i := strings.Index(r.stderr, started)
	if r.code != 1 || !strings.Contains(r.stderr, `unknown metric "bogus"`) || i < 0 {
		t.Fatalf("README %q: exit %d\n%s\n%s", cmds[0], r.code, r.stdout, r.stderr)
	}
	vars := map[string]string{"<id>": strings.Fields(r.stderr[i+len(started):])[0]}
	r = p.starter(substitute(cmds[1], vars)...)
	if r.code != 0 || !strings.Contains(r.stderr, "is done") {
		t.Fatalf("README %q: exit %d\n%s\n%s", cmds[1], r.code, r.stdout, r.stderr)
	}
	// Issue 29 item 9: NEW=$(starter rerun <id> --input … --wait) captures the new id
	// alone; the status lines are stderr's.
	if lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); len(lines) != 1 || strings.Contains(lines[0], " ") {
		t.Fatalf("README %q: stdout %q, want the new run's id alone", cmds[1], r.stdout)
	}
	vars["<new-id>"] = strings.TrimSpace(r.stdout)
	rec3 := p.record(vars["<new-id>"])
	var payload bytes.Buffer
	if err := json.Compact(&payload, rec3.Payload); err != nil || countEvents(rec3, "rerun") != 1 || countEvents(rec3, "checkpoint") != 1 || payload.String() != `{"metrics":["sales","traffic"]}` {
		t.Errorf("re-run with --input: %d rerun, %d checkpoint events (want 1 and 1: only traffic runs), payload %s (%v)",
			countEvents(rec3, "rerun"), countEvents(rec3, "checkpoint"), payload.String(), err)
	}
	p.ok(substitute(cmds[2], vars)...)
	b, err = os.ReadFile(filepath.Join(p.dir, "dashboard.html"))
	if err != nil || !strings.Contains(string(b), "<td>sales</td>") || !strings.Contains(string(b), "<td>traffic</td>") {
		t.Errorf("README's artifact dashboard.html = %q, %v", b, err)
	}
}

func TestStarterErrors(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown run", []string{"show", "no-such-run"}, 1, "no run no-such-run"},
		{"approve unknown run", []string{"approve", "no-such-run"}, 1, "no run no-such-run"},
		{"bad json", []string{"run", "DocumentApproval", "--input", "{nope"}, 2, "--input is not valid JSON"},
		{"deny without reason", []string{"deny", "x"}, 2, "deny needs --reason"},
		{"unknown status", []string{"list", "--status", "sleeping"}, 2, `unknown status "sleeping"`},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"mistyped command", []string{"lsit"}, 2, `unknown command "lsit" (did you mean "list"?)`},
		{"mistyped flag", []string{"run", "DocumentApproval", "--inptu", "{}"}, 2, "unknown flag --inptu (did you mean --input?)\nUsage: starter run <workflow> [flags]"},
		{"missing argument", []string{"show"}, 2, "want a run id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p.starter(tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d stderr %q; want exit %d and %q", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
}

func TestCancelQueuedAndResumeKey(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	// A delayed start is queued until its time.
	q := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"q"}`, "--start-delay", "1h"))
	if rec := p.record(q); rec.Status != api.StatusQueued || rec.Workflow != "DocumentApproval" {
		t.Errorf("delayed run: status %s workflow %q, want queued DocumentApproval", rec.Status, rec.Workflow)
	}
	if l := p.ok("list", "--status", "queued"); !strings.Contains(l, q) {
		t.Errorf("list --status queued does not show %s:\n%s", q, l)
	}

	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"c"}`))
	p.waitStatus(id, api.StatusSuspended)
	if r := p.starter("resume", id, "--input", `[1,2]`); r.code != 2 || !strings.Contains(r.stderr, "must be a JSON object") {
		t.Errorf("resume with an array: exit %d %q", r.code, r.stderr)
	}
	p.ok("cancel", id)
	rec := p.waitStatus(id, api.StatusCanceled)
	if countEvents(rec, "canceled") != 1 {
		t.Errorf("canceled events = %d", countEvents(rec, "canceled"))
	}
	if r := p.starter("cancel", id); r.code != 1 || !strings.Contains(r.stderr, "is not open (canceled)") {
		t.Errorf("cancel twice: exit %d %q", r.code, r.stderr)
	}
	if l := p.ok("list", "--status", "canceled"); !strings.Contains(l, id) {
		t.Errorf("list --status canceled:\n%s", l)
	}
}
