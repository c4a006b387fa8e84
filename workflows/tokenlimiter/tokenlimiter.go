// Package tokenlimiter is the token budget of a model endpoint shared by every run on a task
// queue: one long-lived workflow (not a Nexo run) per endpoint that model calls book their
// estimated tokens with before they call, so the fleet together stays under the endpoint's
// tokens-per-minute limit.
//
// Its workflow type name is api.WorkflowTokenLimiter, registered by workflows.RegisterAll.
package tokenlimiter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// State is what an endpoint's token limiter holds, and carries across
// continue-as-new: the bookings of the last window and those booked in the future.
type State struct {
	// TokensPerMinute is the endpoint's limit, the latest a reservation named.
	TokensPerMinute int `json:"tokens_per_minute"`
	// Bookings, in the order they were made.
	Bookings []Booking `json:"bookings,omitempty"`
	// ContinueAfter is the number of reservations and settles after which the limiter
	// continues as new (0: tokenLimiterContinueAfter). Tests lower it.
	ContinueAfter int `json:"continue_after,omitempty"`
}

// Booking is one model call's share of the budget: Tokens at At.
type Booking struct {
	Key    string    `json:"key"`
	At     time.Time `json:"at"`
	Tokens int       `json:"tokens"`
}

// tokenLimiterContinueAfter bounds the limiter's history: a reservation adds about three
// events (update accepted, completed, the workflow task), a settle two, so a few thousand
// stay far below Temporal's limits.
const tokenLimiterContinueAfter = 2000

// tokenLimiterMaxBookings bounds the state continue-as-new carries; a reservation beyond
// it is refused (the call retries), rather than growing the input past Temporal's limits.
const tokenLimiterMaxBookings = 5000

// Workflow is the token budget of one endpoint for one task queue (workflow id
// api.TokenLimiterID). It is not a Nexo run: no run record, no NexoStatus, no events.
//
// A model call books its estimated tokens with the Update api.UpdateTokenReserve, which
// answers at once: the call is booked at the earliest instant t ≥ now at which every
// window of api.TokenWindow containing t holds at most api.RateMargin of the limit,
// the new booking included, and the caller waits until then. No handler ever blocks, so
// continue-as-new only has to let the running handlers finish. Once the provider answered,
// the call settles (signal api.SignalTokenSettle) with the tokens the provider counted,
// replacing the estimate: what was over-estimated is free for the bookings made after.
// A booking leaves the state once its window has passed.
func Workflow(ctx workflow.Context, st State) error {
	limit := st.ContinueAfter
	if limit <= 0 {
		limit = tokenLimiterContinueAfter
	}
	ops := 0
	err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateTokenReserve,
		func(ctx workflow.Context, req api.TokenReserveRequest) (api.TokenGrant, error) {
			ops++
			now := workflow.Now(ctx)
			st.TokensPerMinute = req.TokensPerMinute
			st.Bookings = pruneBookings(st.Bookings, now)
			return reserveTokens(&st, req, now), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req api.TokenReserveRequest) error {
			return validateReserve(req, len(st.Bookings))
		}})
	if err != nil {
		return err
	}
	settles := workflow.GetSignalChannel(ctx, api.SignalTokenSettle)
	settle := func(s api.TokenSettleRequest) {
		ops++
		settleTokens(st.Bookings, s)
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var s api.TokenSettleRequest
			if !settles.Receive(ctx, &s) {
				return
			}
			settle(s)
		}
	})
	if err := workflow.Await(ctx, func() bool {
		return ops >= limit || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	// Handlers never block, so this returns at once; signals already delivered to this
	// execution would be lost with it.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	for {
		var s api.TokenSettleRequest
		if !settles.ReceiveAsync(&s) {
			break
		}
		settle(s)
	}
	st.Bookings = pruneBookings(st.Bookings, workflow.Now(ctx))
	return workflow.NewContinueAsNewError(ctx, api.WorkflowTokenLimiter, st)
}

// validateReserve refuses a reservation the limiter cannot book.
func validateReserve(req api.TokenReserveRequest, bookings int) error {
	switch {
	case req.Key == "":
		return errors.New("token reservation: key is empty (want the model call's workflow id, run id and activity id)")
	case req.Tokens <= 0:
		return fmt.Errorf("token reservation %s: tokens %d, want a positive estimate", req.Key, req.Tokens)
	case req.TokensPerMinute <= 0:
		return fmt.Errorf("token reservation %s: tokens_per_minute %d, want the endpoint's positive limit", req.Key, req.TokensPerMinute)
	case bookings >= tokenLimiterMaxBookings:
		return fmt.Errorf("token reservation %s: the limiter holds %d bookings, its most; retry later", req.Key, bookings)
	}
	return nil
}

