// Package fakellm is an OpenAI-compatible chat completions server that replays a script:
// the tests' model, and the model of the offline example. No test needs a network or a
// key.
//
// Which reply answers a request is decided, in this order:
//
//  1. a standing reply (Reply.Match) whose text occurs in the request's system message or
//     in its last message answers it; standing replies are not part of the sequence;
//  2. a compaction request (its system message starts with CompactPrefix, as the worker's
//     CompactThread sends it) gets a short built-in summary when no standing reply matched;
//  3. otherwise the script's entries answer in order, picked by the server's Index, from
//     the sequence of the request's task: entries with a Prompt form their own sequence,
//     which answers the threads whose first user message contains that Prompt (the first
//     such sequence in script order); the other entries answer all other threads. One
//     server thus plays several tasks (a demo's "write one file" and "write three");
//     ByAssistantMessages (the default) answers with reply N every request whose thread
//     already holds N assistant messages; BySequence answers the N-th distinct request
//     with reply N. Either way a retried request (a worker killed mid-call, a Temporal
//     retry) gets the same reply, exactly as replay expects of a deterministic model, but
//     only BySequence survives a thread that shrinks (a compacted thread).
//
// A script file is a JSON array of replies; an entry with "repeat": N stands for N
// entries, "{n}" in its content and tool-call arguments replaced by 1…N:
//
//	[{"tool_calls": [{"name": "read_file", "arguments": {"path": "f{n}.txt"}}], "repeat": 59},
//	 {"content": "I read them all."},
//	 {"match": "You compact the transcript", "content": "The user asked for 59 files."}]
//
// A streamed reply goes out word by word, its reasoning first: "chunk_delay_ms" spaces the
// chunks, and "hold": "name" stops it after its reasoning until the hold is released
// (Server.Release, or POST /fake/release?hold=name), for tests of live thinking.
//
// Usage reports prompt_tokens as the sum of the messages' content bytes / 4, the estimate
// Sizes keeps for every request.
package fakellm

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CompactPrefix starts the system message of a compaction request (the worker's
// activities.CompactPromptPrefix; this package stays on the standard library, so a test
// keeps the two equal).
const CompactPrefix = "You compact the transcript of a conversation"

// SummaryReply is the built-in answer to a compaction request no standing reply matched;
// %d is the transcript's size in bytes.
const SummaryReply = "Summary (fake model): the conversation so far, %d bytes of transcript, compacted."

// Index is how the script's entries are matched to requests.
type Index int

const (
	// ByAssistantMessages answers with reply N a request whose thread holds N assistant
	// messages: a retry, or the same thread sent again, gets the same reply. A compacted
	// (shorter) thread falls back to an earlier reply.
	ByAssistantMessages Index = iota
	// BySequence answers the N-th distinct request (by the sha256 of its body) with reply
	// N: a byte-identical retry gets the reply it got the first time, whatever came in
	// between, and a compacted thread simply takes the next reply.
	BySequence
)

// ParseIndex reads an Index by name: "assistant" (ByAssistantMessages) or "sequence".
func ParseIndex(name string) (Index, error) {
	switch name {
	case "", "assistant":
		return ByAssistantMessages, nil
	case "sequence":
		return BySequence, nil
	}
	return 0, fmt.Errorf("fake model: unknown index %q (assistant or sequence)", name)
}

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
	// RetryAfter is sent as the Retry-After header of a Status answer ("5", or an HTTP
	// date), as a provider that rate-limits does.
	RetryAfter string `json:"retry_after,omitempty"`
	// ChunkDelayMS spaces the chunks of a streamed reply (its reasoning and then its
	// content are streamed word by word when the request asks for a stream).
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
	// Hold names a hold that a streamed reply waits on after its reasoning, before its
	// content, until the hold is released: Server.Release(name) in a test, or POST
	// /fake/release?hold=name to the server (bin/fakellm). A test thus sees the model's
	// live thinking while the call is surely still in flight, and no sleep decides it. A
	// released hold stays open (a retry does not wait again); a request that ends (the
	// worker gave up) stops waiting.
	Hold string `json:"hold,omitempty"`
	// Match makes this a standing reply: it answers every request whose system message or
	// last message contains Match, before the script is consulted, and takes no place in
	// the sequence (Repeat is ignored). The first matching standing reply wins.
	Match string `json:"match,omitempty"`
	// Prompt puts this reply in the sequence of the threads whose first user message
	// contains Prompt, instead of the main sequence (ignored with Match).
	Prompt string `json:"prompt,omitempty"`
	// Reasoning is the model's reasoning output for this reply, sent under
	// ReasoningField ("reasoning_content", the default, or "reasoning"); streamed word by
	// word before the content (reasoning.go).
	Reasoning      string `json:"reasoning,omitempty"`
	ReasoningField string `json:"reasoning_field,omitempty"`
	// Repeat stands for this reply Repeat times in a row, with "{n}" in Content and in the
	// tool calls' arguments replaced by the repetition number, 1…Repeat. 0 and 1: once.
	Repeat int `json:"repeat,omitempty"`
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

// RequestSize is the size of one request received.
type RequestSize struct {
	// Bytes is the request body's length.
	Bytes int
	// Tokens estimates the request's prompt as the usage reports it: the messages'
	// content bytes / 4, summed per message.
	Tokens int
	// Messages counts the messages, the system message included.
	Messages int
	// Compaction is set for a compaction request (system message starts with CompactPrefix).
	Compaction bool
}

// Server replays a script. Set its exported fields before the first request.
type Server struct {
	// Index matches script entries to requests (default ByAssistantMessages).
	Index Index
	// SizesOnly keeps only the size of each request (Sizes), not its messages: for long
	// benchmarks whose requests add up to gigabytes. Requests then returns nothing.
	SizesOnly bool

	mu       sync.Mutex
	script   []Reply // the sequence, repeats expanded
	tasks    []task  // the sequences of replies with Prompt, in script order
	standing []Reply // replies with Match
	requests []Request
	sizes    []RequestSize
	seen     map[int]int              // reply index (standing reply i: -1-i) → requests answered
	order    map[[32]byte]int         // BySequence: request body's sha256 → reply index
	limit    *rateLimit               // LimitRate (ratelimit.go); nil: no limit
	holds    map[string]chan struct{} // Reply.Hold by name: closed once released
	// tokenLimit is LimitTokens (tokenlimit.go); nil: no limit.
	tokenLimit *tokenLimit
	streamed   int // content words sent in streamed replies (StreamedWords)
}

// StreamedWords is how many words of content the server has sent in streamed replies so
// far, over all requests: a test that must act while a reply is part-way through its
// stream (kill the worker mid-stream) waits for this to grow instead of sleeping.
func (s *Server) StreamedWords() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamed
}

