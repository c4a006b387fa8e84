package e2e

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// fastFailover is the environment of a worker in a test that SIGKILLs or freezes workers
// and waits for the work to go on elsewhere. The defaults (an activity's heartbeat timeout
// of 10 s, a host timeout of 30 s) are sized for hosts on a network; with these a killed
// worker's activity is retried, and a lost host's run moves, about a second after the
// worker went silent, so such a test waits ~1 s per fault instead of 10 s. Only the tests
// that kill or freeze a worker set it: with both hosts up, a 1 s host timeout on a loaded
// machine could move a run nobody lost.
var fastFailover = []string{
	"NEXO_WORKER_ACTIVITY_HEARTBEAT_TIMEOUT=1s",
	"NEXO_SANDBOX_HOST_TIMEOUT=1s",
}

// heartbeatTimeouts returns the heartbeat timeout of every scheduled attempt of activity in
// run id's history, in order: what the worker that scheduled it really asked Temporal for.
func heartbeatTimeouts(t *testing.T, p *platform, id, activity string) []time.Duration {
	t.Helper()
	it := p.dial().GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []time.Duration
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of run %s: %v", id, err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activity {
			out = append(out, a.GetHeartbeatTimeout().AsDuration())
		}
	}
	return out
}
