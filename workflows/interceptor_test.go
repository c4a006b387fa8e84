package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/api"
)

// TestInterceptorCapsHeartbeatTimeouts: with a worker's cap of 1 s every activity a run
// schedules has a heartbeat timeout of 1 s (so a killed worker's activity is retried within
// about a second); without one they keep ActivityHeartbeatTimeout.
func TestInterceptorCapsHeartbeatTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cap  time.Duration
		want time.Duration
	}{
		{"capped", time.Second, time.Second},
		{"no cap", 0, ActivityHeartbeatTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t)
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Interceptor(WorkerDefaults{ActivityHeartbeatTimeout: tc.cap})}})
			registerGate(env)
			got := map[string]time.Duration{}
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				got[info.ActivityType.Name] = info.HeartbeatTimeout
			})
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(api.SignalResume, api.ResumeSignal{Input: map[string]any{"approved": true}})
			}, time.Hour)
			env.ExecuteWorkflow(gateName, payload(t, gateInput{ID: "1"}))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatal("no activity ran")
			}
			for name, hb := range got {
				if hb != tc.want {
					t.Errorf("%s ran with heartbeat timeout %v, want %v", name, hb, tc.want)
				}
			}
		})
	}
}
