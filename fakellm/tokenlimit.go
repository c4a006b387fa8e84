package fakellm

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// TokenStats is what a token-limited server saw (LimitTokens).
type TokenStats struct {
	// Accepted counts the requests the limit let through, Rejected the 429s sent.
	Accepted, Rejected int
	// Tokens is the usage (prompt + completion) reported for the accepted requests.
	Tokens int
	// Peak is the most tokens served within one window.
	Peak int
	// First and Last are when the first and the last request arrived.
	First, Last time.Time
}

// tokenLimit answers 429 with Retry-After to a request whose usage would bring the
// tokens served within the last window over perWindow (a sliding window, as providers
// count a minute).
type tokenLimit struct {
	perWindow int
	window    time.Duration

	mu     sync.Mutex
	served []servedTokens // within the window, oldest first
	stats  TokenStats
}

type servedTokens struct {
	at     time.Time
	tokens int
}

// LimitTokens makes the server a token-limited provider: a request whose usage, as the
// reply reports it (prompt_tokens + completion_tokens), would bring the tokens served
// within the last window over perWindow is answered 429 with a Retry-After (whole
// seconds) saying when enough of them have left the window. A 429 is not counted against
// the limit and does not consume a scripted reply. Call it before the first request;
// perWindow 0 turns the limit off. It works beside LimitRate.
func (s *Server) LimitTokens(perWindow int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perWindow <= 0 {
		s.tokenLimit = nil
		return
	}
	s.tokenLimit = &tokenLimit{perWindow: perWindow, window: window}
}

// TokenStats returns what the token limit saw so far (zero without LimitTokens).
func (s *Server) TokenStats() TokenStats {
	s.mu.Lock()
	l := s.tokenLimit
	s.mu.Unlock()
	if l == nil {
		return TokenStats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// tokensLimited answers w with 429 when usage does not fit the token limit at now and
// reports whether it did. Called with s.mu held.
func (s *Server) tokensLimited(w http.ResponseWriter, usage int, now time.Time) bool {
	l := s.tokenLimit
	if l == nil {
		return false
	}
	wait, ok := l.admit(now, usage)
	if ok {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	writeError(w, http.StatusTooManyRequests, "fake model: token rate limit reached ("+strconv.Itoa(l.perWindow)+" tokens per "+l.window.String()+
		", this request "+strconv.Itoa(usage)+")")
	return true
}

// admit records a request of usage tokens arriving at now and says whether it fits, or
// how long until it would (a request larger than the whole limit never does: a window).
func (l *tokenLimit) admit(now time.Time, usage int) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	since := now.Add(-l.window)
	i := 0
	for i < len(l.served) && !l.served[i].at.After(since) {
		i++
	}
	l.served = l.served[i:]
	if l.stats.First.IsZero() {
		l.stats.First = now
	}
	l.stats.Last = now
	used := 0
	for _, s := range l.served {
		used += s.tokens
	}
	if used+usage > l.perWindow {
		l.stats.Rejected++
		if usage > l.perWindow {
			return l.window, false
		}
		// Wait for the oldest to leave until the rest and this request fit.
		for _, s := range l.served {
			used -= s.tokens
			if used+usage <= l.perWindow {
				return max(s.at.Sub(since), time.Second), false
			}
		}
		return l.window, false
	}
	l.served = append(l.served, servedTokens{at: now, tokens: usage})
	l.stats.Accepted++
	l.stats.Tokens += usage
	l.stats.Peak = max(l.stats.Peak, used+usage)
	return 0, true
}
