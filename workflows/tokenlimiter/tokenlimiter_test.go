package tokenlimiter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// limiterEpoch is when the limiter tests' workflow time begins.
var limiterEpoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// limiterStep is one operation on the limiter at a moment of workflow time: a reservation
// (and what it must be granted) or a settle.
type limiterStep struct {
	at       time.Duration
	key      string
	tokens   int
	settle   bool          // a settle of key with tokens, instead of a reservation
	wait     time.Duration // the reservation's expected wait
	granted  int           // the reservation's expected tokens (0: tokens)
	rejected string        // the reservation must be refused by the validator, with this in the error
}

// runLimiter runs the limiter (tpm 1000: a budget of 900 per minute) through steps, then
// cancels it; it returns the carried state when the limiter continued as new.
// start is how long after limiterEpoch the execution begins (the steps' at counts from it).
func runLimiter(t *testing.T, st State, start time.Duration, steps []limiterStep) *State {
	t.Helper()
	env := newEnv(t)
	env.SetStartTime(limiterEpoch.Add(start))
	for i, s := range steps {
		env.RegisterDelayedCallback(func() {
			if s.settle {
				env.SignalWorkflow(api.SignalTokenSettle, api.TokenSettleRequest{Key: s.key, Tokens: s.tokens})
				return
			}
			env.UpdateWorkflow(api.UpdateTokenReserve, s.key+"#"+string(rune('a'+i)), &testsuite.TestUpdateCallback{
				OnAccept: func() {
					if s.rejected != "" {
						t.Errorf("step %d (%s): reservation accepted, want it refused", i, s.key)
					}
				},
				OnReject: func(err error) {
					if s.rejected == "" || !strings.Contains(err.Error(), s.rejected) {
						t.Errorf("step %d (%s): refused with %v, want %q", i, s.key, err, s.rejected)
					}
				},
				OnComplete: func(v any, err error) {
					if s.rejected != "" {
						return
					}
					if err != nil {
						t.Errorf("step %d (%s): %v", i, s.key, err)
						return
					}
					g := v.(api.TokenGrant)
					want := s.granted
					if want == 0 {
						want = s.tokens
					}
					if g.Wait() != s.wait || g.Tokens != want {
						t.Errorf("step %d (%s at %v): granted %d tokens after %v, want %d after %v", i, s.key, s.at, g.Tokens, g.Wait(), want, s.wait)
					}
				},
			}, api.TokenReserveRequest{Key: s.key, Tokens: s.tokens, TokensPerMinute: 1000})
		}, s.at)
	}
	env.RegisterDelayedCallback(env.CancelWorkflow, 24*time.Hour)
	env.ExecuteWorkflow(api.WorkflowTokenLimiter, st)
	err := env.GetWorkflowError()
	var cae *workflow.ContinueAsNewError
	if errors.As(err, &cae) {
		if cae.WorkflowType.Name != api.WorkflowTokenLimiter {
			t.Errorf("continued as %s, want %s", cae.WorkflowType.Name, api.WorkflowTokenLimiter)
		}
		var carried State
		if err := converter.GetDefaultDataConverter().FromPayloads(cae.Input, &carried); err != nil {
			t.Fatal(err)
		}
		return &carried
	}
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want the cancellation", err)
	}
	return nil
}

// TestTokenLimiterBooksWithinTheWindow: reservations are granted at once while the window
// holds 90% of tokens_per_minute, and the first that would pass it is booked for when
// enough of the window has left it, never earlier.
func TestTokenLimiterBooksWithinTheWindow(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "a", tokens: 400},
		{at: 2 * time.Second, key: "b", tokens: 400},
		// 800 booked: 100 more fit now, 200 do not, until a leaves at 61 s.
		{at: 3 * time.Second, key: "c", tokens: 200, wait: 58 * time.Second},
		{at: 4 * time.Second, key: "d", tokens: 100},
		// The window ending at 61 s holds b, c and d (700): e waits for b to leave at 62 s;
		// f, larger, until c has left too (121 s), e alone in its window then.
		{at: 5 * time.Second, key: "e", tokens: 300, wait: 57 * time.Second},
		{at: 6 * time.Second, key: "f", tokens: 600, wait: 115 * time.Second},
	})
}

// TestTokenLimiterSlidesWithTime: a booking counts for one window only; after it, the
// whole budget is free again.
func TestTokenLimiterSlidesWithTime(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "a", tokens: 900},
		{at: 30 * time.Second, key: "b", tokens: 900, wait: 31 * time.Second},
		{at: 2 * time.Minute, key: "c", tokens: 900, wait: time.Second},     // b (61 s) is in the window until 121 s
		{at: 3*time.Minute + 2*time.Second, key: "d", tokens: 900, wait: 0}, // c left at 181 s
	})
}

