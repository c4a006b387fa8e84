package activities

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/api"
)

// streamFlushEvery paces streamed text: the first text goes out at once (a watcher sees
// the model start), later text at most this often, so a long reply costs a handful of
// signals (history events) or heartbeats rather than one per token.
const streamFlushEvery = 150 * time.Millisecond

// completeStreaming asks for a streamed completion, hands its text to the request's
// viewers as it arrives, and returns the whole message like CompleteChat:
//   - StreamLive: the reply's text and reasoning so far are the attempt's heartbeat
//     details (api.LiveText), which followers read from the server's pending-activity
//     info; nothing of them reaches history (the workflow records the whole text once,
//     and the reasoning once, as the call's thinking);
//   - StreamTo (runs recorded before live streaming): new text is signalled
//     (api.SignalStream) to that workflow, which records each chunk as an event; their
//     reasoning is recorded with the result only, as it always was.
//
// StreamLive wins when both are set. Streaming is best effort: a heartbeat or signal that
// fails costs a viewer some text, never the call, and the text still arrives with the
// result.
func (a *Model) completeStreaming(ctx context.Context, model string, creq openai.ChatCompletionRequest, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := a.clientFor(req.Endpoint).CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return api.CompleteChatResult{}, classifyModelError(model, err, retryAfterOf(ctx))
	}
	defer stream.Close()
	var sink textSink
	if req.StreamLive {
		live := startLiveText(ctx, req.StreamCall)
		defer live.stop()
		sink = live
	} else {
		sink = &signalText{ctx: ctx, to: req.StreamTo, call: req.StreamCall, signal: a.signalStream}
	}
	var (
		content   strings.Builder
		reasoning strings.Builder
		calls     []api.ToolCall
		out       api.CompleteChatResult
	)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return api.CompleteChatResult{}, classifyModelError(model, err, retryAfterOf(ctx))
		}
		if resp.Model != "" {
			out.Model = resp.Model
		}
		if resp.Usage != nil {
			out.Usage = api.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, TotalTokens: resp.Usage.TotalTokens}
		}
		for _, ch := range resp.Choices {
			if ch.FinishReason != "" {
				out.FinishReason = string(ch.FinishReason)
			}
			if ch.Delta.ReasoningContent != "" {
				reasoning.WriteString(ch.Delta.ReasoningContent)
				sink.think(ch.Delta.ReasoningContent)
			}
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				sink.add(ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				i := len(calls)
				if tc.Index != nil {
					i = *tc.Index
				}
				for len(calls) <= i {
					calls = append(calls, api.ToolCall{})
				}
				if tc.ID != "" {
					calls[i].ID = tc.ID
				}
				calls[i].Name += tc.Function.Name
				calls[i].Arguments += tc.Function.Arguments
			}
		}
		sink.received()
	}
	sink.done()
	out.Message = api.ChatMessage{Role: api.RoleAssistant, Content: content.String(), ToolCalls: calls}
	out.Reasoning = reasoning.String()
	return out, nil
}

// textSink is where a streaming call hands its text as the model writes it.
type textSink interface {
	// add takes new text of the reply.
	add(text string)
	// think takes new reasoning of the reply.
	think(text string)
	// received says one stream message was handled.
	received()
	// done says the reply is complete.
	done()
}

// signalText signals new text to the workflow StreamTo (the stream of runs recorded before
// live streaming), after each stream message that comes streamFlushEvery after the last
// signal, and at the end.
type signalText struct {
	ctx       context.Context
	to, call  string
	signal    func(ctx context.Context, workflowID string, chunk api.StreamChunk) error
	pending   strings.Builder
	lastFlush time.Time
	sent      bool
}

func (s *signalText) add(text string) { s.pending.WriteString(text) }

// think drops reasoning: runs recorded before live streaming never had it signalled, and
// a signal is an event their histories do not expect.
func (s *signalText) think(string) {}

func (s *signalText) received() {
	if !s.sent || time.Since(s.lastFlush) >= streamFlushEvery {
		s.flush()
	}
}

