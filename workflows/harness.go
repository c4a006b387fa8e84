package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// harnessAttempts bounds the attempts of a loop step that failed in a way a retry may
// cure (the harness crashed, hung, or its worker died): a loop that always fails so must
// fail the run soon, not retry for the hours a model's outage may take.
const harnessAttempts = 3

// loopStepOptions: a step may run for the loop's timeout; the activity heartbeats, so a
// step in flight on a killed worker is retried within seconds, from the transcript.
// What a retry cannot change (output that breaks the protocol, too much output, a
// missing binary) is non-retryable at the source.
func loopStepOptions(spec agents.Spec) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: spec.Loop.StepTimeout() + time.Minute,
		HeartbeatTimeout:    ActivityHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts:        harnessAttempts,
			NonRetryableErrorTypes: []string{api.ErrTypeBadInput, api.ErrTypeTooLarge},
		},
	}
}

// loopStep runs one step of the agent's pluggable loop in place of its model call: the
// same request (with the loop) to a HarnessStep on the run's sandbox host, since a
// harness is a process of the run's sandbox, and the same result back, which the loop
// handles as a model's reply. A session's step streams live (StreamLive: the text the
// harness prints, through the attempt's heartbeat), never by signal; its text is
// recorded when it returns.
func (rt *runtime) loopStep(ctx workflow.Context, spec agents.Spec, req api.CompleteChatRequest, out *api.CompleteChatResult) error {
	loop := *spec.Loop
	req.Loop, req.Agent = &loop, spec.Name
	req.StreamTo = "" // only live streaming: what a session with its thread by reference uses
	rt.streamCall = ""
	opts := loopStepOptions(spec)
	return rt.onSandbox(ctx, &opts, api.ActivityHarnessStep, req, out)
}
