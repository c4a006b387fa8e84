package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// LLM is the worker's model endpoint: any OpenAI-compatible chat completions API (OpenAI,
// Ollama, vLLM, ...). The API key stays here, on the worker: it never enters workflow
// history, events or logs.
type LLM struct {
	client   *openai.Client
	model    string
	retryFor time.Duration
	prices   map[string]api.ModelPrice // llm.prices (cost.go)
	// tokensPerMinute is the endpoint's limits.tokens_per_minute: its calls book their
	// tokens with the endpoint's limiter first (tokenlimit.go); 0: no limit.
	tokensPerMinute int
}

// LLMConfig configures NewLLM.
type LLMConfig struct {
	BaseURL string
	Model   string
	APIKey  string
	// Timeout bounds one HTTP request (default 5m).
	Timeout time.Duration
	// RetryFor is the retry budget of a model call for agents whose definition sets no
	// retry_for (config llm.retry_for); ResolveAgent records it in the agent's spec, so
	// the workflow gets it deterministically. Zero: the workflows' DefaultRetryFor.
	RetryFor time.Duration
	// Prices are what each model costs (config llm.prices): every call's usage gets its
	// cost from them (cost.go).
	Prices map[string]api.ModelPrice
	// TokensPerMinute is the endpoint's token limit for the whole fleet (config
	// limits.tokens_per_minute); 0: none.
	TokensPerMinute int
}

// NewLLM returns the model client. go-openai does not retry on its own; Temporal retries
// the activity instead, so a retry is visible in history and bounded by the retry policy.
func NewLLM(c LLMConfig) *LLM {
	cfg := openai.DefaultConfig(c.APIKey)
	cfg.BaseURL = strings.TrimRight(c.BaseURL, "/")
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	cfg.HTTPClient = &http.Client{Timeout: timeout, Transport: retryAfterTransport{reasoningTransport{http.DefaultTransport}}}
	return &LLM{client: openai.NewClientWithConfig(cfg), model: c.Model, retryFor: c.RetryFor, prices: copyPrices(c.Prices),
		tokensPerMinute: c.TokensPerMinute}
}

// retryAfterKey carries a *time.Duration in a request's context: retryAfterTransport sets
// it from the Retry-After header of a 429 or 503 answer (go-openai's errors keep no
// headers), and classifyModelError hands it to Temporal as the next retry's delay.
type retryAfterKey struct{}

// maxRetryAfter bounds a provider's Retry-After: a longer wait is still retried, just
// asked again after this long (the call's retry budget bounds the whole).
const maxRetryAfter = time.Hour

type retryAfterTransport struct{ base http.RoundTripper }

func (t retryAfterTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	if d, ok := r.Context().Value(retryAfterKey{}).(*time.Duration); ok {
		*d = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return resp, nil
}

// parseRetryAfter reads a Retry-After value, seconds or an HTTP date (RFC 9110 10.2.3);
// 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// withRetryAfter returns ctx carrying a place for the Retry-After of the requests made
// with it.
func withRetryAfter(ctx context.Context) (context.Context, *time.Duration) {
	d := new(time.Duration)
	return context.WithValue(ctx, retryAfterKey{}, d), d
}

func retryAfterOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(retryAfterKey{}).(*time.Duration); ok {
		return *d
	}
	return 0
}

