package activities

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
)

// TestEveryActivityHeartbeats: an activity registered through Register heartbeats while
// it runs although its code never does (FetchMetric, PublishDocument, ...), so a killed
// worker's attempt is noticed after its heartbeat timeout.
func TestEveryActivityHeartbeats(t *testing.T) {
	var beats atomic.Int32
	oldBeat, oldEvery := recordHeartbeat, heartbeatEvery
	recordHeartbeat = func(context.Context, ...any) { beats.Add(1) }
	heartbeatEvery = 10 * time.Millisecond
	t.Cleanup(func() { recordHeartbeat, heartbeatEvery = oldBeat, oldEvery })

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	keepAliveRegistry{env}.RegisterActivityWithOptions(func(ctx context.Context, name string) (api.Metric, error) {
		time.Sleep(200 * time.Millisecond) // a slow backend; the code itself never beats
		return api.Metric{Name: name, Value: 1}, nil
	}, activity.RegisterOptions{Name: api.ActivityFetchMetric})
	v, err := env.ExecuteActivity(api.ActivityFetchMetric, "sales")
	if err != nil {
		t.Fatal(err)
	}
	var m api.Metric
	if err := v.Get(&m); err != nil || m.Name != "sales" {
		t.Fatalf("result %+v, %v", m, err)
	}
	if n := beats.Load(); n < 3 {
		t.Errorf("a 200 ms activity heartbeat %d times with a 10 ms keep-alive, want several", n)
	}
}
