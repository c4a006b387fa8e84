package replay_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nexo-temporal/nexo/replay"
	"github.com/nexo-temporal/nexo/workflows"
)

// cut writes the first n events of a committed history to a file of its own.
func cut(t *testing.T, fixture string, n int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdata, fixture))
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(h["events"], &events); err != nil {
		t.Fatal(err)
	}
	h["events"], _ = json.Marshal(events[:n])
	out, _ := json.Marshal(h)
	p := filepath.Join(t.TempDir(), "cut.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFilesRefuseAHistoryThatChecksNothing: a history cut after its first events (or in the
// middle of a workflow task) replays without comparing a single command; it used to be
// reported ok, so a deploy gate fed a truncated file passed whatever the workflows did.
func TestFilesRefuseAHistoryThatChecksNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"first three events", 3, "hold no completed workflow task"},
		{"mid-task", 10, "ends inside a workflow task"}, // …, activity completed, task scheduled and started
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cut(t, "document_approval_approved.json", tc.n)
			results, err := replay.Files([]string{p}, workflows.RegisterAll, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 || results[0].OK || !strings.Contains(results[0].Error, "incomplete") || !strings.Contains(results[0].Error, tc.want) {
				t.Fatalf("results = %+v, want one failed result saying the history is incomplete (%s)", results, tc.want)
			}
		})
	}
}

// TestFilesRefuseWhatIsNotAFile: /dev/zero used to run the replayer out of memory and a
// FIFO to block it forever; both are refused before they are read, naming what they are.
func TestFilesRefuseWhatIsNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "history.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(t.TempDir(), "huge.json")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, replay.MaxHistoryFileBytes+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file or a directory (a character device)"},
		{fifo, "not a regular file or a directory (a named pipe)"},
	} {
		if _, err := replay.Files([]string{tc.path}, workflows.RegisterAll, replay.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Files(%s) = %v, want an error with %q", tc.path, err, tc.want)
		}
	}
	// In a directory, the FIFO is a failed result of its own and the rest still replay.
	results, err := replay.Files([]string{filepath.Dir(fifo), huge}, workflows.RegisterAll, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].OK || !strings.Contains(results[0].Error, "is not a regular file (a named pipe)") ||
		results[1].OK || !strings.Contains(results[1].Error, "over the 268435456-byte limit") {
		t.Fatalf("results = %+v, want the FIFO and the oversized file refused", results)
	}
}
