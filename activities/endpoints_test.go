package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// A call naming an endpoint goes to that endpoint's server with its model and key; the
// default endpoint keeps llm:, and an agent's summaries follow its endpoint too.
func TestModelCallsReachTheirEndpoint(t *testing.T) {
	t.Parallel()
	big := fakellm.New(fakellm.Reply{Content: "from the big model"})
	small := fakellm.New(fakellm.Reply{Content: "from the small model"}, fakellm.Reply{Match: "You compact the transcript", Content: "short summary"})
	e := newEnv(t, activities.Deps{
		LLM: activities.NewLLM(activities.LLMConfig{BaseURL: big.Start(t), Model: "big-model", APIKey: "sk-big"}),
		Endpoints: map[string]*activities.LLM{
			"small": activities.NewLLM(activities.LLMConfig{BaseURL: small.Start(t), Model: "small-model", APIKey: "sk-small"}),
		},
	})
	got, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")})
	if err != nil {
		t.Fatalf("CompleteChat on small: %v", err)
	}
	if got.Message.Content != "from the small model" {
		t.Errorf("reply = %q, want the small endpoint's", got.Message.Content)
	}
	if reqs := small.Requests(); len(reqs) != 1 || reqs[0].Model != "small-model" || reqs[0].Auth != "Bearer sk-small" {
		t.Errorf("small endpoint got %+v, want one request for small-model with its own key", reqs)
	}
	if n := len(big.Requests()); n != 0 {
		t.Errorf("the default endpoint got %d requests, want none", n)
	}
	if got, err = e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("Hi")}); err != nil || got.Message.Content != "from the big model" {
		t.Errorf("default endpoint: %q, %v", got.Message.Content, err)
	}
	// An agent's model overrides the endpoint's.
	if _, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "Small", Model: "tiny", Messages: userAsks("Hi")}); err != nil {
		t.Fatalf("CompleteChat on Small: %v", err)
	}
	if reqs := small.Requests(); len(reqs) != 2 || reqs[1].Model != "tiny" {
		t.Errorf("second small request = %+v, want model tiny", reqs[len(reqs)-1])
	}
	// The agent's context summary goes to its endpoint too.
	msgs := userAsks("How big is a.txt?")
	for _, f := range []string{"a", "b", "c"} {
		msgs = append(msgs,
			api.ChatMessage{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: f + ".1", Name: "read_file", Arguments: `{}`}}},
			api.ChatMessage{Role: api.RoleTool, ToolCallID: f + ".1", Content: strings.Repeat(f, 4000)})
	}
	res, err := e.a.Model.CompactThread(context.Background(), api.CompactThreadRequest{Endpoint: "small", Messages: msgs, KeepRecent: 1, MaxTokens: 2000})
	if err != nil {
		t.Fatalf("CompactThread on small: %v", err)
	}
	if res.Summarised == 0 {
		t.Fatalf("compaction summarised nothing: %+v", res)
	}
	if reqs := small.Requests(); len(reqs) != 3 || reqs[2].Model != "small-model" {
		t.Errorf("small endpoint got %d requests, want the summary request as the third (model small-model)", len(reqs))
	}
	if n := len(big.Requests()); n != 1 {
		t.Errorf("the default endpoint got %d requests, want only the one call naming it", n)
	}
}

func TestModelCallToAnUnknownEndpoint(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "ok"})
	e := newEnv(t, activities.Deps{LLM: activities.NewLLM(activities.LLMConfig{BaseURL: model.Start(t), Model: "m"})})
	_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Endpoint: "small", Messages: userAsks("Hi")})
	app := wantAppError(t, err, false, api.ErrTypeAgentUnavailable) // retryable: another worker may have it
	if !strings.Contains(app.Error(), `no model endpoint "small" (it has: default)`) {
		t.Errorf("err = %v, want it to name the endpoint and the ones the worker has", err)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the default endpoint got %d requests, want none", n)
	}
}

// ResolveAgent records the endpoint's canonical name and its rate-limited task queue.
func TestResolveAgentCarriesTheModelQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{
		LLM:         activities.NewLLM(activities.LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}),
		Endpoints:   map[string]*activities.LLM{"small": activities.NewLLM(activities.LLMConfig{BaseURL: "http://127.0.0.1:2/v1"})},
		ModelQueues: map[string]string{"small": api.ModelTaskQueue("nexo", "small")},
		Agents:      []agents.Spec{{Name: "plain"}, {Name: "summariser", LLM: "Small"}},
	})
	for name, want := range map[string][2]string{"plain": {"", ""}, "summariser": {"small", "nexo-llm-small"}} {
		spec, err := e.a.Model.ResolveAgent(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if spec.LLM != want[0] || spec.ModelQueue != want[1] {
			t.Errorf("agent %s: llm %q, model queue %q; want %q, %q", name, spec.LLM, spec.ModelQueue, want[0], want[1])
		}
	}
}

// The fake provider's 429 above its limit carries a Retry-After, which becomes the next
// retry's delay: the retry waits the window out instead of burning an attempt at once.
func TestRateLimited429WaitsForRetryAfter(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "one", Repeat: 3})
	model.LimitRate(2, time.Minute)
	e := newEnv(t, activities.Deps{LLM: activities.NewLLM(activities.LLMConfig{BaseURL: model.Start(t), Model: "m"})})
	for i := range 2 {
		if _, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("Hi")}); err != nil {
			t.Fatalf("call %d within the limit: %v", i+1, err)
		}
	}
	_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("Hi")})
	app := wantAppError(t, err, false, api.ErrTypeModelUnavailable)
	if d := app.NextRetryDelay(); d < 58*time.Second || d > time.Minute {
		t.Errorf("NextRetryDelay = %s, want about a minute (when the oldest call leaves the window)", d)
	}
	if st := model.RateStats(); st.Accepted != 2 || st.Rejected != 1 || st.Peak != 3 {
		t.Errorf("rate stats = %+v, want 2 accepted, 1 rejected, peak 3", st)
	}
}
