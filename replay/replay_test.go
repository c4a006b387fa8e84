package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/replay"
	"github.com/nexo-temporal/nexo/workflows"
)

var testdata = filepath.Join("..", "workflows", "testdata")

// publishFirst is an incompatible DocumentApproval: it publishes before it fetches, so
// every recorded DocumentApproval diverges at its first activity.
func publishFirst(ctx workflow.Context, in demo.DocumentApprovalInput) (demo.DocumentApprovalResult, error) {
	published, err := workflows.Checkpoint[string](ctx, "publish", api.ActivityPublishDocument, api.Document{ID: in.DocID})
	if err != nil {
		return demo.DocumentApprovalResult{}, err
	}
	return demo.DocumentApprovalResult{Done: true, Published: published}, nil
}

// except registers into r everything but the workflow type skip.
type except struct {
	r    workflows.Registry
	skip string
}

func (e except) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name != e.skip {
		e.r.RegisterWorkflowWithOptions(w, o)
	}
}

// withPublishFirst is the shipped registry with DocumentApproval replaced by publishFirst.
func withPublishFirst(r workflows.Registry) {
	shipped(except{r, demo.DocumentApprovalName})
	workflows.Register(r, demo.DocumentApprovalName, publishFirst, workflows.Options{})
}

// shipped registers what the shipped worker registers: the platform's workflows and the
// demos (whose histories testdata holds too).
func shipped(r workflows.Registry) {
	workflows.RegisterAll(r)
	demo.Register(r)
}

func TestFilesReplayTheCommittedHistories(t *testing.T) {
	results, err := replay.Files([]string{testdata}, shipped, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(testdata, "*.json"))
	if len(results) != len(files) || len(files) == 0 {
		t.Fatalf("replayed %d histories, want every one of the %d in %s", len(results), len(files), testdata)
	}
	for _, r := range results {
		if !r.OK {
			t.Errorf("%s", r)
		}
	}
}

func TestFilesReportTheFirstDivergence(t *testing.T) {
	results, err := replay.Files([]string{testdata}, withPublishFirst, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range results {
		if r.WorkflowType != demo.DocumentApprovalName {
			if !r.OK {
				t.Errorf("unchanged workflow fails: %s", r)
			}
			continue
		}
		failed++
		if r.OK {
			t.Errorf("%s replays against a DocumentApproval that publishes first", r.File)
			continue
		}
		line := r.String()
		if !strings.HasPrefix(line, "FAIL "+r.WorkflowID+" "+r.RunID+" DocumentApproval") ||
			!strings.Contains(r.Error, "[TMPRL1100]") || len(r.Error) > 300 ||
			strings.Contains(r.Error, "stack_trace") || strings.Contains(r.Error, "\n") {
			t.Errorf("result line %q; want FAIL, the run, and the SDK's nondeterminism error (TMPRL1100) on one short line", line)
		}
	}
	if failed < 3 {
		t.Fatalf("%d DocumentApproval histories replayed, want the approved, denied and offloaded ones", failed)
	}

	var out strings.Builder
	err = replay.RunCommand(context.Background(), []string{"--histories", testdata}, nil, withPublishFirst, &out)
	if !errors.Is(err, replay.ErrDiverged) {
		t.Fatalf("RunCommand = %v, want ErrDiverged\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "FAIL ") || !strings.Contains(out.String(), " failed\n") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestRunCommandJSON(t *testing.T) {
	var out strings.Builder
	err := replay.RunCommand(context.Background(), []string{"--histories", filepath.Join(testdata, "document_approval_denied.json"), "--json"}, nil, withPublishFirst, &out)
	if !errors.Is(err, replay.ErrDiverged) {
		t.Fatalf("RunCommand --json = %v, want ErrDiverged", err)
	}
	var rep replay.Report
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(rep.Results) != 1 || rep.Results[0].OK || rep.Results[0].WorkflowType != demo.DocumentApprovalName ||
		rep.Results[0].RunID == "" || !strings.Contains(rep.Results[0].Error, api.ActivityPublishDocument) {
		t.Errorf("report = %+v, want one failed DocumentApproval naming %s", rep, api.ActivityPublishDocument)
	}
}

func TestRunCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want string
	}{
		{"no server", nil, replay.ErrNoClient.Error()},
		{"files and a query", []string{"--histories", testdata, "--query", `WorkflowType="X"`}, "--histories replays files"},
		{"zero limit", []string{"--limit", "0"}, "--limit must be at least 1"},
		{"stray argument", []string{"extra"}, "takes no arguments"},
		{"missing file", []string{"--histories", "no-such.json"}, "no-such.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := replay.RunCommand(context.Background(), tc.argv, nil, workflows.RegisterAll, &strings.Builder{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RunCommand(%q) = %v, want an error with %q", tc.argv, err, tc.want)
			}
		})
	}
}

