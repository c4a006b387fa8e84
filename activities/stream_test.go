package activities_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/fakellm"
)

// streamed is what a streaming model call sent while it ran.
type streamed struct {
	mu sync.Mutex
	// beats are the heartbeats in order: a LiveText, or nil for one without details.
	beats   []*api.LiveText
	signals []api.StreamChunk
	to      []string
}

func (s *streamed) snapshot() ([]*api.LiveText, []api.StreamChunk, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*api.LiveText(nil), s.beats...), append([]api.StreamChunk(nil), s.signals...), append([]string(nil), s.to...)
}

// streamChat runs CompleteChat with req through Temporal's activity environment (so the
// call keeps itself alive as on a worker) against a model that streams reply, and returns
// its result and what it sent. keepAlive is the keep-alive interval.
func streamChat(t *testing.T, reply fakellm.Reply, req api.CompleteChatRequest, keepAlive time.Duration) (api.CompleteChatResult, *streamed) {
	t.Helper()
	e, _ := newModelEnv(t, activities.LLMConfig{}, reply)
	var got streamed
	activities.SetSignalStream(e.a, func(_ context.Context, wf string, c api.StreamChunk) error {
		got.mu.Lock()
		defer got.mu.Unlock()
		got.signals, got.to = append(got.signals, c), append(got.to, wf)
		return nil
	})
	// Every beat the call records, before the SDK's throttle; the test environment
	// schedules the call without a heartbeat timeout, so keepAlive is the interval.
	record := func(_ context.Context, details ...any) {
		got.mu.Lock()
		defer got.mu.Unlock()
		if len(details) == 0 {
			got.beats = append(got.beats, nil)
			return
		}
		lt, ok := details[0].(api.LiveText)
		if !ok || len(details) != 1 {
			t.Errorf("heartbeat details = %#v, want one api.LiveText", details)
			return
		}
		got.beats = append(got.beats, &lt)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	tenv := suite.NewTestActivityEnvironment()
	tenv.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&activities.KeepAlive{Every: keepAlive, Record: record}}})
	e.a.Register(tenv)
	val, err := tenv.ExecuteActivity(api.ActivityCompleteChat, req)
	if err != nil {
		t.Fatalf("ExecuteActivity(%s): %v", api.ActivityCompleteChat, err)
	}
	var res api.CompleteChatResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res, &got
}

// A live call publishes its growing text as heartbeat details and signals nothing; the
// keep-alive beats in the model's pauses resend the text instead of clearing it.
func TestCompleteChatStreamLive(t *testing.T) {
	t.Parallel()
	const content = "one two three four five"
	req := api.CompleteChatRequest{Messages: userAsks("Count"), StreamLive: true, StreamCall: "3.2",
		StreamTo: "session:a:b"} // set too: StreamLive wins, nothing reaches history
	res, got := streamChat(t, fakellm.Reply{Content: content, ChunkDelayMS: 200}, req, 25*time.Millisecond)
	if res.Message.Content != content {
		t.Errorf("content = %q, want %q", res.Message.Content, content)
	}
	beats, signals, _ := got.snapshot()
	if len(signals) > 0 {
		t.Errorf("a live call sent %d stream signals (%+v), want none", len(signals), signals)
	}
	var texts []string
	seenText, keepAlives := false, 0
	for i, b := range beats {
		if b == nil {
			if seenText {
				t.Errorf("beat %d has no details after the text was published: a keep-alive cleared the live text", i)
			}
			continue
		}
		seenText = true
		if b.Call != "3.2" || b.From != 0 || !strings.HasPrefix(content, b.Text) || b.Text == "" {
			t.Errorf("beat %d = %+v, want call 3.2, from 0, a prefix of %q", i, *b, content)
		}
		if n := len(texts); n > 0 && len(b.Text) < len(texts[n-1]) {
			t.Errorf("beat %d text %q is shorter than the one before (%q)", i, b.Text, texts[n-1])
		}
		if n := len(texts); n > 0 && b.Text == texts[n-1] {
			keepAlives++
		}
		texts = append(texts, b.Text)
	}
	distinct := map[string]bool{}
	for _, s := range texts {
		distinct[s] = true
	}
	if len(distinct) < 4 {
		t.Errorf("heartbeats carried %d distinct texts %q, want the reply growing word by word", len(distinct), texts)
	}
	if keepAlives == 0 {
		t.Errorf("no keep-alive beat resent the text in the model's 200 ms pauses (beats %q)", texts)
	}
}

