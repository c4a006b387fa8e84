// Package fakellm is an OpenAI-compatible chat completions server that replays a script:
// the tests' model, and the model of the offline example. No test needs a network or a
// key.
//
// Reply N of the script answers every request whose thread already holds N assistant
// messages, so a retried request (a worker killed mid-call, a Temporal retry) gets the
// same reply, exactly as replay expects of a deterministic model.
package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"
)

// Reply is one scripted answer.
type Reply struct {
	// Content is the assistant's text.
	Content string `json:"content,omitempty"`
	// ToolCalls the assistant makes (several at once are fine).
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// Status, when set, answers with this HTTP error status and Error as the message.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// DelayMS holds the first request for this reply this long (a slow model, to kill a
	// worker mid-call); retries answer at once.
	DelayMS int `json:"delay_ms,omitempty"`
	// FailTimes answers the first n requests for this reply with Status (a transient
	// error), then with the reply.
	FailTimes int `json:"fail_times,omitempty"`
	// ChunkDelayMS spaces the chunks of a streamed reply (the content is streamed word by
	// word when the request asks for a stream).
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
}

// Call is a scripted tool call; Arguments is any JSON value (usually an object).
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Request is what the server received, for assertions.
type Request struct {
	Model    string           `json:"model"`
	Messages []map[string]any `json:"messages"`
	Tools    []map[string]any `json:"tools"`
	Auth     string           `json:"-"`
}

// Server replays a script.
type Server struct {
	mu       sync.Mutex
	script   []Reply
	requests []Request
	seen     map[int]int // reply index → requests answered
}

// New returns a server for script.
func New(script ...Reply) *Server {
	return &Server{script: script, seen: map[int]int{}}
}

// Load reads a JSON script file (an array of Reply).
func Load(path string) (*Server, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	var script []Reply
	if err := json.Unmarshal(b, &script); err != nil {
		return nil, fmt.Errorf("parse script %s: %w", path, err)
	}
	return New(script...), nil
}

// Start serves on a loopback port until the test ends and returns the base URL (…/v1).
func (s *Server) Start(t interface{ Cleanup(func()) }) string {
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

// Requests returns a copy of what was received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

type wireReq struct {
	Model    string           `json:"model"`
	Messages []map[string]any `json:"messages"`
	Tools    []map[string]any `json:"tools"`
	Stream   bool             `json:"stream"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "fake_error"}})
}

// ServeHTTP answers POST /v1/chat/completions.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "fake model serves only POST /v1/chat/completions")
		return
	}
	var req wireReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "fake model: bad request body: "+err.Error())
		return
	}
	idx := 0
	for _, m := range req.Messages {
		if m["role"] == "assistant" {
			idx++
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Model: req.Model, Messages: req.Messages, Tools: req.Tools, Auth: r.Header.Get("Authorization")})
	n := s.seen[idx]
	s.seen[idx]++
	var reply Reply
	ok := idx < len(s.script)
	if ok {
		reply = s.script[idx]
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("fake model: the script has no reply %d (it has %d)", idx+1, len(s.script)))
		return
	}
	if reply.DelayMS > 0 && n == 0 {
		select {
		case <-time.After(time.Duration(reply.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if reply.Status != 0 && (reply.FailTimes == 0 || n < reply.FailTimes) {
		writeError(w, reply.Status, reply.Error)
		return
	}
	msg := map[string]any{"role": "assistant", "content": reply.Content}
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		var calls []map[string]any
		for i, c := range reply.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": args}})
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	if req.Stream {
		s.stream(w, r, req, reply, idx, msg)
		return
	}
	prompt := 0
	for _, m := range req.Messages {
		if c, ok := m["content"].(string); ok {
			prompt += len(c) / 4
		}
	}
	completion := len(reply.Content)/4 + 10*len(reply.ToolCalls)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake-%d", idx), "object": "chat.completion", "model": req.Model,
		"created": 0,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// stream answers as an OpenAI stream: the content word by word, then the tool calls, then
// the finish reason, the usage, and [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req wireReq, reply Reply, idx int, msg map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", idx), "object": "chat.completion.chunk", "model": req.Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant"}, nil))
	words := strings.SplitAfter(reply.Content, " ")
	for _, word := range words {
		if word == "" {
			continue
		}
		if reply.ChunkDelayMS > 0 {
			select {
			case <-time.After(time.Duration(reply.ChunkDelayMS) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		send(chunk(map[string]any{"content": word}, nil))
	}
	finish := "stop"
	if calls, ok := msg["tool_calls"].([]map[string]any); ok {
		for i, c := range calls {
			c["index"] = i
			send(chunk(map[string]any{"tool_calls": []map[string]any{c}}, nil))
		}
		finish = "tool_calls"
	}
	send(chunk(map[string]any{}, finish))
	completion := len(reply.Content)/4 + 10*len(reply.ToolCalls)
	send(map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", idx), "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{}, "usage": map[string]int{"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
