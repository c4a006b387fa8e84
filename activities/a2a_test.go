package activities_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// scriptedExecutor is an a2a-go AgentExecutor whose answer depends on the message's
// text: "weather?" completes with an artifact, "broken" fails, "which city?" asks for
// input, "hang" works until it is cancelled, "long" completes with a long answer, and
// anything else answers with a plain message.
type scriptedExecutor struct {
	canceled atomic.Int32
}

func (e *scriptedExecutor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	text := ""
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	status := func(state a2a.TaskState, msg string) error {
		var m *a2a.Message
		if msg != "" {
			m = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: msg})
		}
		ev := a2a.NewStatusUpdateEvent(rc, state, m)
		ev.Final = state != a2a.TaskStateWorking
		return q.Write(ctx, ev)
	}
	switch {
	case strings.Contains(text, "weather?"):
		if err := status(a2a.TaskStateWorking, ""); err != nil {
			return err
		}
		if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.TextPart{Text: "Sunny, 21 C in Lisbon."})); err != nil {
			return err
		}
		return status(a2a.TaskStateCompleted, "")
	case strings.Contains(text, "long"):
		if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.TextPart{Text: strings.Repeat("forecast ", 2000)})); err != nil {
			return err
		}
		return status(a2a.TaskStateCompleted, "")
	case strings.Contains(text, "broken"):
		return status(a2a.TaskStateFailed, "the forecast service is down")
	case strings.Contains(text, "which city?"):
		return status(a2a.TaskStateInputRequired, "Which city do you mean?")
	case strings.Contains(text, "hang"):
		if err := status(a2a.TaskStateWorking, ""); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}
	return q.Write(ctx, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "hello from a message"}))
}

func (e *scriptedExecutor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.canceled.Add(1)
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// a2aRemote serves exec as an a2a-go server (its card at /.well-known/agent-card.json,
// JSON-RPC at /rpc) that wants "Bearer <token>" on every request, answering 401 without
// it; status, when non-zero, answers every request with that status instead.
func a2aRemote(t *testing.T, exec a2asrv.AgentExecutor, token string, status *atomic.Int32) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(authorized(mux, token, status))
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{Name: "Weather", Description: "Forecasts for any city.", URL: srv.URL + "/rpc",
		PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: "1",
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "forecast", Name: "forecast", Description: "the weather of a city"}}}
	mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	return srv
}

// a2aRemoteAt serves only a card, without a token, whose JSON-RPC endpoint is endpoint.
func a2aRemoteAt(t *testing.T, endpoint string) *httptest.Server {
	t.Helper()
	card := &a2a.AgentCard{Name: "Moved", URL: endpoint, PreferredTransport: a2a.TransportProtocolJSONRPC}
	mux := http.NewServeMux()
	mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// authorized wraps h: 401 unless "Bearer <token>"; status, when non-zero, answers with it.
func authorized(h http.Handler, token string, status *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		if n := status.Load(); n != 0 {
			http.Error(w, "scripted status", int(n))
			return
		}
		h.ServeHTTP(w, r)
	})
}

const a2aTestToken = "a2a-remote-token-0123456789"