// hold is the channel of the hold name, closed once it is released.
func (s *Server) hold(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds == nil {
		s.holds = map[string]chan struct{}{}
	}
	h := s.holds[name]
	if h == nil {
		h = make(chan struct{})
		s.holds[name] = h
	}
	return h
}

// Release opens the hold name (Reply.Hold): the replies waiting on it go on, and later
// ones do not wait. Releasing it again, or before any reply waits, is fine.
func (s *Server) Release(name string) {
	h := s.hold(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-h:
	default:
		close(h)
	}
}

// task is the sequence of the replies sharing one Prompt; its replies' keys in seen are
// offset past the main sequence and the tasks before it.
type task struct {
	prompt string
	script []Reply
	order  map[[32]byte]int
}

// New returns a server for script: entries with Match are standing replies, the others
// the sequence, each Repeat times.
func New(script ...Reply) *Server {
	s := &Server{seen: map[int]int{}, order: map[[32]byte]int{}}
	for _, r := range script {
		if r.Match != "" {
			r.Repeat = 0
			s.standing = append(s.standing, r)
			continue
		}
		seq := &s.script
		if r.Prompt != "" {
			i := 0
			for i < len(s.tasks) && s.tasks[i].prompt != r.Prompt {
				i++
			}
			if i == len(s.tasks) {
				s.tasks = append(s.tasks, task{prompt: r.Prompt, order: map[[32]byte]int{}})
			}
			seq = &s.tasks[i].script
		}
		if r.Repeat <= 1 {
			*seq = append(*seq, r)
			continue
		}
		for n := 1; n <= r.Repeat; n++ {
			*seq = append(*seq, r.numbered(n))
		}
	}
	return s
}

