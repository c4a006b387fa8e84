package e2e

import (
	"strings"
	"testing"
)

// TestWorkerSaysReadyOnce: at the default log level, `worker --dev` says it is ready once,
// on stdout, not again as a log line on the same terminal.
func TestWorkerSaysReadyOnce(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.extraEnv = []string{"NEXO_LOG_LEVEL=info"} // the harness runs at warn; a user at the default
	p.start()
	// Something the worker does after its banner, so a log line following it is in.
	p.ok("run", "DocumentApproval", "--input", `{"doc_id":"1","approved":true}`, "--wait")
	out := p.output()
	if n := strings.Count(strings.ToLower(out), "worker ready"); n != 1 {
		t.Errorf("the worker says it is ready %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, `level=INFO`) {
		t.Errorf("no info log line in the worker's output, so this test saw no log at all:\n%s", out)
	}
}