// a2aActivities are activities whose environment holds the remote's token under
// WEATHER_TOKEN (and nothing under MISSING_TOKEN).
func a2aActivities(t *testing.T) *activities.Activities {
	t.Helper()
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	env := map[string]string{"WEATHER_TOKEN": a2aTestToken}
	return activities.New(activities.Deps{Store: store, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
}

// TestDescribeA2AAgents: a remote whose card can be read is described by it (name,
// description, skills) with the card's JSON-RPC endpoint; one whose card cannot (no
// token, nothing there) is described by its declaration, its url the endpoint, and the
// reason said; the token appears in neither.
func TestDescribeA2AAgents(t *testing.T) {
	t.Parallel()
	srv := a2aRemote(t, &scriptedExecutor{}, a2aTestToken, &atomic.Int32{})
	a := a2aActivities(t)
	res, err := a.A2A.DescribeA2AAgents(context.Background(), api.DescribeA2AAgentsRequest{RunID: "r1", Remotes: []api.A2ARemote{
		{Name: "weather", URL: srv.URL, TokenEnv: "WEATHER_TOKEN"},
		{Name: "anon", URL: srv.URL, Description: "Asks the weather without a token."},
		{Name: "unset", URL: srv.URL, TokenEnv: "MISSING_TOKEN"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Agents) != 3 {
		t.Fatalf("agents = %+v, want 3", res.Agents)
	}
	w := res.Agents[0]
	if w.Error != "" || w.Endpoint != srv.URL+"/rpc" || w.Card != "Weather" ||
		w.Description != `It is the remote agent "Weather": Forecasts for any city.. Its skills: forecast (the weather of a city)` {
		t.Errorf("weather = %+v, want described by its card, endpoint %s/rpc", w, srv.URL)
	}
	anon := res.Agents[1]
	if anon.Endpoint != srv.URL || anon.Description != "Asks the weather without a token." || !strings.Contains(anon.Error, "401") {
		t.Errorf("anon = %+v, want its declaration, its url, and the 401 named", anon)
	}
	if u := res.Agents[2]; !strings.Contains(u.Error, "token_env names MISSING_TOKEN, which is not set") {
		t.Errorf("unset = %+v, want the unset variable named", u)
	}
	// A card whose endpoint is on another origin is not followed: the token stays home.
	elsewhere := a2aRemoteAt(t, "http://127.0.0.2:9/rpc")
	res2, err := a.A2A.DescribeA2AAgents(context.Background(), api.DescribeA2AAgentsRequest{RunID: "r1", Remotes: []api.A2ARemote{
		{Name: "moved", URL: elsewhere.URL}}})
	if err != nil || len(res2.Agents) != 1 || res2.Agents[0].Endpoint != elsewhere.URL || !strings.Contains(res2.Agents[0].Error, "its card names the endpoint http://127.0.0.2:9/rpc, not on "+elsewhere.URL) {
		t.Errorf("moved = %+v (%v), want its url kept and the card's endpoint refused", res2.Agents, err)
	}
	for _, ag := range res.Agents {
		if strings.Contains(ag.Description+ag.Error+ag.Endpoint, a2aTestToken) {
			t.Errorf("%s carries the token: %+v", ag.Remote, ag)
		}
	}
}

// TestCallA2AAgent drives CallA2AAgent against a2a-go's own server: a completed task's
// artifact is the result (with its ids), a long one by reference; a failed task and one
// that asks for input are error results naming the state and the remote's message; a
// task still working past the timeout is an error result naming it, and the remote is
// asked to cancel; no token is a final 401, a 404 final too, a 503 retryable; a remote
// answering with a message gives its text.
func TestCallA2AAgent(t *testing.T) {
	t.Parallel()
	exec := &scriptedExecutor{}
	status := &atomic.Int32{}
	srv := a2aRemote(t, exec, a2aTestToken, status)
	a := a2aActivities(t)
	weather := api.A2ARemote{Name: "weather", URL: srv.URL, TokenEnv: "WEATHER_TOKEN", Timeout: api.Duration(time.Second)}
	call := func(r api.A2ARemote, endpoint, msg string, storeOver int) (api.RunToolResult, error) {
		t.Helper()
		return a.A2A.CallA2AAgent(context.Background(), api.CallA2AAgentRequest{RunID: "run-1", CallID: "1.1", Remote: r,
			Endpoint: endpoint, Message: msg, StoreOver: storeOver})
	}
	rpc := srv.URL + "/rpc"

	for _, tc := range []struct {
		name, msg string
		isError   bool
		want      []string
	}{
		{"completed", "weather? Lisbon", false, []string{"Sunny, 21 C in Lisbon.", ": completed]"}},
		{"failed", "broken", true, []string{"remote A2A agent weather: task ", "ended failed: the forecast service is down"}},
		{"input-required", "which city?", true, []string{"is input-required: Which city do you mean?", "answer it with task_id"}},
		{"message", "hi", false, []string{"hello from a message", "[A2A message, context "}},
		{"timeout", "hang", true, []string{"was still working after the remote's timeout of 1s", "tasks/cancel was sent"}},
		{"empty", "  ", true, []string{`a2a_weather needs {"message"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := call(weather, rpc, tc.msg, 0)
			if err != nil {
				t.Fatalf("CallA2AAgent: %v", err)
			}
			if res.IsError != tc.isError {
				t.Errorf("is_error = %v, want %v: %s", res.IsError, tc.isError, res.Content)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("result = %q\nwant it to contain %q", res.Content, w)
				}
			}
		})
	}
	if n := exec.canceled.Load(); n != 1 {
		t.Errorf("the remote was asked to cancel %d times, want once (the timed-out task)", n)
	}

	t.Run("long by reference", func(t *testing.T) {
		res, err := call(weather, rpc, "long", 1000)
		if err != nil || res.ContentRef == "" || res.ContentBytes < 18000 || len(res.Content) > 4000 {
			t.Errorf("long = ref %q, %d bytes, %d inline (%v), want stored by reference", res.ContentRef, res.ContentBytes, len(res.Content), err)
		}
	})

	final := func(t *testing.T, err error, wantType string, retryable bool, want string) {
		t.Helper()
		var app *temporal.ApplicationError
		if !errors.As(err, &app) {
			t.Fatalf("err = %v, want an application error", err)
		}
		if app.Type() != wantType || app.NonRetryable() == retryable || !strings.Contains(app.Error(), want) {
			t.Errorf("err = %s %q (non-retryable %v), want %s containing %q, retryable %v", app.Type(), app.Error(), app.NonRetryable(), wantType, want, retryable)
		}
		if strings.Contains(app.Error(), a2aTestToken) {
			t.Errorf("err carries the token: %v", app)
		}
	}
	t.Run("401", func(t *testing.T) {
		_, err := call(api.A2ARemote{Name: "weather", URL: srv.URL}, rpc, "weather? Lisbon", 0)
		final(t, err, api.ErrTypeBadInput, false, "remote A2A agent weather: message/send: the remote answered 401 Unauthorized (check the token its token_env names)")
	})
	t.Run("404", func(t *testing.T) {
		_, err := call(weather, srv.URL+"/nothing-here", "weather? Lisbon", 0)
		final(t, err, api.ErrTypeNotFound, false, "404 Not Found (check its url)")
	})
	t.Run("unset token", func(t *testing.T) {
		_, err := call(api.A2ARemote{Name: "weather", URL: srv.URL, TokenEnv: "MISSING_TOKEN"}, rpc, "weather? Lisbon", 0)
		final(t, err, api.ErrTypeBadInput, false, "token_env names MISSING_TOKEN, which is not set")
	})
	t.Run("503", func(t *testing.T) {
		status.Store(http.StatusServiceUnavailable)
		defer status.Store(0)
		_, err := call(weather, rpc, "weather? Lisbon", 0)
		final(t, err, api.ErrTypeA2ATransport, true, "503 Service Unavailable")
	})
	t.Run("unreachable", func(t *testing.T) {
		down := api.A2ARemote{Name: "weather", URL: "http://127.0.0.1:1", TokenEnv: "WEATHER_TOKEN"}
		_, err := call(down, "http://127.0.0.1:1/rpc", "weather? Lisbon", 0)
		final(t, err, api.ErrTypeA2ATransport, true, "remote A2A agent weather: message/send")
	})
	t.Run("endpoint elsewhere", func(t *testing.T) {
		_, err := call(weather, "http://127.0.0.2:1/rpc", "weather? Lisbon", 0)
		final(t, err, api.ErrTypeBadInput, false, "endpoint http://127.0.0.2:1/rpc is not on "+srv.URL+" (its url); the token goes to that origin only")
	})
}

// TestCheckA2ATokens: the worker's check at start names the agent, the remote's field
// and the variable that is unset.
func TestCheckA2ATokens(t *testing.T) {
	lookup := func(k string) (string, bool) { return map[string]string{"SET": "x"}[k], k == "SET" }
	remotes := []api.A2ARemote{{Name: "a", TokenEnv: "SET"}, {Name: "b"}, {Name: "c", TokenEnv: "UNSET_A2A"}}
	err := activities.CheckA2ATokens("lead", remotes, lookup)
	if err == nil || !strings.Contains(err.Error(), "agents[lead].a2a[2].token_env: remote c: UNSET_A2A: A2A token variable not set on this worker") {
		t.Errorf("CheckA2ATokens = %v, want agents[lead].a2a[2].token_env named", err)
	}
	if err := activities.CheckA2ATokens("lead", remotes[:2], lookup); err != nil {
		t.Errorf("CheckA2ATokens of set tokens = %v", err)
	}
}
