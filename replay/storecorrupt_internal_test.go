package replay

import (
	"errors"
	"strings"
	"testing"
)

// TestStoreCorruptIsNotADivergence: a replay that failed on a changed offloaded payload
// reports the mismatch (one line, no proto dump) and ErrStoreCorrupt, not ErrDiverged;
// a real divergence among them still makes the result ErrDiverged.
func TestStoreCorruptIsNotADivergence(t *testing.T) {
	line := storeCorrupt("the stored bytes of offloaded payload 5e0f do not match their sha256 (x)\" stack_trace:\"...")
	if !strings.HasPrefix(line, "the stored bytes of offloaded payload 5e0f do not match their sha256 (x) [the store changed") || strings.Contains(line, "stack_trace") {
		t.Errorf("storeCorrupt = %q", line)
	}
	corrupt := Result{WorkflowID: "d1", Error: line}
	diverged := Result{WorkflowID: "d2", Error: "nondeterministic workflow: history event is ActivityTaskScheduled"}
	err := failures([]Result{corrupt, {WorkflowID: "d3", OK: true}})
	if !errors.Is(err, ErrStoreCorrupt) || errors.Is(err, ErrDiverged) {
		t.Errorf("failures of a corrupt run = %v, want ErrStoreCorrupt only", err)
	}
	if err := failures([]Result{corrupt, diverged}); !errors.Is(err, ErrDiverged) {
		t.Errorf("failures of a corrupt and a diverged run = %v, want ErrDiverged", err)
	}
}
