package activities_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// fakeTokens is a TokenLimiter that grants what grant says and records every call.
type fakeTokens struct {
	grant     func(api.TokenReserveRequest) (api.TokenGrant, error)
	settleErr error

	mu         sync.Mutex
	endpoints  []string
	reserves   []api.TokenReserveRequest
	reservedAt []time.Time
	settles    []api.TokenSettleRequest
}

func (f *fakeTokens) Reserve(_ context.Context, endpoint string, req api.TokenReserveRequest) (api.TokenGrant, error) {
	f.mu.Lock()
	f.endpoints = append(f.endpoints, endpoint)
	f.reserves = append(f.reserves, req)
	f.reservedAt = append(f.reservedAt, time.Now())
	f.mu.Unlock()
	if f.grant == nil {
		return api.TokenGrant{Tokens: req.Tokens}, nil
	}
	return f.grant(req)
}

func (f *fakeTokens) Settle(_ context.Context, endpoint string, req api.TokenSettleRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settles = append(f.settles, req)
	return f.settleErr
}

// tokenEnv is activities whose endpoint "small" has tokens_per_minute 6000 and whose
// default endpoint has no token limit, both fake models.
func tokenEnv(t *testing.T, tokens *fakeTokens, script ...fakellm.Reply) (*env, *fakellm.Server, *fakellm.Server) {
	t.Helper()
	small := fakellm.New(script...)
	big := fakellm.New(fakellm.Reply{Content: "unlimited"})
	d := activities.Deps{
		LLM: activities.NewLLM(activities.LLMConfig{BaseURL: big.Start(t), Model: "big"}),
		Endpoints: map[string]*activities.LLM{
			"small": activities.NewLLM(activities.LLMConfig{BaseURL: small.Start(t), Model: "small", TokensPerMinute: 6000}),
		},
	}
	if tokens != nil {
		d.Tokens = tokens
	}
	return newEnv(t, d), small, big
}

// A call on an endpoint with tokens_per_minute books its estimate (the request's size /
// 4 plus the output allowance) before it reaches the provider, and settles the booking
// with the usage the provider reported; a call on an endpoint without one books nothing.
func TestModelCallBooksAndSettlesItsTokens(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{}
	e, small, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "twelve chars"})
	prompt := strings.Repeat("x", 4000)
	got, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks(prompt)})
	if err != nil {
		t.Fatalf("CompleteChat: %v", err)
	}
	if len(tokens.reserves) != 1 || tokens.endpoints[0] != "small" {
		t.Fatalf("reservations %+v on %v, want one on small", tokens.reserves, tokens.endpoints)
	}
	r := tokens.reserves[0]
	// 4000 bytes of prompt are 1000 tokens; the JSON around them adds a little.
	if r.TokensPerMinute != 6000 || r.Tokens < 1000+api.DefaultOutputTokens || r.Tokens > 1100+api.DefaultOutputTokens || r.Key == "" {
		t.Errorf("reservation %+v, want the endpoint's 6000/min, about %d tokens and a key", r, 1000+api.DefaultOutputTokens)
	}
	used := got.Usage.PromptTokens + got.Usage.CompletionTokens
	if used == 0 || len(tokens.settles) != 1 || tokens.settles[0] != (api.TokenSettleRequest{Key: r.Key, Tokens: used}) {
		t.Errorf("settles %+v, want one for %s with the provider's %d tokens", tokens.settles, r.Key, used)
	}
	if n := len(small.Requests()); n != 1 {
		t.Errorf("the provider got %d requests, want 1", n)
	}
	if _, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("Hi")}); err != nil {
		t.Fatalf("CompleteChat on default: %v", err)
	}
	if len(tokens.reserves) != 1 {
		t.Errorf("a call on an endpoint without tokens_per_minute booked tokens: %+v", tokens.reserves[1:])
	}
}

