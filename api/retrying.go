package api

import "time"

// PendingActivity is an activity of an open run that is being retried: its last attempt
// failed and Temporal runs it again (now, or at NextAttemptAt). Clients set it in
// Record.Retrying from DescribeWorkflowExecution, never the workflow: retries write
// nothing to history until the activity ends, so without it a run whose model endpoint is
// down looks "running" for as long as the call's retry budget lasts.
type PendingActivity struct {
	// Name says what the activity is for a human: "model call", "tool call", "MCP tool
	// call", or the activity type of any other.
	Name string `json:"name"`
	// Activity is the activity type (CompleteChat, RunTool, ...) and ActivityID its id in
	// the run.
	Activity   string `json:"activity"`
	ActivityID string `json:"activity_id"`
	// Attempt is the attempt running or waiting to run now: 2 or more.
	Attempt int32 `json:"attempt"`
	// MaxAttempts bounds the attempts; 0 is no bound but the activity's deadline.
	MaxAttempts int32 `json:"max_attempts,omitempty"`
	// LastFailure is the message of the last attempt's failure, on one line, at most
	// MaxRetryFailure bytes, with credentials in URLs and bearer tokens redacted: never its
	// stack trace or its causes.
	LastFailure string `json:"last_failure"`
	// Running says the attempt runs now; else it waits for NextAttemptAt (or, once that
	// has passed, for a worker to take it).
	Running bool `json:"running"`
	// NextAttemptAt is when the waiting attempt starts; nil while it runs.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// GivesUpAt is when the retries end (the activity's schedule-to-close deadline) and the
	// run fails with LastFailure; nil when only MaxAttempts ends them.
	GivesUpAt *time.Time `json:"gives_up_at,omitempty"`
}

// MaxRetryFailure bounds PendingActivity.LastFailure.
const MaxRetryFailure = 300
