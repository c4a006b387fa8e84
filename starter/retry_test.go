package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

func retrying(id string, attempt int32) api.PendingActivity {
	next := time.Now().Add(16 * time.Second)
	return api.PendingActivity{Name: "model call", Activity: api.ActivityCompleteChat, ActivityID: id, Attempt: attempt,
		LastFailure: "connect: connection refused", NextAttemptAt: &next}
}

// TestShowSaysWhatIsRetrying: `show` of a run whose model call is retried has a Retrying
// row under its status, with the attempt, the wait and the failure.
func TestShowSaysWhatIsRetrying(t *testing.T) {
	var out bytes.Buffer
	printRecord(&out, api.Record{ID: "r1", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning,
		Retrying: []api.PendingActivity{retrying("7", 5)}})
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[2], "Status ") {
		t.Fatalf("show:\n%s", out.String())
	}
	want := "Retrying  model call retrying (attempt 5, next in 16 s): connect: connection refused"
	if got := lines[3]; got != want && got != strings.Replace(want, "16 s", "15 s", 1) {
		t.Errorf("the row under Status is %q, want %q", got, want)
	}
	out.Reset()
	printRecord(&out, api.Record{ID: "r1", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning})
	if strings.Contains(out.String(), "Retrying") {
		t.Errorf("a run that retries nothing shows:\n%s", out.String())
	}
}

// TestRetryLinesOncePerAttempt: a follower prints each attempt once, however often the
// record comes again, and each activity apart.
func TestRetryLinesOncePerAttempt(t *testing.T) {
	var r retryLines
	var out bytes.Buffer
	for _, rec := range []api.Record{
		{},
		{Retrying: []api.PendingActivity{retrying("7", 2)}},
		{Retrying: []api.PendingActivity{retrying("7", 2)}},
		{Retrying: []api.PendingActivity{retrying("7", 3), retrying("9", 2)}},
		{},
	} {
		r.print(&out, rec)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 3 || !strings.Contains(got[0], "(attempt 2,") || !strings.Contains(got[1], "(attempt 3,") || !strings.Contains(got[2], "(attempt 2,") {
		t.Fatalf("printed:\n%s", out.String())
	}
	if !strings.HasPrefix(got[0], "  model call retrying (attempt 2, next in ") || !strings.HasSuffix(got[0], "): connect: connection refused") {
		t.Errorf("line %q", got[0])
	}
}
