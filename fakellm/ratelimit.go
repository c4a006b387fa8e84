package fakellm

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateStats is what a rate-limited server saw (LimitRate).
type RateStats struct {
	// Accepted counts the requests the limit let through, Rejected the 429s sent.
	Accepted, Rejected int
	// Peak is the most requests (accepted or not) that arrived within one window.
	Peak int
	// First and Last are when the first and the last request arrived.
	First, Last time.Time
}

// rateLimit answers 429 with Retry-After to a request that finds perWindow requests
// accepted within the last window (a sliding window, as providers count a minute).
type rateLimit struct {
	perWindow int
	window    time.Duration

	mu       sync.Mutex
	accepted []time.Time // within the window, oldest first
	arrived  []time.Time // within the window, oldest first (for Peak)
	stats    RateStats
}

// LimitRate makes the server a rate-limited provider: a request arriving when perWindow
// requests were accepted within the last window is answered 429 with a Retry-After (in
// whole seconds) saying when the oldest of them leaves the window. A 429 is not counted
// against the limit and does not consume a scripted reply. Call it before the first
// request; perWindow 0 turns the limit off.
func (s *Server) LimitRate(perWindow int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perWindow <= 0 {
		s.limit = nil
		return
	}
	s.limit = &rateLimit{perWindow: perWindow, window: window}
}

// RateStats returns what the rate limit saw so far (zero without LimitRate).
func (s *Server) RateStats() RateStats {
	s.mu.Lock()
	l := s.limit
	s.mu.Unlock()
	if l == nil {
		return RateStats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// limited answers w with 429 when the rate limit is reached and reports whether it did.
func (s *Server) limited(w http.ResponseWriter) bool {
	s.mu.Lock()
	l := s.limit
	s.mu.Unlock()
	if l == nil {
		return false
	}
	wait, ok := l.admit(time.Now())
	if ok {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	writeError(w, http.StatusTooManyRequests, "fake model: rate limit reached ("+strconv.Itoa(l.perWindow)+" requests per "+l.window.String()+")")
	return true
}

// admit records a request arriving at now and says whether it is within the limit, or
// how long until it would be.
func (l *rateLimit) admit(now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	since := now.Add(-l.window)
	l.accepted = dropBefore(l.accepted, since)
	l.arrived = append(dropBefore(l.arrived, since), now)
	if l.stats.First.IsZero() {
		l.stats.First = now
	}
	l.stats.Last = now
	l.stats.Peak = max(l.stats.Peak, len(l.arrived))
	if len(l.accepted) >= l.perWindow {
		l.stats.Rejected++
		return max(l.accepted[0].Sub(since), time.Second), false
	}
	l.accepted = append(l.accepted, now)
	l.stats.Accepted++
	return 0, true
}

// dropBefore removes the times before t from the front of ts (oldest first).
func dropBefore(ts []time.Time, t time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(t) {
		i++
	}
	return ts[i:]
}
