package activities

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// slowMetric is a slow backend whose code never heartbeats.
func slowMetric(ctx context.Context, name string) (api.Metric, error) {
	time.Sleep(600 * time.Millisecond)
	return api.Metric{Name: name, Value: 1}, nil
}

// TestKeepAliveBeatsAtHalfTheHeartbeatTimeout: an activity scheduled with a 200 ms
// heartbeat timeout that runs 600 ms without beating itself completes (the test
// environment would time it out otherwise), kept alive by beats every 100 ms.
func TestKeepAliveBeatsAtHalfTheHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	var beats atomic.Int32
	ka := &KeepAlive{Record: func(ctx context.Context, details ...any) {
		beats.Add(1)
		activity.RecordHeartbeat(ctx, details...)
	}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{ka}})
	env.RegisterActivityWithOptions(slowMetric, activity.RegisterOptions{Name: api.ActivityFetchMetric})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (api.Metric, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 200 * time.Millisecond})
		var m api.Metric
		err := workflow.ExecuteActivity(ctx, api.ActivityFetchMetric, "sales").Get(ctx, &m)
		return m, err
	}, workflow.RegisterOptions{Name: "KeepAliveTest"})
	env.ExecuteWorkflow("KeepAliveTest")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a 600 ms activity with a 200 ms heartbeat timeout: %v (want it kept alive)", err)
	}
	// 600 ms at one beat per 100 ms: about 5; fewer than 3 means the interval is not half
	// the timeout, more than 8 that it beats faster than it needs to.
	if n := beats.Load(); n < 3 || n > 8 {
		t.Errorf("beats = %d in 600 ms with a 200 ms heartbeat timeout, want about 5 (one per 100 ms)", n)
	}
}

// TestKeepAliveLeavesAttemptsWithoutTimeout: an attempt without a heartbeat timeout is
// beaten for only when KeepAlive.Every is set.
func TestKeepAliveLeavesAttemptsWithoutTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		every     time.Duration
		min, max  int32
		situation string
	}{
		{0, 0, 0, "Every unset"},
		{50 * time.Millisecond, 5, 13, "Every 50 ms"},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			t.Parallel()
			var beats atomic.Int32
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{
				&KeepAlive{Every: tc.every, Record: func(context.Context, ...any) { beats.Add(1) }}}})
			env.RegisterActivityWithOptions(slowMetric, activity.RegisterOptions{Name: api.ActivityFetchMetric})
			if _, err := env.ExecuteActivity(api.ActivityFetchMetric, "sales"); err != nil {
				t.Fatal(err)
			}
			if n := beats.Load(); n < tc.min || n > tc.max {
				t.Errorf("%s: %d beats in 600 ms, want %d to %d", tc.situation, n, tc.min, tc.max)
			}
		})
	}
}