// TestTokenLimiterCapsALargeRequest: a request larger than a window's budget is booked
// capped to the budget, alone in its window, instead of never being granted.
func TestTokenLimiterCapsALargeRequest(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "a", tokens: 100},
		{at: 2 * time.Second, key: "big", tokens: 5000, granted: 900, wait: 59 * time.Second},
		{at: 3 * time.Second, key: "after", tokens: 10, wait: 118 * time.Second},
	})
}

// TestTokenLimiterSameKeyKeepsItsBooking: a retried attempt of a call (the same key)
// gets the booking it has, not a second one.
func TestTokenLimiterSameKeyKeepsItsBooking(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "a", tokens: 800},
		{at: 2 * time.Second, key: "b", tokens: 500, wait: 59 * time.Second},
		{at: 10 * time.Second, key: "b", tokens: 500, wait: 51 * time.Second},
		{at: 11 * time.Second, key: "a", tokens: 800, wait: 0},
		// Had the retries booked again, the window would be over budget for c.
		{at: 12 * time.Second, key: "c", tokens: 100},
	})
}

// TestTokenLimiterSettleGivesBack: a call's settle replaces its estimate with what the
// provider counted, so the tokens it did not use are free for the next reservation.
func TestTokenLimiterSettleGivesBack(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "a", tokens: 800},
		{at: 2 * time.Second, key: "b", tokens: 500, wait: 59 * time.Second},
		{at: 3 * time.Second, key: "a", tokens: 150, settle: true},
		// Unsettled, a's 800 would leave 100 now; settled, c gets 400 at once (the most
		// the window ending at 61 s, with b's 500, can take).
		{at: 4 * time.Second, key: "c", tokens: 400},
		// The window ending at 61 s is full (b, c): d waits for c to leave at 64 s.
		{at: 5 * time.Second, key: "d", tokens: 1, wait: 59 * time.Second},
		// A settle for a booking the limiter no longer holds, or of no tokens, changes nothing.
		{at: 6 * time.Second, key: "gone", tokens: 900, settle: true},
		{at: 6 * time.Second, key: "c", tokens: 0, settle: true},
		{at: 7 * time.Second, key: "e", tokens: 399, wait: 57 * time.Second},
	})
}

// TestTokenLimiterMovesAWaitingBookingEarlier: a call waiting for its booking asks again
// with its key; once a settle gave back enough, its booking moves to now. A booking never
// moves later.
func TestTokenLimiterMovesAWaitingBookingEarlier(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "a", tokens: 800},
		{at: 2 * time.Second, key: "b", tokens: 500, wait: 59 * time.Second},
		{at: 3 * time.Second, key: "c", tokens: 500, wait: 118 * time.Second},
		{at: 5 * time.Second, key: "b", tokens: 500, wait: 56 * time.Second}, // nothing given back yet
		{at: 6 * time.Second, key: "a", tokens: 100, settle: true},
		{at: 7 * time.Second, key: "b", tokens: 500, wait: 0},
		// c's window (from 121 s) no longer holds b: it may go when b's window ends at 67 s.
		{at: 8 * time.Second, key: "c", tokens: 500, wait: 59 * time.Second},
	})
}

// TestTokenLimiterRefusesBadReservations: the validator refuses a reservation with no
// key, no tokens or no limit, before it reaches the history.
func TestTokenLimiterRefusesBadReservations(t *testing.T) {
	t.Parallel()
	runLimiter(t, State{}, 0, []limiterStep{
		{at: time.Second, key: "", tokens: 10, rejected: "key is empty"},
		{at: 2 * time.Second, key: "a", tokens: 0, rejected: "want a positive estimate"},
		{at: 3 * time.Second, key: "b", tokens: -5, rejected: "want a positive estimate"},
		{at: 4 * time.Second, key: "ok", tokens: 900},
	})
	env := newEnv(t)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateTokenReserve, "nolimit", &testsuite.TestUpdateCallback{
			OnAccept: func() { t.Error("a reservation with tokens_per_minute 0 was accepted") },
			OnReject: func(err error) {
				if !strings.Contains(err.Error(), "tokens_per_minute 0") {
					t.Errorf("refused with %v, want it to name tokens_per_minute", err)
				}
			},
			OnComplete: func(any, error) {},
		}, api.TokenReserveRequest{Key: "k", Tokens: 5})
	}, time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(api.WorkflowTokenLimiter, State{})
}

