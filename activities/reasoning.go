package activities

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// Reasoning output. OpenAI-compatible servers send a reply's reasoning in one of two
// fields: reasoning_content (DeepSeek, vLLM before 0.10), which go-openai decodes, or
// reasoning (Ollama, vLLM since 0.10, OpenRouter), which it does not. reasoningTransport
// copies reasoning into reasoning_content in replies and stream chunks that carry only the
// former, so one field serves both.

// reasoningTransport rewrites chat-completion answers (JSON or an SSE stream) so a
// choice's message or delta that has "reasoning" and no "reasoning_content" gets the same
// text under reasoning_content. Anything else passes byte for byte.
type reasoningTransport struct{ base http.RoundTripper }

func (t reasoningTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		return resp, err
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &sseReasoning{r: bufio.NewReader(resp.Body), c: resp.Body}
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read chat completion: %w", err)
		}
		b = withReasoningContent(b)
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// sseReasoning rewrites an event stream line by line ("data: {...}").
type sseReasoning struct {
	r   *bufio.Reader
	c   io.Closer
	buf []byte
	err error
}

func (s *sseReasoning) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		line, err := s.r.ReadBytes('\n')
		s.err = err
		if rest, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			body := bytes.TrimRight(rest, "\r\n")
			out := withReasoningContent(body)
			if len(out) != len(body) {
				line = append(append([]byte("data: "), out...), rest[len(body):]...)
			}
		}
		s.buf = line
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func (s *sseReasoning) Close() error { return s.c.Close() }

// withReasoningContent returns b with reasoning copied to reasoning_content in every
// choice's message and delta that lacks it; b itself when there is nothing to copy or it
// is not such JSON.
func withReasoningContent(b []byte) []byte {
	if !bytes.Contains(b, []byte(`"reasoning"`)) {
		return b
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return b
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(top["choices"], &choices) != nil {
		return b
	}
	changed := false
	for _, ch := range choices {
		for _, key := range []string{"message", "delta"} {
			var m map[string]json.RawMessage
			if json.Unmarshal(ch[key], &m) != nil || m == nil {
				continue
			}
			r, ok := m["reasoning"]
			if _, has := m["reasoning_content"]; !ok || has {
				continue
			}
			var text string
			if json.Unmarshal(r, &text) != nil {
				continue // not a string (some servers send an object): nothing we can show
			}
			m["reasoning_content"] = r
			ch[key], _ = json.Marshal(m)
			changed = true
		}
	}
	if !changed {
		return b
	}
	top["choices"], _ = json.Marshal(choices)
	out, err := json.Marshal(top)
	if err != nil {
		return b
	}
	return out
}

// offloadReasoning stores reasoning over api.ReasoningInlineMax as a blob and leaves a
// preview in the result: the result is recorded in history, which holds references, not
// bulk.
func (a *Model) offloadReasoning(ctx context.Context, out api.CompleteChatResult) (api.CompleteChatResult, error) {
	if len(out.Reasoning) <= api.ReasoningInlineMax {
		return out, nil
	}
	var err error
	out.Reasoning, out.ReasoningRef, out.ReasoningBytes, err = a.out.putPreviewed(ctx, out.Reasoning, "reasoning", reasoningPreview)
	return out, err
}

// reasoningPreview is the start of stored reasoning, at most api.PreviewBytes, with a note
// of the whole size.
func reasoningPreview(text string, size int) string {
	return strings.TrimRight(api.PreviewHead(text), "\n") + fmt.Sprintf("\n[… %d bytes of reasoning in all]", size)
}

// offloadReply stores a reply text over api.TextInlineMax as a blob and leaves a preview
// in the result's message (ContentRef, ContentBytes): the result is recorded in history,
// and the reply becomes a text event, so both hold the reference, not the text. The next
// model call gets the whole text back (resolve), and so does every reader of the events.
// A call that streams its text by signal (StreamTo: sessions from before threads were
// stored) keeps the reply inline: its text events are those chunks, and the workflow
// records only what they missed.
func (a *Model) offloadReply(ctx context.Context, req api.CompleteChatRequest, out api.CompleteChatResult) (api.CompleteChatResult, error) {
	m := &out.Message
	if len(m.Content) <= api.TextInlineMax || m.ContentRef != "" || req.StreamTo != "" {
		return out, nil
	}
	var err error
	if req.KeepReply {
		// A typed reply stays whole for the workflow's check; its events carry the
		// reference, as any long reply's do.
		sum, err := a.out.store.PutBlob(ctx, []byte(m.Content))
		if err != nil {
			return out, fmt.Errorf("store reply text (%d bytes): %w", len(m.Content), err)
		}
		m.ContentRef, m.ContentBytes = sum, len(m.Content)
		return out, nil
	}
	m.Content, m.ContentRef, m.ContentBytes, err = a.out.putPreviewed(ctx, m.Content, "reply text", textPreview)
	return out, err
}

// textPreview is the start of a stored reply text, at most api.PreviewBytes, with a note
// of the whole size, for a reader that cannot reach the store.
func textPreview(text string, size int) string {
	return strings.TrimRight(api.PreviewHead(text), "\n") + fmt.Sprintf("\n[… %d bytes of text in all]", size)
}
