package fakellm

import (
	"testing"
	"time"
)

func TestRateLimitSlidingWindow(t *testing.T) {
	l := &rateLimit{perWindow: 3, window: time.Minute}
	t0 := time.Unix(1_000_000, 0)
	for i, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		if _, ok := l.admit(t0.Add(at)); !ok {
			t.Fatalf("request %d refused within the limit", i+1)
		}
	}
	wait, ok := l.admit(t0.Add(30 * time.Second))
	if ok || wait != 30*time.Second {
		t.Errorf("4th request in the minute: ok %v, wait %s; want refused, 30s until the first leaves", ok, wait)
	}
	// The first request has left the window a minute after it arrived.
	if _, ok := l.admit(t0.Add(61 * time.Second)); !ok {
		t.Error("request after the oldest left the window refused")
	}
	if _, ok := l.admit(t0.Add(62 * time.Second)); ok {
		t.Error("request with 3 accepted in the last minute let through")
	}
	st := l.stats
	if st.Accepted != 4 || st.Rejected != 2 || st.Peak != 5 {
		t.Errorf("stats = %+v, want 4 accepted, 2 rejected, peak 5 arrivals in a minute", st)
	}
}