// CompleteChat asks the model for the next message of an agent's thread. The system
// message is built here for every request (agent instructions, then the sandbox's own
// instructions, then the agent's skills), so the stored thread never carries it.
func (a *Model) CompleteChat(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
	model, err := a.modelAt("complete chat", req.Endpoint, req.Model)
	if err != nil {
		return api.CompleteChatResult{}, err
	}
	in, err := a.chatInput(ctx, req)
	if err != nil {
		return api.CompleteChatResult{}, err
	}
	msgs := make([]openai.ChatCompletionMessage, 0, len(in.thread)+1)
	if in.system != "" {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: in.system})
	}
	for _, m := range in.thread {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		msgs = append(msgs, om)
	}
	creq := openai.ChatCompletionRequest{Model: model, Messages: msgs}
	for _, t := range in.cc.Tools {
		creq.Tools = append(creq.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	out, err := a.complete(ctx, model, creq, req)
	if err != nil {
		return out, err
	}
	a.priceAt(req.Endpoint, model, out.Model, &out.Usage)
	return a.chatReplied(ctx, req, in, out)
}

// chatIn is a call's conversation as the worker rebuilds it: what a model call (and a
// pluggable loop's step, harness.go) is asked with.
type chatIn struct {
	cc      api.ChatContext // instructions, skills, tools
	ctxName string          // the stored context's name, when it is stored
	prior   []api.ChatMessage
	// thread is the whole conversation without the system message, every referenced
	// content put back in full.
	thread []api.ChatMessage
	// system is the system message: instructions, the sandbox's own, skills.
	system string
}

// chatInput rebuilds the conversation of req: its constant part (from the store when it
// is named), the stored thread plus the new messages, every reference resolved, and the
// system message (agent instructions, then the sandbox's own instructions, then the
// agent's skills), so the stored thread never carries it.
func (a *Model) chatInput(ctx context.Context, req api.CompleteChatRequest) (chatIn, error) {
	var in chatIn
	var err error
	if in.cc, in.ctxName, err = a.chatContext(ctx, req); err != nil {
		return in, err
	}
	// With a stored thread, the request carries only what follows it.
	thread := req.Messages
	if req.Thread != nil {
		if in.prior, err = a.loadThread(ctx, req.Thread.Head); err != nil {
			return in, err
		}
		thread = append(append(make([]api.ChatMessage, 0, len(in.prior)+len(req.Messages)), in.prior...), req.Messages...)
	}
	if in.thread, err = a.resolve(ctx, thread); err != nil {
		return in, err
	}
	sandboxInstructions := ""
	if req.RunID != "" && a.sandboxes != nil {
		sandboxInstructions = a.sandboxes.Instructions(ctx, req.RunID, req.Sandbox)
	}
	in.system = SystemPrompt(in.cc.System, sandboxInstructions, in.cc.Skills)
	return in, nil
}

// chatReplied finishes a call with its reply out: long reasoning and reply text stored
// by reference, the context's name when asked for, and the reply stored as the thread's
// next segment (with the call's own tool call ids, as the workflow names them).
func (a *Model) chatReplied(ctx context.Context, req api.CompleteChatRequest, in chatIn, out api.CompleteChatResult) (api.CompleteChatResult, error) {
	var err error
	if out, err = a.offloadReasoning(ctx, out); err != nil {
		return api.CompleteChatResult{}, err
	}
	// Before the reply joins the stored thread: the thread keeps the reference too.
	if out, err = a.offloadReply(ctx, req, out); err != nil {
		return api.CompleteChatResult{}, err
	}
	if req.StoreContext {
		out.Context = in.ctxName
	}
	if req.Thread != nil {
		reply := out.Message
		reply.ToolCalls = append([]api.ToolCall(nil), reply.ToolCalls...)
		for i := range reply.ToolCalls {
			reply.ToolCalls[i].ID = fmt.Sprintf("%s.%d", req.CallID, i+1)
		}
		added := append(append([]api.ChatMessage(nil), req.Messages...), reply)
		ref, _, err := a.appendThread(ctx, *req.Thread, in.prior, added)
		if err != nil {
			return api.CompleteChatResult{}, err
		}
		if out.Usage.PromptTokens > 0 {
			// The provider's count of this request, plus the reply, beats an estimate.
			ref.Tokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
		}
		out.Thread = &ref
	}
	return out, nil
}

// complete sends one request, streamed when the call asks for it. On an endpoint with
// tokens_per_minute it first waits for its booking with the endpoint's token limiter
// (heartbeating), and settles the booking with the provider's count after the reply.
func (a *Model) complete(ctx context.Context, model string, creq openai.ChatCompletionRequest, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
	settle, err := a.awaitTokens(ctx, req.Endpoint, creq)
	if err != nil {
		return api.CompleteChatResult{}, err
	}
	out, err := a.send(ctx, model, creq, req)
	if err == nil {
		settle(out.Usage)
	}
	return out, err
}

// send sends one request, streamed when the call asks for it.
func (a *Model) send(ctx context.Context, model string, creq openai.ChatCompletionRequest, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
	ctx, _ = withRetryAfter(ctx)
	if req.StreamTo != "" || req.StreamLive {
		return a.completeStreaming(ctx, model, creq, req)
	}
	resp, err := a.clientFor(req.Endpoint).CreateChatCompletion(ctx, creq)
	if err != nil {
		return api.CompleteChatResult{}, classifyModelError(model, err, retryAfterOf(ctx))
	}
	if len(resp.Choices) == 0 {
		return api.CompleteChatResult{}, fmt.Errorf("complete chat with %s: the reply has no choices", model)
	}
	ch := resp.Choices[0]
	out := api.CompleteChatResult{
		Model:        resp.Model,
		FinishReason: string(ch.FinishReason),
		Usage: api.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens,
			TotalTokens: resp.Usage.TotalTokens},
		Message:   api.ChatMessage{Role: api.RoleAssistant, Content: ch.Message.Content},
		Reasoning: ch.Message.ReasoningContent,
	}
	for _, tc := range ch.Message.ToolCalls {
		out.Message.ToolCalls = append(out.Message.ToolCalls, api.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out, nil
}

// model is the model a call to the default endpoint uses (see modelAt).
func (a *Model) model(op, agentModel string) (string, error) {
	return a.modelAt(op, "", agentModel)
}

// withRetryBudget gives spec the worker's model retry budget (llm.retry_for) unless its
// definition sets its own; the resolved spec is recorded, so the workflow reads it
// deterministically.
func (a *Model) withRetryBudget(spec agents.Spec) agents.Spec {
	if spec.RetryFor == 0 && a.llm != nil && a.llm.retryFor > 0 {
		spec.RetryFor = api.Duration(a.llm.retryFor)
	}
	return spec
}

// SystemPrompt is the system message of a model request: the agent's instructions, the
// sandbox's own instructions, then each skill's text, in that order, each once, separated
// by a blank line; blank parts are left out.
func SystemPrompt(instructions, sandboxInstructions string, skills []string) string {
	parts := make([]string, 0, 2+len(skills))
	for _, p := range append([]string{instructions, sandboxInstructions}, skills...) {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "\n\n")
}

// classifyModelError: 408, 429, 5xx and a provider that cannot be reached are transient
// (api.ErrTypeModelUnavailable: Temporal retries them within the call's retry budget, after
// the provider's Retry-After when it sent one); any other 4xx means the request itself is
// wrong (bad model name, bad key, context too long) and retrying cannot help, so it fails
// at once, non-retryable, with the provider's message.
func classifyModelError(model string, err error, retryAfter time.Duration) error {
	status := 0
	msg := err.Error()
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	// RequestError first: when go-openai cannot fully parse an error body it wraps a
	// half-filled APIError (status 0) inside the RequestError, which carries the status
	// and the raw body.
	switch {
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		status = reqErr.HTTPStatusCode
		msg = strings.TrimSpace(string(reqErr.Body))
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
		if msg == "" {
			msg = reqErr.Error()
		}
	case errors.As(err, &apiErr):
		status, msg = apiErr.HTTPStatusCode, apiErr.Message
	}
	text := fmt.Sprintf("model %s: HTTP %d: %s", model, status, msg)
	if status == 0 && errors.Is(err, context.Canceled) {
		return fmt.Errorf("model %s: %w", model, err) // the call was canceled: not the provider's failure
	}
	if status == 0 {
		// Not an answer (connection refused, reset, timed out): the provider may be back soon.
		return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("model %s: %v", model, err), api.ErrTypeModelUnavailable,
			temporal.ApplicationErrorOptions{})
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
		if status == http.StatusRequestEntityTooLarge {
			return temporal.NewNonRetryableApplicationError(text, api.ErrTypeTooLarge, nil)
		}
		if contextExceeded(msg) {
			return temporal.NewNonRetryableApplicationError(text+
				" (the thread outgrew the model's context: set the agent's context.max_tokens, with keep_recent, to summarise its oldest turns)",
				api.ErrTypeTooLarge, nil)
		}
		return temporal.NewNonRetryableApplicationError(text, api.ErrTypeBadInput, nil)
	}
	return temporal.NewApplicationErrorWithOptions(text, api.ErrTypeModelUnavailable,
		temporal.ApplicationErrorOptions{NextRetryDelay: retryAfter})
}

// contextExceeded recognises a provider's "the request is longer than my context"
// answer (OpenAI: context_length_exceeded; vLLM, Ollama and others say it in words).
func contextExceeded(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context_length_exceeded") || strings.Contains(m, "context length") ||
		strings.Contains(m, "context window") || strings.Contains(m, "maximum context")
}
