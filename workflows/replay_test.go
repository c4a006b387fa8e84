package workflows_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestReplayRecordedHistories replays histories recorded from real runs (see
// e2e/histories_test.go) against today's workflow code. A change that would break runs in
// flight, such as reordering activities or events that produce commands, fails here; guard
// it with workflow.GetVersion and add a new fixture beside the old ones.
//
// Some fixtures are open histories (an agent run waiting for an approval, a session
// waiting for a prompt or inside a turn's approval): they replay up to where the run
// waits, so the upgraded code must reach that wait with the same commands before it can
// finish the run. registerShipped registers every workflow type the fixtures hold: the
// platform's (workflows.RegisterAll) and the demos the shipped worker adds (examples/demo).
//
// The replayer has the workers' External Storage: a payload offloaded when a fixture was
// recorded is only a reference in it, read back from testdata/blobs/<sha256> (committed
// beside the fixture, loaded into a fresh store here).
//
// Every file of testdata is replayed (a glob, never a hand list): a fixture committed under
// another name than *.json fails here rather than being skipped, and every workflow type
// registerShipped registers must have at least one fixture.
//
// It is an external test (package workflows_test) so that it can register the demos,
// whose package imports this one.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
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
	storage := payloads.ExternalStorage(workflows.FixtureBlobs(t), 0)
	covered := map[string]bool{}
	// Each fixture replays as a plain replayer does (check-replay) and under a worker's
	// heartbeat cap of 1 s (workflows.Interceptor): a worker's timeouts are no part of what
	// replay matches.
	capped := []interceptor.WorkerInterceptor{workflows.Interceptor(workflows.WorkerDefaults{ActivityHeartbeatTimeout: time.Second})}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			covered[workflows.FixtureType(t, f)] = true
			for _, icpt := range [][]interceptor.WorkerInterceptor{nil, capped} {
				r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{ExternalStorage: storage, Interceptors: icpt})
				if err != nil {
					t.Fatal(err)
				}
				registerShipped(r)
				if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
					t.Errorf("replay %s (interceptors %d): %v", f, len(icpt), err)
				}
			}
		})
	}
	var registered typeNames // every type, the registry's own included
	registerShipped(&registered)
	for _, typ := range registered {
		if !covered[typ] {
			t.Errorf("workflow type %s has no recorded history in testdata; record one (e2e/histories_test.go)", typ)
		}
	}
}

// registerShipped registers what the shipped worker registers: the platform's workflows
// and the demos.
func registerShipped(r workflows.Registry) {
	workflows.RegisterAll(r)
	demo.Register(r)
}

// typeNames is a Registry that only learns the names of the types registered.
type typeNames []string

func (n *typeNames) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*n = append(*n, o.Name)
}
