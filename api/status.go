package api

import "fmt"

// Status is a run's lifecycle state, as Nexo names it.
type Status string

// The statuses of a run.
const (
	// StatusPending: started, no workflow task has run yet.
	StatusPending Status = "pending"
	// StatusQueued: started with a start delay that has not elapsed.
	StatusQueued Status = "queued"
	// StatusRunning: the workflow is executing.
	StatusRunning Status = "running"
	// StatusSuspended: waiting for a resume signal or a tool-call approval.
	StatusSuspended Status = "suspended"
	// StatusDone: completed successfully.
	StatusDone Status = "done"
	// StatusFailed: the workflow returned an error.
	StatusFailed Status = "failed"
	// StatusInterrupted: terminated or timed out; the run never got to say why.
	StatusInterrupted Status = "interrupted"
	// StatusCanceled: canceled on request.
	StatusCanceled Status = "canceled"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusPending, StatusQueued, StatusRunning, StatusSuspended,
	StatusDone, StatusFailed, StatusInterrupted, StatusCanceled}

// Closed reports whether a run in this status can no longer change.
func (s Status) Closed() bool {
	switch s {
	case StatusDone, StatusFailed, StatusInterrupted, StatusCanceled:
		return true
	}
	return false
}

// ParseStatus returns the status named s, or an error listing the valid names.
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown status %q (want one of %v)", s, Statuses)
}