// The estimate: a token per 4 bytes of the request as sent, plus max_tokens when the
// request sets it.
func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	creq := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: strings.Repeat("y", 8000)}}}
	base := activities.EstimateTokens(creq)
	if base < 2000+api.DefaultOutputTokens || base > 2050+api.DefaultOutputTokens {
		t.Errorf("estimate = %d, want about %d", base, 2000+api.DefaultOutputTokens)
	}
	creq.MaxTokens = 50
	// The request grows by its "max_tokens":50 too (a few tokens).
	if got := activities.EstimateTokens(creq); got < base-api.DefaultOutputTokens+50 || got > base-api.DefaultOutputTokens+55 {
		t.Errorf("estimate with max_tokens 50 = %d, want the prompt's plus 50 (%d without)", got, base)
	}
}

// A booking in the future holds the call until it is due; the provider sees nothing before.
func TestModelCallWaitsForItsBooking(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	var waited []time.Duration
	tokens := &fakeTokens{grant: func(r api.TokenReserveRequest) (api.TokenGrant, error) {
		return api.TokenGrant{At: time.Now().Add(wait), WaitMS: wait.Milliseconds(), Tokens: r.Tokens}, nil
	}}
	small := fakellm.New(fakellm.Reply{Content: "later"})
	e := newEnv(t, activities.Deps{
		Endpoints: map[string]*activities.LLM{
			"small": activities.NewLLM(activities.LLMConfig{BaseURL: small.Start(t), Model: "small", TokensPerMinute: 100}),
		},
		Tokens:    tokens,
		TokenWait: func(endpoint string, d time.Duration) { waited = append(waited, d) },
	})
	if _, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")}); err != nil {
		t.Fatalf("CompleteChat: %v", err)
	}
	if d := time.Since(tokens.reservedAt[0]); d < wait {
		t.Errorf("the call returned %s after its reservation, want at least the booking's %s", d, wait)
	}
	if len(waited) != 1 || waited[0] < wait || waited[0] > wait+time.Second {
		t.Errorf("token waits observed %v, want one of about %s", waited, wait)
	}
}

// A waiting call asks again with its key now and then, and goes as soon as the limiter
// moves its booking earlier (capacity given back by settles).
func TestModelCallGoesWhenItsBookingMovesEarlier(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{}
	tokens.grant = func(r api.TokenReserveRequest) (api.TokenGrant, error) {
		tokens.mu.Lock()
		n := len(tokens.reserves)
		tokens.mu.Unlock()
		if n == 1 {
			return api.TokenGrant{At: time.Now().Add(time.Minute), WaitMS: time.Minute.Milliseconds(), Tokens: r.Tokens}, nil
		}
		return api.TokenGrant{At: time.Now(), Tokens: r.Tokens}, nil
	}
	e, small, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "early"})
	began := time.Now()
	if _, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")}); err != nil {
		t.Fatalf("CompleteChat: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second || len(tokens.reserves) != 2 || tokens.reserves[0].Key != tokens.reserves[1].Key {
		t.Errorf("the call took %s with reservations %+v; want it sent after the second ask, same key, long before its minute", took, tokens.reserves)
	}
	if n := len(small.Requests()); n != 1 {
		t.Errorf("the provider got %d requests, want 1", n)
	}
}

// A booking further off than an attempt waits ends the attempt, retryably, with the wait
// as the next retry's delay, before the provider is called.
func TestModelCallRetriesAFarBookingLater(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{grant: func(r api.TokenReserveRequest) (api.TokenGrant, error) {
		return api.TokenGrant{At: time.Now().Add(10 * time.Minute), WaitMS: (10 * time.Minute).Milliseconds(), Tokens: r.Tokens}, nil
	}}
	e, small, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "never"})
	_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")})
	app := wantAppError(t, err, false, api.ErrTypeTokenWait)
	if app.NextRetryDelay() != 10*time.Minute || !strings.Contains(err.Error(), "6000 tokens/minute") {
		t.Errorf("err = %v (next retry in %s), want the endpoint's limit named and a retry in 10m", err, app.NextRetryDelay())
	}
	if n := len(small.Requests()); n != 0 || len(tokens.settles) != 0 {
		t.Errorf("the provider got %d requests and %d settles were sent, want none", n, len(tokens.settles))
	}
}

