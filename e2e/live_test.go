package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestSessionWatchLiveText: while a session's model call streams, `session watch` shows
// its text growing on one line, read from the call's heartbeat; when the call returns,
// the line is completed from the call's text event, so the reply shows exactly once; and
// no chunk reached history (no nexo.stream signal).
func TestSessionWatchLiveText(t *testing.T) {
	t.Parallel()
	const reply = "this reply is written slowly, word by word, for the watcher"
	model := fakellm.New(
		fakellm.Reply{Content: "hello"},
		fakellm.Reply{Content: reply, ChunkDelayMS: 250},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	p.ok("session", "prompt", "assistant", "live", "one")

	w := p.watchSession("assistant", "live")
	printed, errBuf := w.Stdout, w.Stderr
	deadline := time.Now().Add(30 * time.Second)

	prompted := make(chan result, 1)
	go func() { prompted <- p.starter("session", "prompt", "assistant", "live", "two") }()

	// Live: part of the reply on the watcher's live line while the prompt still waits.
	var partial string
	for partial == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no live text within 30 s:\n%s\nwatch stderr: %s\nworker:\n%s", printed(), errBuf(), p.output())
		}
		for _, line := range strings.Split(printed(), "\n") {
			if _, text, ok := strings.Cut(line, "#live"); ok {
				if _, text, ok = strings.Cut(text, "text: "); ok && text != "" && text != reply {
					partial = text
				}
			}
		}
		select {
		case r := <-prompted:
			if partial == "" {
				t.Fatalf("the prompt returned (%q, exit %d) before the watcher showed any live text:\n%s", r.stdout, r.code, printed())
			}
			prompted <- r
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(reply, partial) {
		t.Errorf("live text %q is not the start of the reply %q", partial, reply)
	}
	r := <-prompted
	if r.code != 0 || strings.TrimSpace(r.stdout) != reply {
		t.Fatalf("prompt: exit %d, %q (stderr %q)", r.code, r.stdout, r.stderr)
	}

	// Done: the live line completed from the text event, the reply once, then the turn's end.
	for strings.Count(printed(), "turn end") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second turn end within 30 s:\n%s", printed())
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := printed()
	if n := strings.Count(got, reply); n != 1 || !strings.Contains(got, "text: "+reply+"\n") {
		t.Errorf("the reply shows %d times, want once, whole, on its line:\n%s", n, got)
	}
	if n := strings.Count(got, "text: "); n != 2 || !strings.Contains(got, "text: hello\n") {
		t.Errorf("%d text lines, want the first turn's and the second's live line:\n%s", n, got)
	}

	// Out of history: the session's runs hold no stream signal.
	signals := 0
	it := p.dial().GetWorkflowHistory(context.Background(), api.SessionID("assistant", "live"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED &&
			ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == api.SignalStream {
			signals++
		}
	}
	if signals != 0 {
		t.Errorf("the session's history holds %d %s signals, want none: live text is not history", signals, api.SignalStream)
	}
}

// TestSessionWatchLiveThinking: while a session's model call streams its reasoning,
// `session watch` shows it growing on a `thinking:` line, read from the call's heartbeat,
// before the call ends: the fake model holds the rest of its stream (the reply's text)
// until the test has seen the whole reasoning on that line. When the call returns, its
// recorded thinking event adds nothing (the line showed it all) and its text follows on a
// line of its own: reasoning and reply each show exactly once.
func TestSessionWatchLiveThinking(t *testing.T) {
	t.Parallel()
	const thought = "the user wants a greeting, so I think about which words to use first"
	const reply = "hello again, thoughtfully"
	model := fakellm.New(
		fakellm.Reply{Content: "hello"},
		fakellm.Reply{Reasoning: thought, ChunkDelayMS: 40, Hold: "thought", Content: reply},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	p.ok("session", "prompt", "assistant", "think", "one")

	w := p.watchSession("assistant", "think")
	printed, errBuf := w.Stdout, w.Stderr
	deadline := time.Now().Add(30 * time.Second)

	prompted := make(chan result, 1)
	go func() { prompted <- p.starter("session", "prompt", "assistant", "think", "two") }()

	// Live: the reasoning grows on the watcher's thinking line while the model holds its
	// text back, so the call is surely in flight.
	var partial, whole bool
	for !whole {
		if time.Now().After(deadline) {
			t.Fatalf("the whole reasoning was not shown live within 30 s (partial %v):\n%s\nwatch stderr: %s\nworker:\n%s",
				partial, printed(), errBuf(), p.output())
		}
		for _, line := range strings.Split(printed(), "\n") {
			if _, text, ok := strings.Cut(line, "#live"); ok {
				if _, text, ok = strings.Cut(text, "thinking: "); ok && text != "" {
					if !strings.HasPrefix(thought, text) {
						t.Fatalf("live thinking %q is not the start of the reasoning %q", text, thought)
					}
					partial = partial || text != thought
					whole = text == thought
				}
			}
		}
		select {
		case r := <-prompted:
			t.Fatalf("the prompt returned (%q, exit %d) while the model held its reply:\n%s", r.stdout, r.code, printed())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if strings.Contains(printed(), reply) {
		t.Fatalf("the reply shows before the model was released:\n%s", printed())
	}
	model.Release("thought")
	r := <-prompted
	if r.code != 0 || strings.TrimSpace(r.stdout) != reply {
		t.Fatalf("prompt: exit %d, %q (stderr %q)", r.code, r.stdout, r.stderr)
	}

	// Done: the thinking event added nothing, the reply came, the turn ended.
	for strings.Count(printed(), "turn end") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second turn end within 30 s:\n%s", printed())
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := printed()
	if n := strings.Count(got, "thinking"); n != 1 || !strings.Contains(got, "thinking: "+thought+"\n") {
		t.Errorf("the reasoning shows %d times, want once, whole, on its live line:\n%s", n, got)
	}
	if n := strings.Count(got, reply); n != 1 || !strings.Contains(got, "text: "+reply+"\n") {
		t.Errorf("the reply shows %d times, want once, whole, on its line:\n%s", n, got)
	}
	if !partial {
		t.Logf("the reasoning was first seen whole (it streamed faster than the watcher read); growth is asserted in activities' tests")
	}
}

// watchSession starts `starter session watch agent instance --from 0` in the background,
// stopped when the test ends, and returns once it has replayed the session's first turn
// (and follows).
func (p *platform) watchSession(agent, instance string) *bgStarter {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := p.startStarter(ctx, "session", "watch", agent, instance, "--from", "0")
	p.t.Cleanup(func() { cancel(); _ = w.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.Stdout(), "turn end") {
		if time.Now().After(deadline) {
			p.t.Fatalf("the watcher did not replay the first turn within 30 s:\n%s\nwatch stderr: %s", w.Stdout(), w.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w
}
