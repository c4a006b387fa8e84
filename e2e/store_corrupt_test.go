package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// changeBlobHolding rewrites, in the platform's store, every blob whose bytes contain
// marker (same length, so only the sha256 check can tell), and returns their names.
func changeBlobHolding(t *testing.T, p *platform, marker, with string) []string {
	t.Helper()
	dir := filepath.Join(p.artifactsDir(), "blobs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(marker), []byte(with)), 0o644); err != nil {
			t.Fatal(err)
		}
		changed = append(changed, e.Name())
	}
	if len(changed) == 0 {
		t.Fatalf("no blob in %s holds %q", dir, marker)
	}
	return changed
}

// TestChangedThreadSegmentFailsTheRunAtOnce: a run suspended on an approval; the bytes
// of its thread segment in the store change; the worker restarts (so no cache holds the
// thread) and the call is approved. The model call finds the sha256 mismatch and the run
// fails within seconds, not after hours of retries, with an error of its own type that
// names the blob, what it held and the store; the model never sees the changed text.
func TestChangedThreadSegmentFailsTheRunAtOnce(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("hello")}},
		fakellm.Reply{Content: "I wrote notes.md."},
	)
	p := newPlatform(t)
	p.writeConfig(agentConfig(model.Start(t)))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Write a note, PRISTINE-TEXT."))
	p.waitStatus(id, api.StatusSuspended)
	p.stop()
	if r := p.starter("store", "verify"); r.code != 0 || !strings.Contains(r.stdout, "every object matches its sha256") {
		t.Fatalf("store verify of an intact store: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	changed := changeBlobHolding(t, p, "PRISTINE-TEXT", "TAMPERED-TEXT")
	r := p.starter("store", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, "changed or missing") {
		t.Errorf("store verify of a changed store: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, sum := range changed {
		if !strings.Contains(r.stdout, "mismatch: the stored bytes of blobs/"+sum+" do not match their sha256") {
			t.Errorf("store verify does not list the changed blob %s:\n%s", sum, r.stdout)
		}
	}
	var rep struct {
		Problems []struct{ Kind, Key, SHA256 string }
	}
	if r := p.starter("store", "verify", "--json"); r.code != 1 || json.Unmarshal([]byte(r.stdout), &rep) != nil ||
		len(rep.Problems) != len(changed) || rep.Problems[0].Kind != "mismatch" {
		t.Errorf("store verify --json: exit %d, %+v, want 1 and the %d changed blobs\n%s", r.code, rep, len(changed), r.stdout)
	}
	if r := p.starter("store", "verify", "--grace", "1h"); r.code != 2 || !strings.Contains(r.stderr, "--grace is a flag of store gc") {
		t.Errorf("store verify --grace: exit %d, want 2\n%s", r.code, r.stderr)
	}
	p.start()

	approved := time.Now()
	p.ok("approve", id)
	rec := waitStatusRetrying(t, p, id, api.StatusFailed)
	if took := time.Since(approved); took > 30*time.Second {
		t.Errorf("the run failed %s after the approval, want within seconds", took)
	}
	msg := ""
	if rec.Error != nil {
		msg = *rec.Error
	}
	if !strings.HasPrefix(msg, "the stored bytes of thread segment ") || !strings.Contains(msg, "do not match their sha256") ||
		!strings.Contains(msg, filepath.Join(".nexo", "artifacts")) {
		t.Errorf("record error = %q, want the store_corrupt failure naming the thread segment and the store", msg)
	}
	found := false
	for _, sum := range changed {
		found = found || strings.Contains(msg, sum[:12])
	}
	if !found {
		t.Errorf("record error = %q names none of the changed blobs %v", msg, changed)
	}
	show := p.ok("show", id)
	if !strings.Contains(show, "the stored bytes of thread segment") {
		t.Errorf("show does not say why the run failed:\n%s", show)
	}
	for _, r := range model.Requests() {
		if strings.Contains(fmt.Sprint(r.Messages), "TAMPERED-TEXT") {
			t.Fatal("the model was sent the changed thread")
		}
	}
}

// TestChangedOffloadedInputIsNamedAndTheRunCanBeEnded: a suspended run whose input was
// offloaded (External Storage); the input's bytes in the store change and the worker
// restarts, so no workflow task or query of the run can load it. `show`, `approve` and
// `check-replay` lead with the sha256 mismatch (not "is a worker polling?", not "does not
// replay against this binary"); `cancel` explains that a cancel would never be seen and
// offers --terminate, which ends the run.
func TestChangedOffloadedInputIsNamedAndTheRunCanBeEnded(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.extraEnv = append(p.extraEnv, "NEXO_PAYLOADS_OFFLOAD_THRESHOLD=1024")
	p.start()
	docID := "PRISTINE-INPUT-" + strings.Repeat("o", 2000)
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"`+docID+`"}`))
	p.waitStatus(id, api.StatusSuspended)
	p.stop()
	changeBlobHolding(t, p, "PRISTINE-INPUT", "TAMPERED-INPUT")
	p.start()

	const lead = "the stored bytes of offloaded payload "
	for _, args := range [][]string{{"show", id}, {"approve", id}} {
		r := p.starter(args...)
		if r.code != 1 || !strings.Contains(r.stderr, lead) || !strings.Contains(r.stderr, "do not match their sha256") ||
			strings.Contains(r.stderr, "is a worker polling") {
			t.Errorf("starter %s: exit %d, want 1 leading with %q:\n%s", strings.Join(args, " "), r.code, lead, r.stderr)
		}
	}
	if status, b := gateway(t, p).call("GET", "/v1/runs/"+id, nil); status != 409 || !strings.Contains(string(b), lead) {
		t.Errorf("GET /v1/runs/%s: %d %s, want 409 naming the changed blob", id, status, b)
	}
	r := p.starter("check-replay")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL "+id+" ") || !strings.Contains(r.stdout, lead) ||
		strings.Contains(r.stdout+r.stderr, "against this binary's workflows") {
		t.Errorf("check-replay: exit %d, want 1 with the run's FAIL line naming the changed blob:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = p.starter("cancel", id)
	if r.code != 1 || !strings.Contains(r.stderr, lead) || !strings.Contains(r.stderr, "starter cancel "+id+" --terminate") {
		t.Errorf("cancel: exit %d, want 1 explaining and offering --terminate:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if out := p.ok("cancel", id, "--terminate"); !strings.Contains(out, "terminated run "+id) {
		t.Errorf("cancel --terminate:\n%s", out)
	}
	desc, err := p.dial().DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Errorf("after cancel --terminate the run is %s, want terminated", st)
	}
	if r := p.starter("cancel", id, "--terminate"); r.code != 1 || !strings.Contains(r.stderr, "is not open") {
		t.Errorf("cancel --terminate of a closed run: exit %d\n%s", r.code, r.stderr)
	}
}
