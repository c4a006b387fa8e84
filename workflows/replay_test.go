package workflows

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/payloads"
)

// TestReplayRecordedHistories replays histories recorded from real runs (see
// e2e/histories_test.go) against today's workflow code. A change that would break runs in
// flight, such as reordering activities or events that produce commands, fails here; guard
// it with workflow.GetVersion and add a new fixture beside the old ones.
//
// Some fixtures are open histories (an agent run waiting for an approval, a session
// waiting for a prompt or inside a turn's approval): they replay up to where the run
// waits, so the upgraded code must reach that wait with the same commands before it can
// finish the run. RegisterAll registers every workflow type the fixtures hold (the
// examples, AgentRun, Session).
//
// The replayer has the workers' External Storage: a payload offloaded when a fixture was
// recorded is only a reference in it, read back from testdata/blobs/<sha256> (committed
// beside the fixture, loaded into a fresh store here).
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay fixtures in testdata (%v)", err)
	}
	storage := payloads.ExternalStorage(fixtureBlobs(t), 0)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{ExternalStorage: storage})
			if err != nil {
				t.Fatal(err)
			}
			RegisterAll(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
		})
	}
}

// fixtureBlobs is a store holding every file of testdata/blobs, each named by its sha256.
func fixtureBlobs(t *testing.T) artifacts.Blobs {
	t.Helper()
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	files, err := filepath.Glob(filepath.Join("testdata", "blobs", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := store.PutBlob(context.Background(), data)
		if err != nil {
			t.Fatal(err)
		}
		if sum != filepath.Base(f) {
			t.Fatalf("fixture blob %s has sha256 %s; a blob's file is named by its sum", f, sum)
		}
	}
	return store
}
