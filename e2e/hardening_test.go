package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
)

// TestRunsAndInputsHardening is issue 16's runs-and-inputs campaign on one platform (one
// embedded server keeps the package fast): each subtest is one defect found by hostile
// use, reproduced as the tester did.
func TestRunsAndInputsHardening(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	gw := gateway(t, p)

	t.Run("a reused run id is refused", func(t *testing.T) {
		p.ok("run", "DocumentApproval", "--id", "d1", "--input", `{"doc_id":"1"}`)
		p.waitStatus("d1", api.StatusSuspended)
		r := p.starter("run", "BuildDashboard", "--id", "d1")
		if r.code != 1 || !strings.Contains(r.stderr, "run d1 already exists (DocumentApproval, suspended)") {
			t.Errorf("second run with id d1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		status, body := gw.call("POST", "/v1/runs", map[string]any{"workflow": "BuildDashboard", "id": "d1"})
		if status != 409 || !strings.Contains(string(body), "already exists (DocumentApproval, suspended)") {
			t.Errorf("POST /v1/runs with id d1: %d %s", status, body)
		}
		// A closed run keeps its id too.
		p.ok("run", "DocumentApproval", "--id", "d2", "--input", `{"doc_id":"2","approved":true}`, "--wait")
		if r := p.starter("run", "DocumentApproval", "--id", "d2"); r.code != 1 || !strings.Contains(r.stderr, "run d2 already exists (DocumentApproval, done)") {
			t.Errorf("reusing a done run's id: exit %d, stderr %q", r.code, r.stderr)
		}
		if rec := p.record("d1"); rec.Workflow != "DocumentApproval" || rec.Status != api.StatusSuspended {
			t.Errorf("d1 after the refused starts: %s %s", rec.Workflow, rec.Status)
		}
	})

	t.Run("unusable run ids are refused", func(t *testing.T) {
		for _, id := range []string{"a/b", ".", "..", "   ", strings.Repeat("x", 300), "session:agent:victim"} {
			if r := p.starter("run", "DocumentApproval", "--id", id); r.code != 1 || !strings.Contains(r.stderr, "run id") {
				t.Errorf("run --id %.20q: exit %d, stderr %q", id, r.code, r.stderr)
			}
			if status, body := gw.call("POST", "/v1/runs", map[string]any{"workflow": "DocumentApproval", "id": id}); status != 400 {
				t.Errorf("POST /v1/runs id %.20q: %d %s", id, status, body)
			}
		}
	})

	// The starter refuses an unknown type before starting (registry_test.go); a client
	// without that check (the temporal CLI, the raw SDK) still creates such runs, and they
	// must be reported and ended.
	t.Run("an unknown workflow type is reported and cancel ends it", func(t *testing.T) {
		startUnchecked(t, p, "NoSuchWorkflow", "nosuch")
		start := time.Now()
		r := p.starter("logs", "nosuch", "--follow")
		if r.code != 1 || !strings.Contains(r.stderr, `no worker offers workflow type "NoSuchWorkflow"`) || !strings.Contains(r.stderr, "DocumentApproval") {
			t.Errorf("logs nosuch --follow: exit %d, stderr %q", r.code, r.stderr)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("logs --follow took %v to say so", d)
		}
		out := p.ok("cancel", "nosuch")
		if !strings.Contains(out, "never started") {
			t.Errorf("cancel output: %q", out)
		}
		if rec := p.waitStatus("nosuch", api.StatusInterrupted); rec.Error == nil || !strings.Contains(*rec.Error, "NoSuchWorkflow") {
			t.Errorf("record after cancel: %+v", rec.Error)
		}
	})

	// The follower may begin after the task already failed (under load it often does): the
	// failure is then behind the history it waits on, and it must still say so.
	t.Run("following a run whose task already failed for its type says so", func(t *testing.T) {
		startUnchecked(t, p, "NoSuchWorkflow", "nosuch-late")
		tc := p.dial()
		deadline := time.Now().Add(30 * time.Second)
		for failed := false; !failed; {
			if time.Now().After(deadline) {
				t.Fatal("the first workflow task of nosuch-late never failed")
			}
			it := tc.GetWorkflowHistory(context.Background(), "nosuch-late", "", false, 0)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				failed = failed || ev.GetWorkflowTaskFailedEventAttributes() != nil
			}
			time.Sleep(20 * time.Millisecond) // polling the server's history: there is no event to wait on from outside
		}
		start := time.Now()
		r := p.starter("logs", "nosuch-late", "--follow")
		if r.code != 1 || !strings.Contains(r.stderr, `no worker offers workflow type "NoSuchWorkflow"`) || time.Since(start) > 20*time.Second {
			t.Errorf("logs --follow after the failure: exit %d after %v, stderr %q", r.code, time.Since(start), r.stderr)
		}
		p.ok("cancel", "nosuch-late")
	})

	t.Run("a large artifact rendered in the workflow does not wedge the run", func(t *testing.T) {
		title := strings.Repeat("<&>", 350_000) // 1 MB, escaped to about 2.7 MB of HTML
		in := filepath.Join(t.TempDir(), "in.json")
		b, _ := json.Marshal(map[string]any{"title": title})
		if err := os.WriteFile(in, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r := p.starter("run", "BuildDashboard", "--id", "big", "--input", "@"+in, "--wait")
		if r.code != 0 || !strings.Contains(r.stderr, "is done") {
			t.Fatalf("BuildDashboard with a 1 MB title: exit %d\nstdout %s\nstderr %.2000s\nworker %.3000s", r.code, r.stdout, r.stderr, p.output())
		}
		rec := p.record("big")
		if len(rec.Artifacts) != 1 || rec.Artifacts[0].Size < 2<<20 {
			t.Errorf("artifacts = %+v, want dashboard.html over 2 MB", rec.Artifacts)
		}
		// A huge quoted input in a failure: the run fails with a bounded message.
		b, _ = json.Marshal(map[string]any{"metrics": []string{strings.Repeat("m", 3<<20)}})
		if err := os.WriteFile(in, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r = p.starter("run", "BuildDashboard", "--id", "bigfail", "--input", "@"+in, "--wait")
		if r.code != 1 || !strings.Contains(r.stderr, "bytes of the message cut") || len(r.stderr) > 64<<10 {
			t.Errorf("BuildDashboard with a 3 MB metric name: exit %d, stderr %.300s", r.code, r.stderr)
		}
		if r := p.starter("run", "DocumentApproval", "--input", "@/dev/zero"); r.code != 2 || !strings.Contains(r.stderr, "larger than") {
			t.Errorf("--input @/dev/zero: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("a bad page token is a 400 at once", func(t *testing.T) {
		start := time.Now()
		status, body := gw.call("GET", "/v1/runs?page_token=garbage", nil)
		if status != 400 || time.Since(start) > 2*time.Second {
			t.Errorf("page_token=garbage: %d after %v: %s", status, time.Since(start), body)
		}
		status, body = gw.call("GET", "/v1/runs?limit=1", nil)
		var page struct {
			Next string `json:"next_page_token"`
		}
		if status != 200 || json.Unmarshal(body, &page) != nil || page.Next == "" {
			t.Fatalf("first page: %d %s", status, body)
		}
		if status, body := gw.call("GET", "/v1/runs?limit=1&page_token="+page.Next, nil); status != 200 {
			t.Errorf("next page: %d %s", status, body)
		}
	})

	t.Run("a decision on a terminated run names its real status", func(t *testing.T) {
		p.ok("run", "DocumentApproval", "--id", "term", "--input", `{"doc_id":"3"}`)
		p.waitStatus("term", api.StatusSuspended)
		tc := p.dial()
		defer tc.Close()
		if err := tc.TerminateWorkflow(context.Background(), "term", "", "test"); err != nil {
			t.Fatal(err)
		}
		r := p.starter("approve", "term", "--call", "1.1")
		if r.code != 1 || !strings.Contains(r.stderr, "(interrupted)") {
			t.Errorf("approve --call on a terminated run: exit %d, stderr %q", r.code, r.stderr)
		}
		if r := p.starter("approve", "d1", "--always"); r.code != 1 || !strings.Contains(r.stderr, "tool calls only") {
			t.Errorf("approve --always on a workflow pause: exit %d, stderr %q", r.code, r.stderr)
		}
		if rec := p.record("d1"); rec.Status != api.StatusSuspended {
			t.Errorf("d1 after the refused --always: %s", rec.Status)
		}
	})
}

// startUnchecked starts a run of workflow as a client without the registry check does (the
// temporal CLI, the raw SDK): straight through Temporal.
func startUnchecked(t *testing.T, p *platform, workflow, id string) {
	t.Helper()
	_, err := p.dial().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: api.DefaultTaskQueue},
		workflow, json.RawMessage("{}"))
	if err != nil {
		t.Fatalf("start %s run %s through Temporal: %v", workflow, id, err)
	}
}