// tokenBudget is what one window may hold: api.RateMargin of the limit, at least 1.
func tokenBudget(tokensPerMinute int) int {
	return max(1, int(math.Floor(float64(tokensPerMinute)*api.RateMargin)))
}

// reserveTokens books req in st at the earliest instant ≥ now it fits (see
// Workflow), or returns the booking req.Key already has: a retried attempt
// keeps its booking. A booking still in the future moves earlier when it fits earlier
// now (settles gave tokens back since it was made): a waiting call asks again now and
// then, and is never told a later time than it was.
func reserveTokens(st *State, req api.TokenReserveRequest, now time.Time) api.TokenGrant {
	grant := func(b Booking) api.TokenGrant {
		return api.TokenGrant{At: b.At, WaitMS: max(0, b.At.Sub(now).Milliseconds()), Tokens: b.Tokens}
	}
	budget := tokenBudget(st.TokensPerMinute)
	for i, b := range st.Bookings {
		if b.Key != req.Key {
			continue
		}
		if b.At.After(now) {
			others := slices.Delete(slices.Clone(st.Bookings), i, i+1)
			if at := earliestFit(others, min(b.Tokens, budget), budget, now); at.Before(b.At) {
				st.Bookings[i].At = at
				b.At = at
			}
		}
		return grant(b)
	}
	tokens := min(req.Tokens, budget)
	b := Booking{Key: req.Key, At: earliestFit(st.Bookings, tokens, budget, now), Tokens: tokens}
	st.Bookings = append(st.Bookings, b)
	return grant(b)
}

// earliestFit is the earliest t ≥ now at which a booking of tokens keeps every window
// (t'−TokenWindow, t'] that contains t within budget. The sum of a window only changes
// where a booking enters it (t' = its At) or leaves it (t' = At+TokenWindow), so the
// candidates are now and the instants bookings leave, and a candidate t is checked at t
// and at every booking inside (t, t+TokenWindow). The bookings are sorted once and the
// sum of the window ending at each of them computed once (prefix sums), so a
// reservation costs O(n log n) plus the bookings each candidate's window holds, not the
// cube of the bookings: it runs inside the limiter's workflow task.
func earliestFit(bookings []Booking, tokens, budget int, now time.Time) time.Time {
	at := make([]time.Time, len(bookings))
	for i, b := range bookings {
		at[i] = b.At
	}
	order := make([]int, len(bookings))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return at[i].Compare(at[j]) })
	sorted := make([]time.Time, len(order))
	prefix := make([]int, len(order)+1) // prefix[i]: tokens of the i earliest bookings
	for i, k := range order {
		sorted[i] = at[k]
		prefix[i+1] = prefix[i] + bookings[k].Tokens
	}
	// upTo is the number of bookings at or before x; before, the number strictly before.
	upTo := func(x time.Time) int {
		i, _ := slices.BinarySearchFunc(sorted, x, func(e, x time.Time) int {
			if e.After(x) {
				return 1
			}
			return -1
		})
		return i
	}
	before := func(x time.Time) int {
		i, _ := slices.BinarySearchFunc(sorted, x, func(e, x time.Time) int {
			if e.Before(x) {
				return -1
			}
			return 1
		})
		return i
	}
	window := func(x time.Time) int { return prefix[upTo(x)] - prefix[upTo(x.Add(-api.TokenWindow))] }
	ending := make([]int, len(sorted)) // the sum of the window ending at each booking
	for i, x := range sorted {
		ending[i] = window(x)
	}
	candidates := []time.Time{now}
	for _, x := range sorted {
		if out := x.Add(api.TokenWindow); out.After(now) {
			candidates = append(candidates, out)
		}
	}
	slices.SortFunc(candidates, func(a, b time.Time) int { return a.Compare(b) })
next:
	for _, t := range candidates {
		if window(t)+tokens > budget {
			continue
		}
		for i := upTo(t); i < before(t.Add(api.TokenWindow)); i++ {
			if ending[i]+tokens > budget {
				continue next
			}
		}
		return t
	}
	// Unreachable: after the last booking has left its window the budget is whole, and
	// tokens is at most the budget.
	return candidates[len(candidates)-1]
}

// settleTokens puts the provider's count in place of a booking's estimate; a booking
// already gone (its window passed) is left alone.
func settleTokens(bookings []Booking, s api.TokenSettleRequest) {
	if s.Tokens <= 0 {
		return
	}
	for i := range bookings {
		if bookings[i].Key == s.Key {
			bookings[i].Tokens = s.Tokens
			return
		}
	}
}

// pruneBookings drops the bookings whose window has passed: no window containing now or
// a later instant holds them.
func pruneBookings(bookings []Booking, now time.Time) []Booking {
	return slices.DeleteFunc(bookings, func(b Booking) bool {
		return !b.At.Add(api.TokenWindow).After(now)
	})
}
