package runs

import (
	"errors"
	"strings"
	"testing"
)

// TestStoreCorruptLeads: a run's error that carries a store_corrupt failure under the
// workflow's words is rewritten to lead with it; any other error is left as it is; and a
// query that failed on a changed payload says that, not "is a worker polling?".
func TestStoreCorruptLeads(t *testing.T) {
	msg := "agent scribe: model call 2: CompleteChat: the stored bytes of thread segment 3f1c0a9e2b7d do not match their sha256: x"
	want := "the stored bytes of thread segment 3f1c0a9e2b7d do not match their sha256: x (in agent scribe: model call 2: CompleteChat)"
	if got := LeadStoreCorrupt(msg); got != want {
		t.Errorf("LeadStoreCorrupt = %q\nwant %q", got, want)
	}
	for _, same := range []string{"agent scribe: model call 2: boom", "the stored bytes of blob x do not match their sha256"} {
		if got := LeadStoreCorrupt(same); got != same {
			t.Errorf("LeadStoreCorrupt(%q) = %q, want it unchanged", same, got)
		}
	}
	qerr := errors.New(`storage driver "nexo-blob" retrieve failed: the stored bytes of offloaded payload 5e0f do not match their sha256 (…)`)
	got := (&NoWorkerError{ID: "d1", TaskQueue: "nexo", Err: qerr}).Error()
	if !strings.HasPrefix(got, "run d1: the stored bytes of offloaded payload 5e0f do not match their sha256") ||
		strings.Contains(got, "is a worker polling") || !strings.Contains(got, "starter cancel d1 --terminate") {
		t.Errorf("NoWorkerError = %q", got)
	}
	other := (&NoWorkerError{ID: "d1", TaskQueue: "nexo", Err: errors.New("deadline exceeded")}).Error()
	if !strings.Contains(other, `is a worker polling task queue "nexo"?`) {
		t.Errorf("NoWorkerError of a timeout = %q, want the question about workers", other)
	}
}