// A reply longer than api.LiveTextMax is published by its tail, cut at a rune boundary,
// with From its offset in the reply.
func TestCompleteChatStreamLiveTail(t *testing.T) {
	t.Parallel()
	// 40 words of 2,501 bytes (two-byte runes), so the 64 KiB cut falls inside a rune.
	word := strings.Repeat("é", 1250) + " "
	content := strings.TrimSuffix(strings.Repeat(word, 40), " ")
	req := api.CompleteChatRequest{Messages: userAsks("Write"), StreamLive: true, StreamCall: "1.1"}
	res, got := streamChat(t, fakellm.Reply{Content: content, ChunkDelayMS: 25}, req, time.Hour)
	// Over api.TextInlineMax the reply is stored: the result names the whole of it.
	if res.Message.ContentRef != artifacts.Sum([]byte(content)) || res.Message.ContentBytes != len(content) {
		t.Fatalf("reply stored as %q, %d bytes; want the whole %d-byte reply's blob", res.Message.ContentRef, res.Message.ContentBytes, len(content))
	}
	beats, _, _ := got.snapshot()
	cut := 0
	for i, b := range beats {
		if b == nil {
			continue
		}
		end := b.From + len(b.Text)
		if len(b.Text) > api.LiveTextMax || !utf8.ValidString(b.Text) || end > len(content) || content[b.From:end] != b.Text {
			t.Fatalf("beat %d: from %d, %d bytes, valid UTF-8 %v: want at most %d bytes of the reply at its offset",
				i, b.From, len(b.Text), utf8.ValidString(b.Text), api.LiveTextMax)
		}
		if b.From > 0 {
			cut++
			if len(b.Text) < api.LiveTextMax-1 {
				t.Errorf("beat %d keeps %d bytes from %d, want the last %d less at most a partial rune", i, len(b.Text), b.From, api.LiveTextMax)
			}
		}
	}
	if cut == 0 {
		t.Errorf("no heartbeat was cut to its tail (%d beats)", len(beats))
	}
}

func TestLiveTail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", api.LiveTextMax+10)
	// "é" is two bytes: the plain cut would fall on the second byte of the first rune kept.
	odd := strings.Repeat("é", api.LiveTextMax/2+3) + "x"
	for _, tc := range []struct {
		name, text string
		from       int
	}{
		{"short", "Hello", 0},
		{"exactly the limit", long[:api.LiveTextMax], 0},
		{"over the limit", long, 10},
		{"cut inside a rune", odd, len(odd) - api.LiveTextMax + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := activities.LiveTail("2.1", tc.text)
			if got.Call != "2.1" || got.From != tc.from || got.Text != tc.text[tc.from:] {
				t.Errorf("LiveTail = call %q from %d (%d bytes), want 2.1 from %d", got.Call, got.From, len(got.Text), tc.from)
			}
			if !utf8.ValidString(got.Text) || len(got.Text) > api.LiveTextMax {
				t.Errorf("tail: %d bytes, valid UTF-8 %v", len(got.Text), utf8.ValidString(got.Text))
			}
		})
	}
}

// A call of a run recorded before live streaming (StreamTo) signals its text as before
// and publishes none as heartbeat details.
func TestCompleteChatStreamTo(t *testing.T) {
	t.Parallel()
	const content = "older runs still signal"
	req := api.CompleteChatRequest{Messages: userAsks("Hi"), StreamTo: "session:a:b", StreamCall: "1.1"}
	res, got := streamChat(t, fakellm.Reply{Content: content, ChunkDelayMS: 60}, req, 25*time.Millisecond)
	if res.Message.Content != content {
		t.Errorf("content = %q, want %q", res.Message.Content, content)
	}
	beats, signals, to := got.snapshot()
	var joined strings.Builder
	for i, c := range signals {
		if c.Call != "1.1" || c.Kind != api.StreamText || to[i] != "session:a:b" {
			t.Errorf("signal %d = %+v to %s, want a text chunk of call 1.1 to session:a:b", i, c, to[i])
		}
		joined.WriteString(c.Text)
	}
	if joined.String() != content || len(signals) < 2 {
		t.Errorf("signals carried %q in %d chunks, want %q in several", joined.String(), len(signals), content)
	}
	for i, b := range beats {
		if b != nil {
			t.Errorf("beat %d carries %+v, want no details on a StreamTo call", i, *b)
		}
	}
}