func (s *signalText) done() { s.flush() }

func (s *signalText) flush() {
	if s.pending.Len() == 0 {
		return
	}
	chunk := api.StreamChunk{Call: s.call, Kind: api.StreamText, Text: s.pending.String()}
	s.pending.Reset()
	s.lastFlush = time.Now()
	s.sent = true
	if err := s.signal(s.ctx, s.to, chunk); err != nil {
		activity.GetLogger(s.ctx).Warn("stream chunk not delivered", "workflow", s.to, "error", err)
	}
}

// signalChunk sends one chunk to the workflow that streams the call (Model.signalStream
// unless a test sets another).
func signalChunk(ctx context.Context, workflowID string, chunk api.StreamChunk) error {
	return activity.GetClient(ctx).SignalWorkflow(ctx, workflowID, "", api.SignalStream, chunk)
}

// liveText publishes the reply's text and reasoning so far as the attempt's heartbeat
// details: the first of them at once, then at most every streamFlushEvery, from a
// goroutine of its own so the model's stream is read on while a heartbeat goes to the
// server. What comes after the last beat is not published: the call is over, and its
// result carries it.
type liveText struct {
	ctx  context.Context
	call string

	mu       sync.Mutex
	text     strings.Builder
	thinking strings.Builder

	kick    chan struct{} // there is new text (buffered: one pending kick is enough)
	quit    chan struct{}
	stopped chan struct{}
}

func startLiveText(ctx context.Context, call string) *liveText {
	l := &liveText{ctx: ctx, call: call, kick: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	go l.run()
	return l
}

func (l *liveText) add(text string) { l.write(&l.text, text) }

func (l *liveText) think(text string) { l.write(&l.thinking, text) }

func (l *liveText) write(b *strings.Builder, text string) {
	l.mu.Lock()
	b.WriteString(text)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *liveText) received() {}

func (l *liveText) done() {}

// stop ends the publishing and waits for a beat in progress, so none is sent after the
// call returned.
func (l *liveText) stop() {
	close(l.quit)
	<-l.stopped
}

func (l *liveText) run() {
	defer close(l.stopped)
	sent, thought := 0, 0 // lengths of the text and the reasoning at the last beat
	for {
		select {
		case <-l.kick:
		case <-l.quit:
			return
		case <-l.ctx.Done():
			return
		}
		l.mu.Lock()
		text, thinking := l.text.String(), l.thinking.String() // a Builder's earlier strings stay valid as it grows
		l.mu.Unlock()
		if len(text) > sent || len(thinking) > thought {
			publishHeartbeat(l.ctx, liveSnapshot(l.call, text, thinking))
			sent, thought = len(text), len(thinking)
		}
		select {
		case <-time.After(streamFlushEvery):
		case <-l.quit:
			return
		case <-l.ctx.Done():
			return
		}
	}
}

// liveTail is the LiveText of a reply whose text so far is text: at most its last
// api.LiveTextMax bytes, cut at a rune boundary, so a heartbeat stays small however long
// the reply grows (a follower that joins late misses the start, which the durable text
// event carries).
func liveTail(call, text string) api.LiveText {
	from := tailFrom(text)
	return api.LiveText{Call: call, From: from, Text: text[from:]}
}

// liveSnapshot is liveTail with the reasoning so far, cut by the same rule on its own,
// as LiveText.Thinking (nil without reasoning: a heartbeat as before live thinking).
func liveSnapshot(call, text, thinking string) api.LiveText {
	lt := liveTail(call, text)
	if thinking != "" {
		from := tailFrom(thinking)
		lt.Thinking = &api.LiveThinking{From: from, Text: thinking[from:]}
	}
	return lt
}

// tailFrom is where the last api.LiveTextMax bytes of s begin, moved on to a rune start.
func tailFrom(s string) int {
	from := 0
	if len(s) > api.LiveTextMax {
		from = len(s) - api.LiveTextMax
		for from < len(s) && !utf8.RuneStart(s[from]) {
			from++
		}
	}
	return from
}
