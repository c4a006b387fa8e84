package workflows

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

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
//
// Every file of testdata is replayed (a glob, never a hand list): a fixture committed under
// another name than *.json fails here rather than being skipped, and every workflow type
// RegisterAll registers must have at least one fixture.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay fixtures in testdata (%v)", err)
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() && filepath.Ext(e.Name()) != ".json" {
			t.Errorf("testdata/%s is not a *.json history, so it would never be replayed", e.Name())
		}
	}
	storage := payloads.ExternalStorage(fixtureBlobs(t), 0)
	covered := map[string]bool{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			covered[fixtureType(t, f)] = true
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
	var registered typeNames // every type, the registry's own included
	RegisterAll(&registered)
	for _, typ := range registered {
		if !covered[typ] {
			t.Errorf("workflow type %s has no recorded history in testdata; record one (e2e/histories_test.go)", typ)
		}
	}
}

// typeNames is a Registry that only learns the names of the types registered.
type typeNames []string

func (n *typeNames) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*n = append(*n, o.Name)
}

// fixtureType is the workflow type of the history in file f.
func fixtureType(t *testing.T, f string) string {
	t.Helper()
	r, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("parse %s: %v", f, err)
	}
	return h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
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
