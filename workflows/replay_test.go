package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
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
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay fixtures in testdata (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			RegisterAll(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
		})
	}
}
