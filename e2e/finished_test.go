package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/fakellm"
)

// serveGateway runs `starter serve` on the platform's gateway port (the HTTP API with no
// worker in the process) until the test ends, and returns its client.
func serveGateway(t *testing.T, p *platform) gwClient {
	t.Helper()
	p.releasePorts()
	cmd := exec.Command(bins.starter, "serve", "--addr", "127.0.0.1:"+strconv.Itoa(p.gateway))
	cmd.Dir, cmd.Env = p.dir, p.env()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Nexo HTTP API") {
				close(ready)
				for sc.Scan() {
				}
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("starter serve not ready after 30s: %s", stderr.String())
	}
	return gateway(t, p)
}

// TestFinishedRunsWithoutAWorker: runs that finished (an approved DocumentApproval, an agent
// run with an artifact, a BuildDashboard that failed after one step) are read in full by
// show, logs, the HTTP API and rerun after their worker stopped, the server still up: from
// the record each stored at its close. A run terminated (no code of it ran at its close,
// so it stored nothing) says its record is incomplete, and rerun refuses it instead of
// seeding nothing.
func TestFinishedRunsWithoutAWorker(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("brief.md")}},
		fakellm.Reply{Content: "Writing it.", ToolCalls: []fakellm.Call{writeCall("notes.md", "Launch is on Monday.\n")}},
		fakellm.Reply{Content: "I wrote notes.md."},
	)
	p := newPlatform(t)
	p.plain = true
	p.releasePorts()
	srv := startDevServer(t, devserver.Options{FrontendPort: p.frontend})
	t.Cleanup(func() { _ = srv.Stop() })
	p.writeConfig(historyAgentConfig(model.Start(t)))
	p.writeWorkspace(map[string]string{"brief.md": historyBrief["brief.md"]})
	p.start()

	doc := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"42"}`))
	p.waitStatus(doc, api.StatusSuspended)
	p.ok("approve", doc, "--by", "ada")
	p.waitStatus(doc, api.StatusDone)

	agent := p.startAgent("Read the brief and write the note.")
	wantPending(t, p, agent, "2.1")
	p.ok("approve", agent)
	p.waitStatus(agent, api.StatusDone)

	if r := p.starter("run", "BuildDashboard", "--input", `{"metrics":["sales","bogus"]}`, "--wait"); r.code != 1 {
		t.Fatalf("failing BuildDashboard: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var rows []struct{ ID string }
	if err := json.Unmarshal([]byte(p.ok("list", "--status", "failed", "--json")), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("list --status failed: %v %v", rows, err)
	}
	failed := rows[0].ID

	// Terminated while it waits: nothing of the run ran at its close.
	term := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"43"}`))
	p.waitStatus(term, api.StatusSuspended)
	if err := p.dial().TerminateWorkflow(context.Background(), term, "", "test"); err != nil {
		t.Fatal(err)
	}

	before := map[string]string{}
	for _, id := range []string{doc, agent, failed} {
		before[id] = p.ok("show", id, "--json")
	}
	p.stop() // no worker from here on; the server stays up

	for _, id := range []string{doc, agent, failed} {
		began := time.Now()
		r := p.starter("show", id, "--json")
		if r.code != 0 || r.stdout != before[id] || r.stderr != "" {
			t.Errorf("show %s with no worker: exit %d, stderr %q\n got %s\nwant %s", id, r.code, r.stderr, r.stdout, before[id])
		}
		// The stored record is read, not a query waiting for a worker that never comes.
		if d := time.Since(began); d > 4*time.Second {
			t.Errorf("show %s with no worker took %v", id, d)
		} else {
			t.Logf("show --json %s with no worker: %v", id, d.Round(time.Millisecond))
		}
	}
	rec := p.record(doc)
	if rec.Status != api.StatusDone || countEvents(rec, "done") != 1 || rec.State["fetch"] == nil || rec.State["publish"] == nil {
		t.Errorf("DocumentApproval with no worker: status %s, state %v, events %v", rec.Status, rec.State, rec.Events)
	}
	rec = p.record(agent)
	if a, ok := rec.FindArtifact("notes.md"); !ok || a.Content == nil || *a.Content != "Launch is on Monday.\n" || countEvents(rec, "approval_decided") != 1 {
		t.Errorf("agent run with no worker: artifacts %+v, %d approval_decided", rec.Artifacts, countEvents(rec, "approval_decided"))
	}
	if show := p.ok("show", agent); !strings.Contains(show, "Artifact     notes.md (21 bytes)") || !strings.Contains(show, "Events       ") {
		t.Errorf("show of the agent run lacks its artifact or events:\n%s", show)
	}
	out := filepath.Join(t.TempDir(), "notes.md")
	p.ok("artifact", agent, "notes.md", "-o", out)
	if b, err := os.ReadFile(out); err != nil || string(b) != "Launch is on Monday.\n" {
		t.Errorf("artifact notes.md with no worker = %q, %v", b, err)
	}
	logs := p.ok("logs", doc)
	if n := strings.Count(logs, "\n"); n != len(p.record(doc).Events) || !strings.Contains(logs, "done") {
		t.Errorf("logs with no worker (%d lines):\n%s", n, logs)
	}
	if follow := p.ok("logs", "--follow", doc); follow != logs {
		t.Errorf("logs --follow of a finished run with no worker:\n%s\nwant\n%s", follow, logs)
	}

	// The README's commands, as printed, against the failed run.
	cmds := readmeBlockCommands(t, "bin/starter show <run-id>")
	if len(cmds) != 3 || cmds[0][0] != "show" || cmds[1][0] != "logs" || cmds[2][0] != "rerun" {
		t.Fatalf("README's finished-run block = %q; want show, logs, rerun", cmds)
	}
	vars := map[string]string{"<run-id>": failed}
	if show := p.ok(substitute(cmds[0], vars)...); !strings.Contains(show, "sales") || !strings.Contains(show, `unknown metric "bogus"`) {
		t.Errorf("README %q:\n%s", cmds[0], show)
	}
	if l := p.ok(substitute(cmds[1], vars)...); !strings.Contains(l, "checkpoint") || !strings.Contains(l, "failed") {
		t.Errorf("README %q:\n%s", cmds[1], l)
	}
	rerun := strings.TrimSpace(p.ok(substitute(cmds[2], vars)...))

	// The HTTP API, served with no worker anywhere.
	gw := serveGateway(t, p)
	var got api.Record
	if err := json.Unmarshal(gw.must(http.StatusOK, "GET", "/v1/runs/"+agent, nil), &got); err != nil {
		t.Fatal(err)
	}
	if a, ok := got.FindArtifact("notes.md"); !ok || got.Status != api.StatusDone || got.Warning != "" || a.SHA256 == "" {
		t.Errorf("GET /v1/runs/%s: status %s, warning %q, artifacts %+v", agent, got.Status, got.Warning, got.Artifacts)
	}
	var evs []api.Event
	if err := json.Unmarshal(gw.must(http.StatusOK, "GET", "/v1/runs/"+doc+"/events?after=1", nil), &evs); err != nil || len(evs) == 0 || evs[0].Seq != 2 || evs[len(evs)-1].Type != "done" {
		t.Errorf("GET /v1/runs/%s/events?after=1 = %+v (%v)", doc, evs, err)
	}
	if b := gw.must(http.StatusOK, "GET", "/v1/runs/"+agent+"/artifacts/notes.md", nil); string(b) != "Launch is on Monday.\n" {
		t.Errorf("GET artifact notes.md = %q", b)
	}
	st := gw.stream(doc, nil)
	end := st.until("end", func(m sseMessage) bool { return m.event == "end" }, nil)
	if s := statusOf(t, end); s.Status != api.StatusDone || s.LastSeq != int64(len(p.record(doc).Events)) {
		t.Errorf("event stream of a finished run with no worker ended with %+v", s)
	}
	if b := gw.must(http.StatusOK, "GET", "/runs/"+agent, nil); !bytes.Contains(b, []byte("notes.md")) || !bytes.Contains(b, []byte("agent_done")) {
		t.Errorf("run page of the agent run lacks its artifact or events")
	}

	// The terminated run: history alone, said so; rerun refuses.
	began := time.Now()
	r := p.starter("show", term, "--json")
	t.Logf("show --json of the terminated run with no worker: %v; stderr: %s", time.Since(began).Round(time.Millisecond), r.stderr)
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 ||
		!strings.Contains(got.Warning, "no worker replayed it") || !strings.Contains(r.stderr, "warning: run "+term) {
		t.Errorf("show of a terminated run with no worker: exit %d, warning %q, stderr %q (%v)", r.code, got.Warning, r.stderr, err)
	}
	if r := p.starter("rerun", term); r.code != 1 || !strings.Contains(r.stderr, "its checkpoints cannot be read to seed a re-run") {
		t.Errorf("rerun of a run whose record is unreadable: exit %d, %q", r.code, r.stderr)
	}

	// A worker again: the re-run started above runs seeded (sales is not paid for again).
	p.start()
	rec2 := p.waitStatus(rerun, api.StatusFailed)
	if countEvents(rec2, "rerun") != 1 || countEvents(rec2, "checkpoint") != 0 || string(rec2.State["sales"]) != string(p.record(failed).State["sales"]) {
		t.Errorf("re-run of %s: %d rerun, %d checkpoint events, sales %s", failed, countEvents(rec2, "rerun"), countEvents(rec2, "checkpoint"), rec2.State["sales"])
	}
	// With a worker, the terminated run replays: its record is whole, no warning.
	if rec := p.record(term); rec.Warning != "" || rec.State["fetch"] == nil || rec.Status != api.StatusInterrupted {
		t.Errorf("terminated run replayed: status %s, warning %q, state %v", rec.Status, rec.Warning, rec.State)
	}
	p.stop()
}
