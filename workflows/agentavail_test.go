package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// lackingWorker is ResolveAgent on a worker without the agent, for the first n calls.
func lackingWorker(f *agentFakes, n int, calls *int) func(context.Context, string) (agents.Spec, error) {
	return func(_ context.Context, name string) (agents.Spec, error) {
		*calls++
		if *calls <= n {
			return agents.Spec{}, temporal.NewNonRetryableApplicationError(
				`no agent "`+name+`" is configured on this worker (configured: none)`, api.ErrTypeAgentUnavailable, nil)
		}
		return f.spec, nil
	}
}

// TestAgentRunWaitsForAWorkerWithTheAgent: a worker that lacks the agent does not fail the
// run; the run names it once in agent_unavailable and asks again until a worker has it.
func TestAgentRunWaitsForAWorkerWithTheAgent(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec(), script: []api.ChatMessage{text("Nothing to write.")}}
	f.register(env)
	calls := 0
	env.RegisterActivityWithOptions(lackingWorker(f, 3, &calls), activity.RegisterOptions{Name: api.ActivityResolveAgent})
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	if calls != 4 {
		t.Errorf("ResolveAgent ran %d times, want 4 (three refusals, then the answer)", calls)
	}
	rec := queryRecord(t, env)
	if rec.Status != api.StatusDone {
		t.Fatalf("status %s, want done", rec.Status)
	}
	var unavailable []map[string]string
	for _, e := range rec.Events {
		if e.Type == EventAgentUnavailable {
			var d map[string]string
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			unavailable = append(unavailable, d)
		}
	}
	// The test environment runs every attempt under one worker identity: one event.
	if len(unavailable) != 1 || unavailable[0]["agent"] != "scribe" || unavailable[0]["worker"] == "" {
		t.Errorf("agent_unavailable events = %v, want one naming agent scribe and the worker", unavailable)
	}
	if _, ok := rec.State["agent"]; !ok {
		t.Error(`state["agent"] missing: the definition is not stored`)
	}
}

// TestAgentRunFailsWhenNoWorkerHasTheAgent: a name no worker knows fails the run after
// AgentUnavailableFor with an error naming the agent, never a hang.
func TestAgentRunFailsWhenNoWorkerHasTheAgent(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	f := &agentFakes{spec: approveSpec()}
	f.register(env)
	calls := 0
	env.RegisterActivityWithOptions(lackingWorker(f, 1<<30, &calls), activity.RegisterOptions{Name: api.ActivityResolveAgent})
	start := env.Now()
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "scribe"))
	err := env.GetWorkflowError()
	if err == nil {
		t.Fatal("run succeeded with no worker offering the agent")
	}
	if msg := err.Error(); !strings.Contains(msg, `offers agent "scribe"`) || !strings.Contains(msg, AgentUnavailableFor.String()) {
		t.Errorf("error = %v, want one naming agent scribe and the time it asked for", err)
	}
	if took := env.Now().Sub(start); took < AgentUnavailableFor-agentRetryMax || took > AgentUnavailableFor+time.Minute {
		t.Errorf("failed after %s, want about %s", took, AgentUnavailableFor)
	}
	if calls < 10 || calls > 40 {
		t.Errorf("ResolveAgent ran %d times in %s: want a backoff, not a busy loop nor a single try", calls, AgentUnavailableFor)
	}
	if rec := queryRecord(t, env); rec.Status != api.StatusFailed {
		t.Errorf("status %s, want failed", rec.Status)
	}
}
