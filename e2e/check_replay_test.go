package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/replay"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestCheckReplayLiveRuns: the deploy gate against a live server whose runs wait (a
// DocumentApproval suspended for a human, an agent run waiting for the approval of a write,
// an idle session, the task queue's registry). The starter of this build replays them all
// (exit 0). A build whose DocumentApproval publishes before it fetches (an incompatible
// change, built here through the replay package) is refused: the run is named with its
// run id and the first divergence, and RunCommand returns an error.
func TestCheckReplayLiveRuns(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Prompt: "Write the note", ToolCalls: []fakellm.Call{readCall("brief.md"), writeCall("notes.md", "gate\n")}},
		fakellm.Reply{Prompt: "Write the note", Content: "Done."},
		fakellm.Reply{Prompt: "Hello", Content: "Hello to you."},
	)
	p, c := agentPlatform(t, model, historyBrief)

	closed := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"pre","approved":true}`))
	p.waitStatus(closed, api.StatusDone)
	doc := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"gate"}`))
	p.waitStatus(doc, api.StatusSuspended)
	agent := p.startAgent("Write the note.")
	wantPending(t, p, agent, "1.2")
	if out := p.ok("session", "prompt", "scribe", "gate", "Hello"); !strings.Contains(out, "Hello to you.") {
		t.Fatalf("session reply %q", out)
	}
	session := api.SessionID("scribe", "gate")
	open := map[string]string{doc: "DocumentApproval", agent: api.WorkflowAgentRun, session: api.WorkflowSession,
		api.RegistryID("nexo"): api.WorkflowRegistry}
	runIDs := map[string]string{}
	for id := range open {
		waitQuiet(t, c, id, "")
		runIDs[id] = currentRun(t, c, id)
	}

	r := p.starter("check-replay")
	if r.code != 0 {
		t.Fatalf("check-replay: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("starter check-replay:\n%s", r.stdout)
	for id, typ := range open {
		if want := "ok " + id + " " + runIDs[id] + " " + typ + "\n"; !strings.Contains(r.stdout, want) {
			t.Errorf("check-replay output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, " 0 failed\n") || strings.Contains(r.stdout, "FAIL") || strings.Contains(r.stdout, closed) {
		t.Errorf("check-replay output (open runs only, all ok):\n%s", r.stdout)
	}
	var rep replay.Report
	if r := p.starter("check-replay", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil ||
		len(rep.Results) != len(open) || rep.Query != `ExecutionStatus="Running" AND TaskQueue="nexo"` {
		t.Errorf("check-replay --json: exit %d, report %+v, want the %d open runs of the default query\n%s\n%s", r.code, rep, len(open), r.stdout, r.stderr)
	}
	// --closed adds the finished run; --limit 1 stops at the newest and says so.
	if r := p.starter("check-replay", "--closed"); r.code != 0 || !strings.Contains(r.stdout, "ok "+closed+" ") {
		t.Errorf("check-replay --closed: exit %d, want the closed run %s ok\n%s\n%s", r.code, closed, r.stdout, r.stderr)
	}
	if r := p.starter("check-replay", "--limit", "1"); r.code != 0 || !strings.Contains(r.stdout, "1 replayed: 1 ok") || !strings.Contains(r.stdout, "stopped at --limit 1: more runs match") {
		t.Errorf("check-replay --limit 1: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// The same through the package, with the incompatible DocumentApproval.
	store, err := artifacts.Open(p.artifactsDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	storage := payloads.ExternalStorage(store, p.offloadThreshold())
	ctx := context.Background()
	results, err := replay.Check(ctx, c, withPublishFirst, replay.Options{TaskQueue: "nexo", Storage: storage})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, res := range results {
		seen[res.WorkflowID] = true
		switch {
		case res.WorkflowID == doc:
			if res.OK || res.RunID != runIDs[doc] || !strings.Contains(res.Error, "[TMPRL1100]") ||
				!strings.Contains(res.Error, api.ActivityFetchDocument) || !strings.Contains(res.Error, api.ActivityPublishDocument) {
				t.Errorf("the changed DocumentApproval: %s; want FAIL with run %s and the divergence (history %s, replay %s)",
					res, runIDs[doc], api.ActivityFetchDocument, api.ActivityPublishDocument)
			}
		case !res.OK:
			t.Errorf("unchanged workflow fails: %s", res)
		}
	}
	for id := range open {
		if !seen[id] {
			t.Errorf("Check did not replay %s (%s): %+v", id, open[id], results)
		}
	}
	var out strings.Builder
	err = replay.RunCommand(ctx, nil, c, withPublishFirst, &out, replay.WithStorage(storage), replay.WithTaskQueue("nexo"))
	if !errors.Is(err, replay.ErrDiverged) || !strings.Contains(out.String(), "FAIL "+doc+" "+runIDs[doc]+" DocumentApproval: ") {
		t.Errorf("RunCommand with the changed DocumentApproval = %v, want ErrDiverged and the run's FAIL line:\n%s", err, out.String())
	}
	t.Logf("RunCommand with the changed DocumentApproval: %v\n%s", err, out.String())

	// A query that selects nothing passes; one the server cannot parse is an error naming it.
	if r := p.starter("check-replay", "--query", `WorkflowType="NoSuchType"`); r.code != 0 || !strings.Contains(r.stdout, "no runs match") {
		t.Errorf("check-replay with an empty selection: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := p.starter("check-replay", "--query", `WorkflowType=`); r.code != 1 || !strings.Contains(r.stderr, `list runs matching "WorkflowType="`) {
		t.Errorf("check-replay with a broken query: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestCheckReplayRecordedHistories is the gate CI runs on the committed fixtures, as the
// README shows it: the real starter, no server, every history of workflows/testdata ok.
func TestCheckReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	cmds := readmeBlockCommands(t, "bin/starter check-replay --histories workflows/testdata")
	if len(cmds) != 1 {
		t.Fatalf("README's check-replay block has %q, want one --histories command", cmds)
	}
	p := newPlatform(t) // no worker started: nothing listens
	testdata, err := filepath.Abs(filepath.Join("..", "workflows", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	args := cmds[0]
	for i, a := range args {
		if a == "workflows/testdata" { // the README runs from the checkout
			args[i] = testdata
		}
	}
	args = append(args, "--address", "127.0.0.1:1") // a server is never dialed
	r := p.starter(args...)
	if r.code != 0 || strings.Contains(r.stdout, "FAIL") {
		t.Fatalf("README %q: exit %d\n%s\n%s", cmds[0], r.code, r.stdout, r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(testdata, "*.json"))
	got := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "ok ") {
			got++
		}
	}
	if got != len(files) || len(files) == 0 {
		t.Errorf("check-replay printed %d ok lines, want one per committed history (%d):\n%s", got, len(files), r.stdout)
	}
	checkPrintedSummary(t, "bin/starter check-replay --histories workflows/testdata", r.stdout)
	if r := p.starter("check-replay", "--histories", "no-such-dir"); r.code != 1 || !strings.Contains(r.stderr, "no-such-dir") {
		t.Errorf("check-replay --histories no-such-dir: exit %d\n%s", r.code, r.stderr)
	}
	// Bad files (hardening round two, item 5): a device is refused at once instead of running
	// the replayer out of memory, and a history cut after its first events is not ok.
	if r := p.starter("check-replay", "--histories", "/dev/zero"); r.code != 1 || !strings.Contains(r.stderr, "/dev/zero: not a regular file or a directory (a character device)") {
		t.Errorf("check-replay --histories /dev/zero: exit %d\n%s", r.code, r.stderr)
	}
	var h struct {
		Events []json.RawMessage `json:"events"`
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	h.Events = h.Events[:3]
	data, _ = json.Marshal(h)
	truncated := filepath.Join(t.TempDir(), "truncated.json")
	if err := os.WriteFile(truncated, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := p.starter("check-replay", "--histories", truncated); r.code != 1 || !strings.Contains(r.stdout, "FAIL") || !strings.Contains(r.stdout, "incomplete") {
		t.Errorf("check-replay of a history cut after 3 events: exit %d, want 1 and a FAIL line saying it is incomplete\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Issue 29 item 8: runs of a workflow this binary does not register (a custom worker's
	// RefundRequest) are skipped with the command that can check them, not FAILed, and do
	// not fail the gate.
	refunds, err := filepath.Abs(filepath.Join("..", "examples", "custom-worker", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	r = p.starter("check-replay", "--histories", refunds, filepath.Join(testdata, "document_approval_approved.json"))
	if r.code != 0 || strings.Contains(r.stdout, "FAIL") || strings.Count(r.stdout, "skip ") != 2 ||
		!strings.Contains(r.stdout, "RefundRequest (") || !strings.Contains(r.stdout, ": "+replay.NotThisBinaryHint+"\n") ||
		!strings.Contains(r.stdout, "1 replayed: 1 ok, 0 failed; 2 skipped: not workflows of this binary") {
		t.Errorf("check-replay of a custom worker's histories: exit %d, want 0, two skip lines naming the worker's own check-replay and the DocumentApproval ok\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := p.starter("check-replay", "--histories", ".", "--closed"); r.code != 2 || !strings.Contains(r.stderr, "--histories replays files") {
		t.Errorf("check-replay --histories with --closed: exit %d\n%s", r.code, r.stderr)
	}
}

// publishFirst is an incompatible DocumentApproval: it publishes before it fetches, so a
// run recorded by the shipped one diverges at its first activity.
func publishFirst(ctx workflow.Context, in demo.DocumentApprovalInput) (demo.DocumentApprovalResult, error) {
	published, err := workflows.Checkpoint[string](ctx, "publish", api.ActivityPublishDocument, api.Document{ID: in.DocID})
	if err != nil {
		return demo.DocumentApprovalResult{}, err
	}
	return demo.DocumentApprovalResult{Done: true, Published: published}, nil
}

// registryExcept registers into r everything but the workflow type skip.
type registryExcept struct {
	r    workflows.Registry
	skip string
}

func (e registryExcept) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name != e.skip {
		e.r.RegisterWorkflowWithOptions(w, o)
	}
}

// withPublishFirst is the shipped registry with DocumentApproval replaced by publishFirst.
func withPublishFirst(r workflows.Registry) {
	workflows.RegisterAll(r)
	demo.Register(registryExcept{r, demo.DocumentApprovalName})
	workflows.Register(r, demo.DocumentApprovalName, publishFirst, workflows.Options{})
}