// TestTokenLimiterContinuesAsNewWithItsWindow: after its limit of operations the limiter
// continues as new carrying the bookings of the window (settled counts included) and the
// future ones, without those whose window has passed; a settle delivered with the last
// operation is not lost.
func TestTokenLimiterContinuesAsNewWithItsWindow(t *testing.T) {
	t.Parallel()
	st := runLimiter(t, State{ContinueAfter: 5}, 0, []limiterStep{
		{at: time.Second, key: "old", tokens: 100},
		{at: 2 * time.Minute, key: "a", tokens: 700},
		{at: 2*time.Minute + time.Second, key: "b", tokens: 400, wait: 59 * time.Second},
		{at: 2*time.Minute + 2*time.Second, key: "a", tokens: 300, settle: true},
		{at: 2*time.Minute + 3*time.Second, key: "c", tokens: 200},
	})
	if st == nil {
		t.Fatal("the limiter did not continue as new")
	}
	if st.ContinueAfter != 5 || st.TokensPerMinute != 1000 {
		t.Errorf("carried limit %d, continue_after %d; want 1000 and 5", st.TokensPerMinute, st.ContinueAfter)
	}
	got := map[string]int{}
	for _, b := range st.Bookings {
		got[b.Key] = b.Tokens
	}
	if len(got) != 3 || got["a"] != 300 || got["b"] != 400 || got["c"] != 200 {
		t.Fatalf("carried bookings %+v, want a 300 (settled), b 400, c 200, and not old", st.Bookings)
	}
	// The next execution goes on from the carried window: b, asking again, fits now
	// that a is settled (a 300, c 200, b 400 make 900)...
	runLimiter(t, *st, 2*time.Minute+3*time.Second, []limiterStep{
		{at: time.Second, key: "b", tokens: 400, wait: 0},
		// ...and d, at 125 s, waits for c to leave at 183 s (the window ending at 180 s
		// holds b and c).
		{at: 2 * time.Second, key: "d", tokens: 400, wait: 58 * time.Second},
	})
}

// naiveEarliestFit is earliestFit by its definition: every candidate checked against every
// window that contains it, each summed afresh. The test holds earliestFit to it.
func naiveEarliestFit(bookings []Booking, tokens, budget int, now time.Time) time.Time {
	sum := func(at time.Time) int {
		s := tokens
		for _, b := range bookings {
			if b.At.After(at.Add(-api.TokenWindow)) && !b.At.After(at) {
				s += b.Tokens
			}
		}
		return s
	}
	candidates := []time.Time{now}
	for _, b := range bookings {
		if out := b.At.Add(api.TokenWindow); out.After(now) {
			candidates = append(candidates, out)
		}
	}
	slices.SortFunc(candidates, func(a, b time.Time) int { return a.Compare(b) })
next:
	for _, t := range candidates {
		if sum(t) > budget {
			continue
		}
		for _, b := range bookings {
			if b.At.After(t) && b.At.Before(t.Add(api.TokenWindow)) && sum(b.At) > budget {
				continue next
			}
		}
		return t
	}
	return candidates[len(candidates)-1]
}

// randomBookings are n bookings over the last window and the next two, on whole
// seconds (so that bookings meet window edges exactly, where off-by-one errors live).
func randomBookings(r *rand.Rand, n, budget int, now time.Time) []Booking {
	out := make([]Booking, n)
	for i := range out {
		out[i] = Booking{Key: fmt.Sprint(i), At: now.Add(time.Duration(r.IntN(180)-60) * time.Second),
			Tokens: 1 + r.IntN(budget/4)}
	}
	return out
}

func TestEarliestFitMatchesItsDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	now := limiterEpoch
	for trial := range 3000 {
		budget := 100 + r.IntN(1000)
		bookings := randomBookings(r, r.IntN(30), budget, now)
		tokens := 1 + r.IntN(budget)
		if got, want := earliestFit(bookings, tokens, budget, now), naiveEarliestFit(bookings, tokens, budget, now); !got.Equal(want) {
			t.Fatalf("trial %d: earliestFit(%d tokens, budget %d) = %s, want %s; bookings %+v", trial, tokens, budget,
				got.Sub(now), want.Sub(now), bookings)
		}
	}
}

// BenchmarkEarliestFit: one reservation against a full book, as a busy endpoint's limiter
// holds it (the limiter refuses past tokenLimiterMaxBookings). It runs in a workflow task.
func BenchmarkEarliestFit(b *testing.B) {
	for _, n := range []int{100, 1000, tokenLimiterMaxBookings} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			now := limiterEpoch
			bookings := randomBookings(r, n, 1_000_000, now)
			for b.Loop() {
				earliestFit(bookings, 500, 1_000_000, now)
			}
		})
	}
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: api.WorkflowTokenLimiter})
	return env
}
