package fakellm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestTokenLimitSlidingWindow(t *testing.T) {
	l := &tokenLimit{perWindow: 1000, window: time.Minute}
	t0 := time.Unix(1_000_000, 0)
	for i, c := range []struct {
		at     time.Duration
		tokens int
	}{{0, 400}, {10 * time.Second, 300}, {20 * time.Second, 300}} {
		if _, ok := l.admit(t0.Add(c.at), c.tokens); !ok {
			t.Fatalf("request %d refused within the limit", i+1)
		}
	}
	// 1000 served: 500 more fit once the first two (700) have left, at 70 s.
	wait, ok := l.admit(t0.Add(30*time.Second), 500)
	if ok || wait != 40*time.Second {
		t.Errorf("500 more in the minute: ok %v, wait %s; want refused, 40s until 400 and 300 have left", ok, wait)
	}
	if _, ok := l.admit(t0.Add(61*time.Second), 400); !ok {
		t.Error("400 after the first 400 left the window refused")
	}
	if _, ok := l.admit(t0.Add(62*time.Second), 1); ok {
		t.Error("a request over the limit within the last minute let through")
	}
	if wait, ok := l.admit(t0.Add(63*time.Second), 5000); ok || wait != time.Minute {
		t.Errorf("a request over the whole limit: ok %v, wait %s; want refused, a window", ok, wait)
	}
	st := l.stats
	if st.Accepted != 4 || st.Rejected != 3 || st.Tokens != 1400 || st.Peak != 1000 {
		t.Errorf("stats = %+v, want 4 accepted, 3 rejected, 1400 tokens, peak 1000", st)
	}
}

// The server charges a request the usage its reply reports; a refused request gets 429
// with Retry-After and takes no reply.
func TestTokenLimitedServer(t *testing.T) {
	s := New(Reply{Content: strings.Repeat("a", 400)}, Reply{Content: "second"})
	s.Index = BySequence
	s.LimitTokens(250, time.Minute)
	url := s.Start(t)
	post := func(content string) (int, string, int) {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{msg("user", content)}})
		resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage struct {
				Total int `json:"total_tokens"`
			} `json:"usage"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		c := ""
		if len(out.Choices) > 0 {
			c = out.Choices[0].Message.Content
		}
		if resp.StatusCode != http.StatusOK {
			c = resp.Header.Get("Retry-After")
		}
		return resp.StatusCode, c, out.Usage.Total
	}
	// 400 bytes of prompt (100 tokens) and 400 of reply (100): 200 tokens.
	status, _, total := post(strings.Repeat("p", 400))
	if status != http.StatusOK || total != 200 {
		t.Fatalf("first request: %d with %d tokens, want 200 OK with 200", status, total)
	}
	// 400 more bytes of prompt would pass 250 within the minute.
	status, retry, _ := post(strings.Repeat("q", 400))
	if status != http.StatusTooManyRequests || retry != "60" {
		t.Errorf("second request: %d, Retry-After %q; want 429 after 60", status, retry)
	}
	// A small one fits, and gets the reply the refused one did not take.
	status, content, total := post("hi")
	if status != http.StatusOK || content != "second" || total != 1 {
		t.Errorf("third request: %d %q with %d tokens, want 200 \"second\" with 1 (6 bytes of reply)", status, content, total)
	}
	st := s.TokenStats()
	if st.Accepted != 2 || st.Rejected != 1 || st.Tokens != 201 || len(s.Sizes()) != 2 {
		t.Errorf("stats %+v with %d requests recorded, want 2 accepted (201 tokens), 1 rejected, 2 recorded", st, len(s.Sizes()))
	}
}
