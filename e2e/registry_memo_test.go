package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartCheckAnswersWhileTheWorkerIsFrozen: the check before a start reads what the
// workers offer from the registry's memo, which the server alone answers; so with the only
// worker frozen (SIGSTOP: still polling as far as the server knows, but running no task, as
// a worker under heavy load), a start with a mistyped input field is still refused at
// once with the field named, not "could not check" after the registry's query timed out.
func TestStartCheckAnswersWhileTheWorkerIsFrozen(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "", 1)
	w := f.workers[0]
	w.start()
	const want = `unknown field "docid" (did you mean "doc_id"?)`
	// The worker announces before it is ready; its registry may still be starting.
	pollUntil(t, 20*time.Second, "the registry knows DocumentApproval's input", func(context.Context) error {
		if r := f.server.starter("workflows", "--json"); !strings.Contains(r.stdout, `"doc_id"`) {
			return fmt.Errorf("starter workflows --json: %s %s", r.stdout, r.stderr)
		}
		return nil
	})
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cmd.Process.Signal(syscall.SIGCONT) })
	if r := f.server.starter("run", "DocumentApproval", "--input", `{"docid":"1"}`); r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Fatalf("start with the worker frozen: exit %d, stderr %q, want exit 2 and %q", r.code, r.stderr, want)
	}
}
