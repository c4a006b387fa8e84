package refund

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/platform"
)

// TestReplayRecordedHistories replays RefundRequest's recorded runs (../testdata, recorded by
// e2e's TestRecordRefundRequestHistories) against today's code, with the workflows this
// worker registers (the platform's RegisterWorkflows), so a change that would break a
// refund waiting for its human fails here. Guard such a change with workflow.GetVersion
// and record a new fixture beside the old ones.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay fixtures in ../testdata (%v)", err)
	}
	p, err := platform.New(config.Config{}, Options()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			p.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
		})
	}
}
