package api

import (
	"strings"
	"time"
)

// Token limiter wire names. Each endpoint with limits.tokens_per_minute has one limiter
// workflow per task queue (not a run): the model calls of every run on every worker book
// their tokens with it before calling the provider, so the fleet shares the provider's
// token budget.
const (
	// WorkflowTokenLimiter is the workflow type of an endpoint's token limiter.
	WorkflowTokenLimiter = "NexoTokenLimiter"
	// UpdateTokenReserve books a model call's tokens (TokenReserveRequest) and answers at
	// once with when the call may be sent (TokenGrant); it never blocks.
	UpdateTokenReserve = "nexo.tokens.reserve"
	// SignalTokenSettle replaces a booking's estimate with the tokens the provider counted
	// (TokenSettleRequest), so an over-estimate gives its capacity back.
	SignalTokenSettle = "nexo.tokens.settle"

	// TokenLimiterIDPrefix starts the workflow id of a token limiter (TokenLimiterID);
	// ordinary runs may not take it.
	TokenLimiterIDPrefix = "nexo-tokens:"
)

// RateMargin is the share of an endpoint's limits the fleet uses (config.RateMargin):
// providers' windows are not aligned with ours, and a retried call counts again.
const RateMargin = 0.9

// TokenWindow is the window a token limit counts, as providers count tokens per minute.
const TokenWindow = time.Minute

// DefaultOutputTokens is the output allowance a model call's estimate adds to its prompt
// when the request sets no max_tokens: the limiter books prompt + this, and the call's
// settle puts the provider's count in its place.
const DefaultOutputTokens = 1024

// TokenLimiterID is the workflow id of the token limiter of endpoint on taskQueue.
func TokenLimiterID(taskQueue, endpoint string) string {
	return TokenLimiterIDPrefix + taskQueue + ":" + endpoint
}

// IsTokenLimiterID reports whether id is a token limiter's workflow id.
func IsTokenLimiterID(id string) bool { return strings.HasPrefix(id, TokenLimiterIDPrefix) }

// TokenReserveRequest is the input of UpdateTokenReserve.
type TokenReserveRequest struct {
	// Key names the model call (workflow id, run id and activity id: the same for every
	// attempt of the call), so a retried attempt gets the booking it already has.
	Key string `json:"key"`
	// Tokens is the call's estimate (prompt + output allowance).
	Tokens int `json:"tokens"`
	// TokensPerMinute is the endpoint's limit as the calling worker's config has it; the
	// limiter follows the latest value, so a changed limit applies without a restart.
	TokensPerMinute int `json:"tokens_per_minute"`
}

// TokenGrant is the answer of UpdateTokenReserve.
type TokenGrant struct {
	// At is when the call is booked (workflow time); WaitMS how long after the limiter
	// answered that is (0: send now). The caller waits WaitMS, its own clock aside.
	At     time.Time `json:"at"`
	WaitMS int64     `json:"wait_ms"`
	// Tokens is what was booked: the request, capped to the limiter's budget for a request
	// larger than a whole window's (it then has a window to itself).
	Tokens int `json:"tokens"`
}

// Wait is WaitMS as a duration.
func (g TokenGrant) Wait() time.Duration { return time.Duration(g.WaitMS) * time.Millisecond }

// TokenSettleRequest is the payload of SignalTokenSettle.
type TokenSettleRequest struct {
	Key string `json:"key"`
	// Tokens the provider reported for the call (prompt + completion).
	Tokens int `json:"tokens"`
}