// waitsForever is a DocumentApproval that issues no command at all, so the history's first
// activity is one the replayed code never scheduled: the SDK reports that by event number
// only ("lookup failed for scheduledEventID to activityID").
func waitsForever(ctx workflow.Context, _ demo.DocumentApprovalInput) (demo.DocumentApprovalResult, error) {
	return demo.DocumentApprovalResult{}, workflow.Await(ctx, func() bool { return false })
}

// TestFilesTranslateTheActivityLookupFailure (issue 29 item 8): check-replay prints the
// SDK's activity lookup failure in the readable form of its other divergences, naming the
// history event and the activity it scheduled.
func TestFilesTranslateTheActivityLookupFailure(t *testing.T) {
	results, err := replay.Files([]string{filepath.Join(testdata, "document_approval_approved.json")}, func(r workflows.Registry) {
		shipped(except{r, demo.DocumentApprovalName})
		workflows.Register(r, demo.DocumentApprovalName, waitsForever, workflows.Options{})
	}, replay.Options{})
	if err != nil || len(results) != 1 {
		t.Fatalf("Files = %+v, %v", results, err)
	}
	got := results[0].Error
	want := "[TMPRL1100] nondeterministic workflow: history event 6 is ActivityTaskScheduled: (ActivityId:6, Name:" + api.ActivityFetchDocument +
		", Name:nexo), and the replayed code did not schedule it there: it issued another command before it, or none"
	if results[0].OK || got != want {
		t.Errorf("divergence\n got %q\nwant %q", got, want)
	}
}

// TestRunsOfAnotherBinaryAreSkipped (issue 29 item 8): a history of a workflow type this
// binary does not register is no divergence: its line says which check-replay can check
// it, and the gate passes on the rest.
func TestRunsOfAnotherBinaryAreSkipped(t *testing.T) {
	withoutDocs := func(r workflows.Registry) { shipped(except{r, demo.DocumentApprovalName}) }
	var out strings.Builder
	err := replay.RunCommand(context.Background(), []string{"--histories",
		filepath.Join(testdata, "document_approval_denied.json"), filepath.Join(testdata, "agent_always.json")}, nil, withoutDocs, &out)
	if err != nil {
		t.Fatalf("RunCommand = %v, want nil (a run of another binary's workflow fails nothing)\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "skip ") || !strings.HasSuffix(lines[0], " DocumentApproval ("+filepath.Join(testdata, "document_approval_denied.json")+"): "+replay.NotThisBinaryHint) ||
		!strings.HasPrefix(lines[1], "ok ") || lines[2] != "1 replayed: 1 ok, 0 failed; 1 skipped: not workflows of this binary (run your worker's own check-replay for them)" {
		t.Errorf("output:\n%s", out.String())
	}
	var js strings.Builder
	if err := replay.RunCommand(context.Background(), []string{"--histories", filepath.Join(testdata, "document_approval_denied.json"), "--json"}, nil, withoutDocs, &js); err != nil {
		t.Fatalf("RunCommand --json = %v", err)
	}
	var rep replay.Report
	if err := json.Unmarshal([]byte(js.String()), &rep); err != nil || len(rep.Results) != 1 || !rep.Results[0].NotThisBinary || rep.Results[0].OK {
		t.Errorf("--json report = %s (%v), want one result with not_this_binary", js.String(), err)
	}
}
