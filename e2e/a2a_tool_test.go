package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// weatherToken is the bearer token the remote weather agent requires.
const weatherToken = "weather-a2a-e2e-token-0123456789"

// weatherExecutor is the remote agent, an a2a-go AgentExecutor: it works on the task,
// then completes it with the forecast as an artifact.
type weatherExecutor struct{ tasks atomic.Int32 }

func (e *weatherExecutor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.tasks.Add(1)
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.TextPart{Text: "Sunny, 21 C in Lisbon."})); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (e *weatherExecutor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// weatherRemote serves the weather agent with a2a-go's own server (its card at
// /a2a/.well-known/agent-card.json, JSON-RPC at /a2a/rpc), refusing with 401 any request
// without the token; unauthorized counts those.
func weatherRemote(t *testing.T, exec *weatherExecutor) (srv *httptest.Server, unauthorized *atomic.Int32) {
	t.Helper()
	unauthorized = &atomic.Int32{}
	mux := http.NewServeMux()
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+weatherToken {
			unauthorized.Add(1)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{Name: "Weather", Description: "Forecasts for any city.", URL: srv.URL + "/a2a/rpc",
		PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: "1",
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "forecast", Name: "forecast", Description: "the weather of a city"}}}
	mux.Handle("GET /a2a"+a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	return srv, unauthorized
}

// a2aToolConfig is docs/agents.md's "Remote A2A agents" example, its remote at url.
func a2aToolConfig(t *testing.T, model, url string) string {
	block := readmeBlock(t, "yaml", "name: weather")
	const doc = "https://weather.example.com/a2a"
	if !strings.Contains(block, doc) {
		t.Fatalf("the example no longer names %s:\n%s", doc, block)
	}
	return "llm:\n  base_url: " + model + "\n  model: fake-model\n" + strings.Replace(block, doc, url+"/a2a", 1)
}

// a2aToolModel scripts the forecaster: it asks the weather agent, and answers with what
// the tool result said (a standing reply matched by the remote's answer, so the model's
// answer proves it read it).
func a2aToolModel() *fakellm.Server {
	return fakellm.New(
		fakellm.Reply{Match: "Sunny, 21 C in Lisbon.", Content: "The weather agent says: Sunny, 21 C in Lisbon."},
		fakellm.Reply{ToolCalls: []fakellm.Call{toolCall("a2a_weather", map[string]any{"message": "What is the weather in Lisbon?"})}},
	)
}

// TestA2AToolCallsARemote: the forecaster of docs/agents.md, its model scripted to call
// a2a_weather, the remote an a2a-go server of the test's own that wants a bearer token.
// The tool is described from the remote's card; the call waits for approval (mode
// approve), `starter approve` lets it run, the remote's answer is the tool result and the
// model's answer the run's result; events show the call. The token the remote required
// is nowhere in the run's history, record or events, nor in the worker's output. A worker
// whose remote's token_env is unset refuses to start, naming the field.
func TestA2AToolCallsARemote(t *testing.T) {
	t.Parallel()
	exec := &weatherExecutor{}
	remote, unauthorized := weatherRemote(t, exec)
	model := a2aToolModel()
	p := newPlatform(t)
	p.writeConfig(a2aToolConfig(t, model.Start(t), remote.URL))

	// Without the token in its environment the worker does not start.
	r := p.runBin(bins.worker, "--dev")
	if r.code == 0 || !strings.Contains(r.stderr, "agents[forecaster].a2a[0].token_env: remote weather: WEATHER_A2A_TOKEN: A2A token variable not set on this worker") {
		t.Fatalf("worker without WEATHER_A2A_TOKEN: exit %d\n%s\nwant a refusal naming agents[forecaster].a2a[0].token_env", r.code, r.stderr)
	}

	p.extraEnv = append(p.extraEnv, "WEATHER_A2A_TOKEN="+weatherToken)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "forecaster", "What is the weather in Lisbon?"))
	wantPending(t, p, id, "1.1")
	if n := exec.tasks.Load(); n != 0 {
		t.Fatalf("the remote got %d tasks before the call was approved", n)
	}
	if out := p.ok("show", id); !strings.Contains(out, "a2a_weather (a2a)") {
		t.Errorf("show %s:\n%s\nwant the pending a2a_weather call of capability a2a", id, out)
	}
	p.ok("approve", id, "--by", "ada")
	rec := p.waitStatus(id, api.StatusDone)

	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "The weather agent says: Sunny, 21 C in Lisbon." {
		t.Fatalf("result = %s (%v), want the model's answer from the remote's", rec.Result, err)
	}
	if n := exec.tasks.Load(); n != 1 {
		t.Errorf("the remote got %d tasks, want 1", n)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Errorf("%d requests reached the remote without the token", n)
	}

	// The model was offered the tool as the card describes it.
	reqs := model.Requests()
	tools, _ := json.Marshal(reqs[0].Tools)
	if !strings.Contains(string(tools), `It is the remote agent \"Weather\": Forecasts for any city.. Its skills: forecast (the weather of a city)`) {
		t.Errorf("tools offered = %s\nwant a2a_weather described by the card", tools)
	}
	var called, answered, offered bool
	for _, e := range rec.Events {
		s := string(e.Data)
		switch e.Type {
		case "agent_tool_call":
			var d struct{ Name string }
			_ = json.Unmarshal(e.Data, &d)
			called = called || d.Name == "a2a_weather" && strings.Contains(s, "What is the weather in Lisbon?")
		case "agent_tool_result":
			answered = answered || strings.Contains(s, "Sunny, 21 C in Lisbon.") && strings.Contains(s, ": completed]")
		case api.EventA2AAgents:
			offered = strings.Contains(s, remote.URL+"/a2a/rpc")
		}
	}
	if !called || !answered || !offered {
		t.Errorf("events: tool call %v, result %v, a2a_agents naming the card's endpoint %v; want all\n%s", called, answered, offered, p.ok("logs", id))
	}

	// The token is nowhere but on the wire.
	whole, _ := json.Marshal(rec)
	if strings.Contains(string(whole), weatherToken) {
		t.Error("the token is in the run record")
	}
	if out := p.ok("logs", id); strings.Contains(out, weatherToken) {
		t.Error("the token is in the run's events")
	}
	it := p.dial().GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	// The payloads' bytes are read as they are (protojson would show them base64), and
	// the variable's name, which the recorded spec carries, proves the search sees them.
	events, named := 0, false
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		b, _ := proto.Marshal(ev)
		if bytes.Contains(b, []byte(weatherToken)) {
			t.Errorf("history event %d holds the token", ev.GetEventId())
		}
		named = named || bytes.Contains(b, []byte("WEATHER_A2A_TOKEN"))
	}
	if events == 0 || !named {
		t.Errorf("read %d history events, the token's variable named in them: %v; want events and the name", events, named)
	}
	if strings.Contains(p.output(), weatherToken) {
		t.Error("the token is in the worker's output")
	}
}

