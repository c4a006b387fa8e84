package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// TokenLimiter books model calls' tokens with the token limiter of their endpoint (one
// limiter workflow per endpoint, api.WorkflowTokenLimiter, shared by every worker of the
// task queue). The worker wires one talking to Temporal (platform); tests use a fake.
//
// Reserve answers at once: the call may be sent after the grant's wait. The same key
// (every attempt of one call) gets the same booking. Settle is best effort: a lost settle
// only leaves the estimate booked, which is the safe side.
type TokenLimiter interface {
	Reserve(ctx context.Context, endpoint string, req api.TokenReserveRequest) (api.TokenGrant, error)
	Settle(ctx context.Context, endpoint string, req api.TokenSettleRequest) error
}

// maxTokenSleep is the longest an attempt waits for its booking inside the activity:
// under the model call's start-to-close timeout (10 min) with room for the call itself.
// A booking further off ends the attempt with NextRetryDelay set to the wait, so no
// attempt is spent on it beyond that one and the retry starts when it is due.
const maxTokenSleep = 3 * time.Minute

// tokenRecheckEvery is how often a call waiting for its booking asks the limiter again
// (with the same key) whether it may go earlier.
const tokenRecheckEvery = 3 * time.Second

// tokenCallTimeout bounds a reservation or a settle.
const tokenCallTimeout = 30 * time.Second

// EstimateTokens is what a request books before its provider counts it: the request as
// sent (messages, tools), a token per 4 bytes rounded up, plus its max_tokens, or
// api.DefaultOutputTokens when it sets none.
func EstimateTokens(creq openai.ChatCompletionRequest) int {
	b, err := json.Marshal(creq)
	n := len(b)
	if err != nil {
		for _, m := range creq.Messages {
			n += len(m.Content)
		}
	}
	out := creq.MaxTokens
	if creq.MaxCompletionTokens > 0 {
		out = creq.MaxCompletionTokens
	}
	if out <= 0 {
		out = api.DefaultOutputTokens
	}
	return (n+3)/4 + out
}

// tokenKey names the model call for its booking: the same for every attempt of it.
func tokenKey(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return fmt.Sprintf("direct/%d", time.Now().UnixNano())
	}
	info := activity.GetInfo(ctx)
	return info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
}

// awaitTokens waits, before a call to endpoint, until the endpoint's token limiter has
// room for creq; the returned settle reports the provider's count once it answered. An
// endpoint without tokens_per_minute returns at once.
func (a *Model) awaitTokens(ctx context.Context, endpoint string, creq openai.ChatCompletionRequest) (settle func(api.Usage), err error) {
	noop := func(api.Usage) {}
	l, err := a.llmAt("model call", endpoint)
	if err != nil || l.tokensPerMinute <= 0 {
		return noop, nil
	}
	name := endpointName(endpoint)
	if a.tokens == nil {
		// Retryable: another worker of the task queue may be wired with a limiter.
		return noop, temporal.NewApplicationError(fmt.Sprintf(
			"model call: endpoint %s has limits.tokens_per_minute but this worker has no token limiter (activities.Deps.Tokens)", name),
			api.ErrTypeAgentUnavailable)
	}
	key := tokenKey(ctx)
	req := api.TokenReserveRequest{Key: key, Tokens: EstimateTokens(creq), TokensPerMinute: l.tokensPerMinute}
	rctx, cancel := context.WithTimeout(ctx, tokenCallTimeout)
	grant, err := a.tokens.Reserve(rctx, name, req)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return noop, ctx.Err()
		}
		return noop, temporal.NewApplicationError(fmt.Sprintf("model call: book %d tokens with the token limiter of endpoint %s: %v", req.Tokens, name, err),
			api.ErrTypeModelUnavailable)
	}
	wait := grant.Wait()
	if wait > maxTokenSleep {
		a.observeTokenWait(name, wait) // waited out as the retry's delay
		return noop, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("model call: endpoint %s's token budget (%d tokens/minute) is booked for the next %s; this call's %d tokens are booked for %s",
				name, l.tokensPerMinute, wait.Round(time.Second), grant.Tokens, grant.At.UTC().Format(time.RFC3339)),
			api.ErrTypeTokenWait, temporal.ApplicationErrorOptions{NextRetryDelay: wait})
	}
	began := time.Now()
	due := began.Add(wait)
	for {
		left := time.Until(due)
		if left <= 0 {
			break
		}
		t := time.NewTimer(min(left, tokenRecheckEvery))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return noop, ctx.Err()
		}
		if time.Until(due) <= 0 {
			break
		}
		// Ask again (same key): settles may have given back enough for an earlier slot.
		// A failure keeps the booking we have.
		rctx, cancel := context.WithTimeout(ctx, tokenCallTimeout)
		g, err := a.tokens.Reserve(rctx, name, req)
		cancel()
		if err == nil {
			if at := time.Now().Add(g.Wait()); at.Before(due) {
				due = at
			}
		}
	}
	a.observeTokenWait(name, time.Since(began))
	return func(u api.Usage) {
		used := u.PromptTokens + u.CompletionTokens
		if used <= 0 {
			return // the provider counted nothing we can read: the estimate stays booked
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenCallTimeout)
		defer cancel()
		if err := a.tokens.Settle(sctx, name, api.TokenSettleRequest{Key: key, Tokens: used}); err != nil {
			const msg = "settle a model call's tokens with the token limiter (its estimate stays booked)"
			if activity.IsActivity(ctx) {
				activity.GetLogger(ctx).Warn(msg, "endpoint", name, "key", key, "error", err.Error())
			} else {
				slog.Warn(msg, "endpoint", name, "key", key, "error", err.Error())
			}
		}
	}, nil
}

func (a *Model) observeTokenWait(endpoint string, d time.Duration) {
	if a.tokenWait != nil {
		a.tokenWait(endpoint, d)
	}
}