// firstUser is the content of the first user message of msgs ("" without one).
func firstUser(msgs []map[string]any) string {
	for _, m := range msgs {
		if m["role"] == "user" {
			c, _ := m["content"].(string)
			return c
		}
	}
	return ""
}

// numbered is repetition n of r: "{n}" replaced in the content and the arguments.
func (r Reply) numbered(n int) Reply {
	num := strconv.Itoa(n)
	r.Repeat = 0
	r.Content = strings.ReplaceAll(r.Content, "{n}", num)
	calls := make([]Call, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		c.Arguments = json.RawMessage(bytes.ReplaceAll(c.Arguments, []byte("{n}"), []byte(num)))
		calls[i] = c
	}
	r.ToolCalls = calls
	return r
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

// Requests returns a copy of what was received so far (nothing with SizesOnly).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Sizes returns the size of every request received so far, in arrival order.
func (s *Server) Sizes() []RequestSize {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestSize(nil), s.sizes...)
}

// MaxTokens is the largest Tokens of the requests received so far, compaction requests
// apart: the largest agent request and the largest compaction request.
func (s *Server) MaxTokens() (agent, compaction int) {
	for _, z := range s.Sizes() {
		if z.Compaction {
			compaction = max(compaction, z.Tokens)
		} else {
			agent = max(agent, z.Tokens)
		}
	}
	return agent, compaction
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

// ServeHTTP answers POST /v1/chat/completions, GET /v1/models (one model, "fake"), and
// POST /fake/release?hold=NAME (Release).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/fake/release" {
		name := r.URL.Query().Get("hold")
		if name == "" {
			writeError(w, http.StatusBadRequest, "fake model: POST /fake/release needs ?hold=NAME, the hold of a scripted reply")
			return
		}
		s.Release(name)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		// What `starter doctor` asks an endpoint: an answer that costs no scripted reply.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list",
			"data": []map[string]any{{"id": "fake", "object": "model", "owned_by": "fakellm"}}})
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "fake model serves only POST /v1/chat/completions, GET /v1/models (and POST /fake/release?hold=NAME)")
		return
	}
	if s.limited(w) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "fake model: read request body: "+err.Error())
		return
	}
	var req wireReq
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "fake model: bad request body: "+err.Error())
		return
	}
	size := RequestSize{Bytes: len(body), Tokens: promptTokens(req.Messages), Messages: len(req.Messages)}
	system, last := "", ""
	if len(req.Messages) > 0 {
		if req.Messages[0]["role"] == "system" {
			system, _ = req.Messages[0]["content"].(string)
		}
		last, _ = req.Messages[len(req.Messages)-1]["content"].(string)
	}
	size.Compaction = strings.HasPrefix(system, CompactPrefix)

	s.mu.Lock()
	if s.tokenLimit != nil {
		// The usage this request's reply would report, charged before it is answered; a
		// refused request takes no reply and is not recorded.
		if reply, _, ok := s.pick(body, req.Messages, system, last, size.Compaction, true); ok &&
			s.tokensLimited(w, size.Tokens+completionTokens(reply), time.Now()) {
			s.mu.Unlock()
			return
		}
	}
	if !s.SizesOnly {
		s.requests = append(s.requests, Request{Model: req.Model, Messages: req.Messages, Tools: req.Tools, Auth: r.Header.Get("Authorization")})
	}
	s.sizes = append(s.sizes, size)
	reply, idx, ok := s.pick(body, req.Messages, system, last, size.Compaction, false)
	n := s.seen[idx]
	s.seen[idx]++
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("fake model: the script has no reply %d for this thread (it has %d)", idx+1, reply.Repeat))
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
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		writeError(w, reply.Status, reply.Error)
		return
	}
	msg := map[string]any{"role": "assistant", "content": reply.Content}
	addReasoning(msg, reply)
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
		s.stream(w, r, req, reply, idx, msg, size.Tokens)
		return
	}
	prompt := size.Tokens
	completion := completionTokens(reply)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake-%d", idx), "object": "chat.completion", "model": req.Model,
		"created": 0,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// pick chooses the reply to a request (see the package doc) and returns its key in seen:
// the index in the main sequence (offset past the sequences before it for a task's), or
// -1-i for standing reply i; ok is false when the sequence has no entry for the request
// (idx is then the entry it would need, within its sequence, and reply.Repeat the
// sequence's length). dry leaves a BySequence request unrecorded (a look ahead). Called
// with s.mu held.
func (s *Server) pick(body []byte, msgs []map[string]any, system, last string, compaction, dry bool) (reply Reply, idx int, ok bool) {
	for i, r := range s.standing {
		if strings.Contains(system, r.Match) || strings.Contains(last, r.Match) {
			return r, -1 - i, true
		}
	}
	if compaction {
		return Reply{Content: fmt.Sprintf(SummaryReply, len(last))}, -1 - len(s.standing), true
	}
	script, order, offset := s.script, s.order, 0
	first, past := firstUser(msgs), len(s.script)
	for _, t := range s.tasks {
		if strings.Contains(first, t.prompt) {
			script, order, offset = t.script, t.order, past
			break
		}
		past += len(t.script)
	}
	switch s.Index {
	case BySequence:
		sum := sha256.Sum256(body)
		i, seen := order[sum]
		if !seen {
			i = len(order)
			if !dry {
				order[sum] = i
			}
		}
		idx = i
	default:
		for _, m := range msgs {
			if m["role"] == "assistant" {
				idx++
			}
		}
	}
	if idx >= len(script) {
		return Reply{Repeat: len(script)}, idx, false
	}
	return script[idx], offset + idx, true
}

// completionTokens is the completion_tokens the usage reports for reply: its content
// bytes / 4, plus 10 a tool call.
func completionTokens(reply Reply) int {
	return len(reply.Content)/4 + 10*len(reply.ToolCalls)
}

// promptTokens estimates a request's prompt: each message's content bytes / 4.
func promptTokens(msgs []map[string]any) int {
	n := 0
	for _, m := range msgs {
		if c, ok := m["content"].(string); ok {
			n += len(c) / 4
		}
	}
	return n
}

// stream answers as an OpenAI stream: the content word by word, then the tool calls, then
// the finish reason, the usage, and [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req wireReq, reply Reply, idx int, msg map[string]any, prompt int) {
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
	// pause spaces the chunks (ChunkDelayMS); false: the client left.
	pause := func() bool {
		if reply.ChunkDelayMS <= 0 {
			return true
		}
		select {
		case <-time.After(time.Duration(reply.ChunkDelayMS) * time.Millisecond):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	send(chunk(map[string]any{"role": "assistant"}, nil))
	if !streamReasoning(func(delta map[string]any) { send(chunk(delta, nil)) }, pause, reply) {
		return
	}
	if reply.Hold != "" {
		select {
		case <-s.hold(reply.Hold):
		case <-r.Context().Done():
			return
		}
	}
	words := strings.SplitAfter(reply.Content, " ")
	for _, word := range words {
		if word == "" {
			continue
		}
		if !pause() {
			return
		}
		send(chunk(map[string]any{"content": word}, nil))
		s.mu.Lock()
		s.streamed++
		s.mu.Unlock()
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
	completion := completionTokens(reply)
	send(map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", idx), "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{}, "usage": map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