// recordA2ATool records TestA2AToolCallsARemote's run for the replay fixtures (version 1
// of "a2a-tools").
func recordA2ATool(t *testing.T, r *recorder) {
	exec := &weatherExecutor{}
	remote, _ := weatherRemote(t, exec)
	model := a2aToolModel()
	p := newPlatform(t)
	p.writeConfig(a2aToolConfig(t, model.Start(t), remote.URL))
	p.extraEnv = append(p.extraEnv, "WEATHER_A2A_TOKEN="+weatherToken)
	p.start()
	id := strings.TrimSpace(p.ok("agent", "forecaster", "What is the weather in Lisbon?"))
	wantPending(t, p, id, "1.1")
	p.ok("approve", id, "--by", "ada")
	p.waitStatus(id, api.StatusDone)
	r.save(p.dial(), "forecaster_approved_done.json", id, "")
}

// TestA2AToolCallsTheGateway: the remote is this platform's own gateway, its A2A face of
// agent helper (open, loopback): lead's a2a_helper call starts a run of helper through
// A2A, follows its task to completed, and the helper's answer is lead's tool result.
// Agent calls agent with nothing but A2A between them.
func TestA2AToolCallsTheGateway(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Match: "Hello from helper.", Content: "Helper said hello."},
		fakellm.Reply{Prompt: "say hello", Content: "Hello from helper."},
		fakellm.Reply{ToolCalls: []fakellm.Call{toolCall("a2a_helper", map[string]any{"message": "please say hello"})}},
	)
	p := newPlatform(t)
	p.writeConfig(fmt.Sprintf(`llm: {base_url: %s, model: fake}
agents:
  - name: helper
    sandbox: {type: virtual}
  - name: lead
    permissions: {mode: auto}
    sandbox: {type: virtual}
    a2a:
      - {name: helper, url: 'http://127.0.0.1:%d/a2a/helper', timeout: 1m}
`, model.Start(t), p.gateway))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "lead", "Ask the helper to greet."))
	rec := p.waitStatus(id, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "Helper said hello." {
		t.Fatalf("lead's result = %s (%v), want its answer from helper's\n%s", rec.Result, err, p.ok("logs", id))
	}
	var task string
	for _, e := range rec.Events {
		if e.Type != "agent_tool_result" {
			continue
		}
		var d struct{ Content string }
		_ = json.Unmarshal(e.Data, &d)
		if !strings.HasPrefix(d.Content, "Hello from helper.") || !strings.Contains(d.Content, ": completed]") {
			t.Errorf("a2a_helper's result = %q, want helper's answer from a completed task", d.Content)
		}
		if _, rest, ok := strings.Cut(d.Content, "[A2A task "); ok {
			task, _, _ = strings.Cut(rest, ",")
		}
	}
	// The task is a run of helper on the message, as the gateway's A2A face promises.
	hrec := p.record(task)
	var in api.AgentRunInput
	if err := json.Unmarshal(hrec.Payload, &in); err != nil || in.Agent != "helper" || in.Prompt != "please say hello" || hrec.Status != api.StatusDone {
		t.Errorf("task %q: run %s %s %s, want a done AgentRun of helper on the message", task, hrec.Workflow, hrec.Status, hrec.Payload)
	}
}