// A limiter that cannot be reached fails the attempt retryably, before the provider is
// called; a worker wired without one refuses the call retryably, naming the key; a
// settle that fails does not fail the call.
func TestModelCallTokenLimiterFailures(t *testing.T) {
	t.Parallel()
	t.Run("reserve fails", func(t *testing.T) {
		tokens := &fakeTokens{grant: func(api.TokenReserveRequest) (api.TokenGrant, error) {
			return api.TokenGrant{}, errors.New("limiter unreachable")
		}}
		e, small, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "never"})
		_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")})
		wantAppError(t, err, false, api.ErrTypeModelUnavailable)
		if !strings.Contains(err.Error(), "token limiter of endpoint small: limiter unreachable") || len(small.Requests()) != 0 {
			t.Errorf("err = %v, %d requests; want the limiter's failure named and no request", err, len(small.Requests()))
		}
	})
	t.Run("no limiter", func(t *testing.T) {
		e, small, _ := tokenEnv(t, nil, fakellm.Reply{Content: "never"})
		_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")})
		wantAppError(t, err, false, api.ErrTypeAgentUnavailable)
		if !strings.Contains(err.Error(), "endpoint small has limits.tokens_per_minute but this worker has no token limiter") || len(small.Requests()) != 0 {
			t.Errorf("err = %v, %d requests", err, len(small.Requests()))
		}
	})
	t.Run("settle fails", func(t *testing.T) {
		tokens := &fakeTokens{settleErr: errors.New("limiter gone")}
		e, _, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "fine"})
		got, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")})
		if err != nil || got.Message.Content != "fine" || len(tokens.settles) != 1 {
			t.Errorf("CompleteChat = %q, %v with %d settles; want the reply despite the failed settle", got.Message.Content, err, len(tokens.settles))
		}
	})
}

// The compaction call books its tokens too, on the agent's endpoint.
func TestCompactionBooksItsTokens(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{}
	e, _, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "unused"})
	msgs := userAsks("How big is a.txt?")
	for _, f := range []string{"a", "b", "c"} {
		msgs = append(msgs,
			api.ChatMessage{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: f + ".1", Name: "read_file", Arguments: `{}`}}},
			api.ChatMessage{Role: api.RoleTool, ToolCallID: f + ".1", Content: strings.Repeat(f, 4000)})
	}
	res, err := e.a.Model.CompactThread(context.Background(), api.CompactThreadRequest{Endpoint: "small", Messages: msgs, KeepRecent: 1, MaxTokens: 2000})
	if err != nil || res.Summarised == 0 {
		t.Fatalf("CompactThread = %+v, %v", res, err)
	}
	if len(tokens.reserves) != 1 || tokens.reserves[0].Tokens <= api.DefaultOutputTokens || len(tokens.settles) != 1 {
		t.Errorf("reservations %+v, settles %+v; want the summary request booked and settled", tokens.reserves, tokens.settles)
	}
}

// A call books under the key workflow id / run id / activity id: what every attempt of
// one activity shares (Temporal keeps the activity id across retries), so a retry finds
// the booking its first attempt made; two activities have two keys.
func TestTokenKeyNamesTheActivity(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{}
	e, _, _ := tokenEnv(t, tokens, fakellm.Reply{Content: "one"}, fakellm.Reply{Content: "two"})
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(e.a.Model.CompleteChat, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	for range 2 {
		if _, err := env.ExecuteActivity(api.ActivityCompleteChat, api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")}); err != nil {
			t.Fatal(err)
		}
	}
	const prefix = "default-test-workflow-id/default-test-run-id/"
	if len(tokens.reserves) != 2 || !strings.HasPrefix(tokens.reserves[0].Key, prefix) || !strings.HasPrefix(tokens.reserves[1].Key, prefix) ||
		tokens.reserves[0].Key == tokens.reserves[1].Key {
		t.Errorf("keys %+v, want %s<activity id>, one per activity", tokens.reserves, prefix)
	}
}
