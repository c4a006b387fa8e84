package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A scripted reply's reasoning goes out under the field it names, whole in a reply and
// word by word before the content in a stream.
func TestReasoningReplies(t *testing.T) {
	for _, field := range []string{"", FieldReasoning} {
		url := New(Reply{Content: "hi", Reasoning: "one two", ReasoningField: field}).Start(t)
		want := field
		if want == "" {
			want = FieldReasoningContent
		}
		post := func(stream bool) string {
			body, _ := json.Marshal(map[string]any{"model": "m", "stream": stream, "messages": []map[string]any{{"role": "user", "content": "x"}}})
			resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		var reply struct {
			Choices []struct{ Message map[string]any } `json:"choices"`
		}
		if err := json.Unmarshal([]byte(post(false)), &reply); err != nil || len(reply.Choices) != 1 || reply.Choices[0].Message[want] != "one two" {
			t.Errorf("field %q: reply %+v (%v), want %s: one two", field, reply, err, want)
		}
		s := post(true)
		first, second, content := strings.Index(s, `"`+want+`":"one "`), strings.Index(s, `"`+want+`":"two"`), strings.Index(s, `"content":"hi"`)
		if first < 0 || second < first || content < second {
			t.Errorf("field %q: stream does not send the reasoning word by word before the content:\n%s", field, s)
		}
	}
}

// A reply with Hold streams its reasoning, then waits for the hold's release (here by
// POST /fake/release) before its content; a reply after the release does not wait.
func TestHoldAfterReasoning(t *testing.T) {
	srv := New(Reply{Content: "the answer", Reasoning: "let me think", Hold: "h", ChunkDelayMS: 5})
	url := srv.Start(t)
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": []map[string]any{{"role": "user", "content": "x"}}})
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended early")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no stream line within 10 s")
		}
		return ""
	}
	for l := next(); !strings.Contains(l, `"reasoning_content":"think"`); l = next() {
		if strings.Contains(l, `"content":"the`) {
			t.Fatalf("content %s came before the reasoning ended", l)
		}
	}
	// Held: no content while the hold is closed (a window, since nothing else can say
	// that a chunk is not coming).
	window := time.After(300 * time.Millisecond)
held:
	for {
		select {
		case l := <-lines:
			if l != "" {
				t.Fatalf("the held stream went on with %q before the release", l)
			}
		case <-window:
			break held
		}
	}
	base := strings.TrimSuffix(url, "/v1")
	if r, err := http.Post(base+"/fake/release", "", nil); err != nil || r.StatusCode != http.StatusBadRequest {
		t.Errorf("release without a hold name: %v %v, want 400", r.StatusCode, err)
	}
	if r, err := http.Post(base+"/fake/release?hold=h", "", nil); err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("release: %v %v, want 204", r, err)
	}
	for l := next(); !strings.Contains(l, `"content":"answer"`); l = next() {
	}
	// Released for good: the same reply (a retry) streams through.
	resp2, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if !strings.Contains(string(b), `"content":"answer"`) {
		t.Errorf("a reply after the release: %s, want its content", b)
	}
}
