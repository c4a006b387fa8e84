package permissions

import (
	"fmt"
	"time"
)

// OnTimeout is what happens to a call waiting for approval when its approval_timeout
// passes without a decision.
type OnTimeout string

// The timeout actions. The empty OnTimeout means OnTimeoutDeny: a call nobody decided
// does not run.
const (
	// OnTimeoutDeny refuses the call; the model is told "no decision within <timeout>".
	OnTimeoutDeny OnTimeout = "deny"
	// OnTimeoutApprove runs the call as if a human had approved it once.
	OnTimeoutApprove OnTimeout = "approve"
	// OnTimeoutEscalate raises an approval_escalated event and keeps the call waiting,
	// with no further deadline.
	OnTimeoutEscalate OnTimeout = "escalate"
)

// Deadline is how long a call that needs approval waits for a human, and what happens
// then. The zero Deadline waits forever (what every run did before deadlines existed).
type Deadline struct {
	// Timeout is the approval_timeout as written ("24h", "2s"); empty means no deadline.
	Timeout string `json:"approval_timeout,omitempty"`
	// OnTimeout is the action when Timeout passes; empty means deny.
	OnTimeout OnTimeout `json:"on_timeout,omitempty"`
}

// Duration is the parsed Timeout; 0 (no deadline) when Timeout is empty or does not parse
// (Validate rejects such a policy at load time).
func (d Deadline) Duration() time.Duration {
	if d.Timeout == "" {
		return 0
	}
	v, err := time.ParseDuration(d.Timeout)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

// Action is OnTimeout with the default applied.
func (d Deadline) Action() OnTimeout {
	if d.OnTimeout == "" {
		return OnTimeoutDeny
	}
	return d.OnTimeout
}

// validateDeadline checks an approval_timeout / on_timeout pair (field names without a
// prefix).
// The bounds of an approval_timeout: nobody answers within less than a second, and a
// deadline past a year is no deadline (leave it out to wait for ever).
const (
	MinApprovalTimeout = time.Second
	MaxApprovalTimeout = 366 * 24 * time.Hour
)

func validateDeadline(timeout string, on OnTimeout) error {
	if timeout != "" {
		v, err := time.ParseDuration(timeout)
		switch {
		case err != nil:
			return fmt.Errorf("approval_timeout: %w: %q is not a duration (write it as 90s, 30m or 24h)", ErrInvalidPolicy, timeout)
		case v <= 0:
			return fmt.Errorf("approval_timeout: %w: %q is not positive", ErrInvalidPolicy, timeout)
		case v < MinApprovalTimeout || v > MaxApprovalTimeout:
			return fmt.Errorf("approval_timeout: %w: %q is not between 1s and 8784h (366 days): a human cannot answer sooner, and for longer write no deadline", ErrInvalidPolicy, timeout)
		}
	}
	switch on {
	case "", OnTimeoutDeny, OnTimeoutApprove, OnTimeoutEscalate:
	default:
		return fmt.Errorf("on_timeout: %w: unknown action %q (want one of deny, approve, escalate)", ErrInvalidPolicy, on)
	}
	if on != "" && timeout == "" {
		return fmt.Errorf("on_timeout: %w: on_timeout %s without an approval_timeout never happens; set approval_timeout too", ErrInvalidPolicy, on)
	}
	return nil
}