// A live call publishes the model's reasoning as it streams, before and beside the text:
// the beats' thinking grows word by word from offset 0, is all there before the first
// text, and the result still carries the whole reasoning (for the thinking event).
func TestCompleteChatStreamLiveThinking(t *testing.T) {
	t.Parallel()
	const thought = "first I read the question then I weigh it"
	const content = "here is the answer"
	for _, field := range []string{fakellm.FieldReasoningContent, fakellm.FieldReasoning} {
		t.Run(field, func(t *testing.T) {
			req := api.CompleteChatRequest{Messages: userAsks("Think"), StreamLive: true, StreamCall: "2.1"}
			res, got := streamChat(t, fakellm.Reply{Content: content, Reasoning: thought, ReasoningField: field, ChunkDelayMS: 60}, req, time.Hour)
			if res.Reasoning != thought || res.Message.Content != content {
				t.Fatalf("result reasoning %q, content %q; want %q, %q", res.Reasoning, res.Message.Content, thought, content)
			}
			beats, _, _ := got.snapshot()
			var thinkings []string
			last := ""
			for i, b := range beats {
				if b == nil {
					continue
				}
				if b.Thinking == nil {
					t.Fatalf("beat %d = %+v has no thinking, want the reasoning in every beat (it comes first)", i, *b)
				}
				th := b.Thinking
				if th.From != 0 || !strings.HasPrefix(thought, th.Text) || len(th.Text) < len(last) {
					t.Errorf("beat %d thinking from %d %q, want from 0, a growing prefix of %q", i, th.From, th.Text, thought)
				}
				if b.Text != "" && th.Text != thought {
					t.Errorf("beat %d has text %q with thinking %q: the reasoning was not whole before the text", i, b.Text, th.Text)
				}
				if th.Text != last {
					thinkings = append(thinkings, th.Text)
				}
				last = th.Text
			}
			if len(thinkings) < 4 {
				t.Errorf("heartbeats carried %d distinct thinkings %q, want the reasoning growing word by word", len(thinkings), thinkings)
			}
		})
	}
}

// A call without reasoning publishes no thinking: its heartbeats are those of a worker
// from before live thinking, byte for byte.
func TestCompleteChatStreamLiveNoThinking(t *testing.T) {
	t.Parallel()
	req := api.CompleteChatRequest{Messages: userAsks("Hi"), StreamLive: true, StreamCall: "1.1"}
	_, got := streamChat(t, fakellm.Reply{Content: "plain words only", ChunkDelayMS: 20}, req, time.Hour)
	beats, _, _ := got.snapshot()
	for i, b := range beats {
		if b != nil && b.Thinking != nil {
			t.Errorf("beat %d carries thinking %+v, want none", i, *b.Thinking)
		}
	}
}

// The thinking of a heartbeat is bounded like its text, on its own: its last
// api.LiveTextMax bytes at a rune start, with its offset.
func TestLiveSnapshot(t *testing.T) {
	t.Parallel()
	odd := strings.Repeat("é", api.LiveTextMax/2+3) + "x"
	for _, tc := range []struct {
		name, text, thinking string
		textFrom, thinkFrom  int
		none                 bool
	}{
		{name: "no reasoning", text: "Hello", none: true},
		{name: "reasoning only", thinking: "Hmm", thinkFrom: 0},
		{name: "long reasoning, short text", text: "ok", thinking: odd, thinkFrom: len(odd) - api.LiveTextMax + 1},
		{name: "both long", text: odd, thinking: odd + "yz", textFrom: len(odd) - api.LiveTextMax + 1, thinkFrom: len(odd) + 2 - api.LiveTextMax + 1}, // 9 falls inside a rune
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := activities.LiveSnapshot("2.1", tc.text, tc.thinking)
			if got.Call != "2.1" || got.From != tc.textFrom || got.Text != tc.text[tc.textFrom:] {
				t.Errorf("text part: call %q from %d (%d bytes), want 2.1 from %d", got.Call, got.From, len(got.Text), tc.textFrom)
			}
			if tc.none {
				if got.Thinking != nil {
					t.Errorf("thinking %+v, want none", *got.Thinking)
				}
				return
			}
			th := got.Thinking
			if th == nil {
				t.Fatalf("no thinking part, want the reasoning from %d", tc.thinkFrom)
			}
			if th.From != tc.thinkFrom || th.Text != tc.thinking[tc.thinkFrom:] || len(th.Text) > api.LiveTextMax || !utf8.ValidString(th.Text) {
				t.Errorf("thinking part from %d (%d bytes, valid UTF-8 %v), want from %d, the rest of %d bytes",
					th.From, len(th.Text), utf8.ValidString(th.Text), tc.thinkFrom, len(tc.thinking))
			}
		})
	}
}
