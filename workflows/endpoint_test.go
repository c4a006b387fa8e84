package workflows

import (
	"context"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// modelQueueFakes answer an agent's one model call and record the task queue and the
// endpoint it came with.
type modelQueueFakes struct {
	spec      agents.Spec
	queues    []string
	endpoints []string
}

func (f *modelQueueFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(context.Context, string) (agents.Spec, error) { return f.spec, nil },
		activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.RegisterActivityWithOptions(fullThread(func(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		f.queues = append(f.queues, activity.GetInfo(ctx).TaskQueue)
		f.endpoints = append(f.endpoints, req.Endpoint)
		return api.CompleteChatResult{Message: text("Done."), Model: "fake"}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(context.Context, api.CollectOutputsRequest) ([]string, error) { return nil, nil },
		activity.RegisterOptions{Name: api.ActivityCollectOutputs})
	env.RegisterActivityWithOptions(func(context.Context, api.ReleaseSandboxRequest) error { return nil },
		activity.RegisterOptions{Name: api.ActivityReleaseSandbox})
}

// TestModelCallsGoToTheEndpointsQueue: an agent resolved with a rate-limited endpoint
// sends its model calls to that endpoint's task queue, naming the endpoint; one without
// stays on the run's own queue.
func TestModelCallsGoToTheEndpointsQueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		spec               agents.Spec
		wantQueue, wantEnd string
	}{
		{"rate-limited endpoint", agents.Spec{Name: "summariser", LLM: "small", ModelQueue: "nexo-llm-small"}, "nexo-llm-small", "small"},
		{"named endpoint without a limit", agents.Spec{Name: "writer", LLM: "local"}, "", "local"},
		{"default endpoint", agents.Spec{Name: "plain"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			f := &modelQueueFakes{spec: tt.spec}
			f.register(env)
			env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, tt.spec.Name))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if len(f.queues) != 1 {
				t.Fatalf("model calls = %d, want 1", len(f.queues))
			}
			want := tt.wantQueue
			if want == "" {
				want = "default-test-taskqueue" // the run's own queue in the test suite
			}
			if f.queues[0] != want || f.endpoints[0] != tt.wantEnd {
				t.Errorf("model call on queue %q for endpoint %q, want %q and %q", f.queues[0], f.endpoints[0], want, tt.wantEnd)
			}
		})
	}
}
