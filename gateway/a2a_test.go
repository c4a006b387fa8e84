package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// a2aConnect serves s and returns a2a-go's own client of agent's card, with token.
func a2aConnect(t *testing.T, s *Server, agent, token string) (*a2aclient.Client, *a2a.AgentCard, string) {
	t.Helper()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearerTransport{token}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, hs.URL+a2aPrefix+agent)
	if err != nil {
		t.Fatalf("resolve the card of %s: %v", agent, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("client of %s: %v", agent, err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card, hs.URL
}

func a2aSend(text string, task a2a.TaskID) *a2a.MessageSendParams {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.TaskID = task
	return &a2a.MessageSendParams{Message: m}
}

func a2aStatusText(task *a2a.Task) string {
	if task.Status.Message == nil {
		return ""
	}
	return a2aText(task.Status.Message)
}

func TestA2ACard(t *testing.T) {
	s := newServer(t, &fakeRuns{}, Options{Tokens: testTokens, Agents: []string{"scribe"}})
	_, card, base := a2aConnect(t, s, "scribe", readerSecret)
	if card.Name != "scribe" || card.URL != base+"/a2a/scribe" || !card.Capabilities.Streaming {
		t.Errorf("card = name %q url %q streaming %v, want scribe at %s/a2a/scribe with streaming", card.Name, card.URL, card.Capabilities.Streaming, base)
	}
	if _, ok := card.SecuritySchemes[a2aScheme]; !ok {
		t.Errorf("card security schemes = %v, want the bearer scheme", card.SecuritySchemes)
	}
	for _, c := range []struct {
		name, path string
		header     map[string]string
		status     int
		want       string
	}{
		{"unknown agent", "/a2a/nobody/.well-known/agent-card.json", map[string]string{"Authorization": "Bearer " + readerSecret}, 404, `agent \"nobody\" is not served over A2A here (agents: scribe)`},
		{"no token", "/a2a/scribe/.well-known/agent-card.json", nil, 401, "Authorization"},
		{"unknown token", "/a2a/scribe/.well-known/agent-card.json", map[string]string{"Authorization": "Bearer not-a-token-0123456789"}, 401, "unknown token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := do(t, s, request{method: "GET", path: c.path, header: c.header})
			if body := readBody(t, resp); resp.StatusCode != c.status || !strings.Contains(body, c.want) {
				t.Errorf("GET %s = %d %s, want %d naming %q", c.path, resp.StatusCode, body, c.status, c.want)
			}
		})
	}
}

func TestA2ASendMessage(t *testing.T) {
	var started []runs.StartRequest
	var decided []runs.Decision
	failMsg := "model said no"
	outcomes := map[string]api.Record{
		"done":    {ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusDone, Payload: json.RawMessage(`{"agent":"scribe"}`), Result: json.RawMessage(`{"agent":"scribe","content":"Wrote it.","turns":1}`)},
		"pending": agentPending(),
		"failed":  {ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusFailed, Payload: json.RawMessage(`{"agent":"scribe"}`), Error: &failMsg},
	}
	var outcome string
	f := &fakeRuns{
		start: func(_ context.Context, req runs.StartRequest) (string, error) {
			started = append(started, req)
			return "run-1", nil
		},
		get: getRecords(agentPending(), api.Record{ID: "run-doc", Workflow: "DocumentApproval", Status: api.StatusRunning},
			api.Record{ID: "run-other", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning, Payload: json.RawMessage(`{"agent":"other"}`)}),
		follow: func(_ context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
			if fn(api.Record{ID: id, Workflow: api.WorkflowAgentRun, Status: api.StatusRunning}) {
				t.Errorf("message/send stopped following a running run")
			}
			rec := outcomes[outcome]
			if !fn(rec) {
				t.Errorf("message/send goes on following a %s run", rec.Status)
			}
			return rec, nil
		},
		decideRecord: func(_ context.Context, rec api.Record, d runs.Decision) (string, error) {
			decided = append(decided, d)
			return "decided", nil
		},
	}
	s := newServer(t, f, Options{Tokens: testTokens, Agents: []string{"scribe"}})
	c, _, _ := a2aConnect(t, s, "scribe", allSecret)
	ctx := context.Background()

	send := func(t *testing.T, p *a2a.MessageSendParams) *a2a.Task {
		t.Helper()
		res, err := c.SendMessage(ctx, p)
		if err != nil {
			t.Fatalf("message/send: %v", err)
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("message/send = %T, want a task", res)
		}
		return task
	}

	outcome = "done"
	task := send(t, a2aSend("Write a note.", ""))
	if task.ID != "run-1" || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("task = %+v, want run-1 completed with one artifact", task)
	}
	if got := a2aArtifactText(task.Artifacts[0]); got != "Wrote it." {
		t.Errorf("artifact text = %q, want the agent's answer", got)
	}
	if len(started) != 1 || started[0].Workflow != api.WorkflowAgentRun || string(started[0].Payload) != `{"agent":"scribe","prompt":"Write a note."}` {
		t.Errorf("started %+v, want one AgentRun of scribe on the message's text", started)
	}

	outcome = "failed"
	if task := send(t, a2aSend("Write a note.", "")); task.Status.State != a2a.TaskStateFailed || a2aStatusText(task) != failMsg {
		t.Errorf("task of a failed run = %s %q, want failed with the run's error", task.Status.State, a2aStatusText(task))
	}

	outcome = "pending"
	task = send(t, a2aSend("Write a note.", ""))
	if task.Status.State != a2a.TaskStateInputRequired || !strings.Contains(a2aStatusText(task), "tool call 2.1 waits for approval: write_file") {
		t.Errorf("task waiting for approval = %s %q, want input-required naming call 2.1 and write_file", task.Status.State, a2aStatusText(task))
	}

	// Answer it: approve, then a denial with its reason.
	send(t, a2aSend("Approve.", "run-agent"))
	send(t, a2aSend("deny not that file", "run-agent"))
	if len(decided) != 2 || !decided[0].Approved || decided[0].CallID != "2.1" || decided[0].By != "ci" ||
		decided[1].Approved || decided[1].Reason != "not that file" {
		t.Errorf("decisions = %+v, want call 2.1 approved by ci, then denied with its reason", decided)
	}

	for _, bad := range []struct {
		name string
		p    *a2a.MessageSendParams
		want string
	}{
		{"denial without reason", a2aSend("deny", "run-agent"), "a denial needs a reason"},
		{"neither approve nor deny", a2aSend("maybe later", "run-agent"), `answer "approve" or "deny <reason>", not "maybe later"`},
		{"unknown task", a2aSend("approve", "run-nope"), "task not found"},
		{"task of another workflow", a2aSend("approve", "run-doc"), "task run-doc is not a run of agent scribe"},
		{"task of another agent", a2aSend("approve", "run-other"), "task run-other is not a run of agent scribe"},
		{"no text", &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"x": 1}})}, "the message has no text"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := c.SendMessage(ctx, bad.p); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("message/send = %v, want an error naming %q", err, bad.want)
			}
		})
	}
	if len(decided) != 2 {
		t.Errorf("bad answers decided %+v", decided[2:])
	}
}

func a2aArtifactText(a *a2a.Artifact) string {
	for _, p := range a.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			return tp.Text
		}
	}
	return ""
}

func TestA2AScopesAndLimits(t *testing.T) {
	var decided []runs.Decision
	f := everythingWorks(&decided)
	starts := 0
	f.start = func(context.Context, runs.StartRequest) (string, error) { starts++; return "run-new", nil }
	cancels := 0
	f.cancel = func(context.Context, string) (string, error) { cancels++; return "canceled", nil }
	tokens := append(testTokens, Token{Name: "team", Secret: "team-secret-0123456789", Scopes: api.Scopes, Agents: []string{"other"}})
	s := newServer(t, f, Options{Tokens: tokens, Agents: []string{"scribe", "other"}})
	ctx := context.Background()

	reader, _, _ := a2aConnect(t, s, "scribe", readerSecret)
	if _, err := reader.SendMessage(ctx, a2aSend("Write a note.", "")); err == nil || !strings.Contains(err.Error(), "token reader lacks scope operate, which message/send needs") {
		t.Errorf("message/send with a read token = %v, want refused naming scope operate", err)
	}
	if _, err := reader.CancelTask(ctx, &a2a.TaskIDParams{ID: "run-agent"}); err == nil || !strings.Contains(err.Error(), "lacks scope operate, which tasks/cancel needs") {
		t.Errorf("tasks/cancel with a read token = %v, want refused naming scope operate", err)
	}
	if task, err := reader.GetTask(ctx, &a2a.TaskQueryParams{ID: "run-agent"}); err != nil || task.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("tasks/get with a read token = %v, %v, want the input-required task", task, err)
	}
	operator, _, _ := a2aConnect(t, s, "scribe", operatorSecret)
	if _, err := operator.GetTask(ctx, &a2a.TaskQueryParams{ID: "run-agent"}); err == nil || !strings.Contains(err.Error(), "lacks scope read, which tasks/get needs") {
		t.Errorf("tasks/get with an operate token = %v, want refused naming scope read", err)
	}
	if _, err := operator.SendMessage(ctx, a2aSend("approve", "run-agent")); err == nil || !strings.Contains(err.Error(), "lacks scope approve") {
		t.Errorf("an approval with an operate token = %v, want refused naming scope approve", err)
	}
	if starts != 0 || cancels != 0 || len(decided) != 0 {
		t.Errorf("refused calls did something: %d starts, %d cancels, %d decisions", starts, cancels, len(decided))
	}

	// A token limited to agent other: scribe's card and endpoint are unknown to it.
	resp := do(t, s, request{method: "GET", path: "/a2a/scribe/.well-known/agent-card.json", header: map[string]string{"Authorization": "Bearer team-secret-0123456789"}})
	if body := readBody(t, resp); resp.StatusCode != 404 || !strings.Contains(body, `agent \"scribe\" is not served`) {
		t.Errorf("card of scribe for a token limited to other = %d %s, want 404", resp.StatusCode, body)
	}
	resp = do(t, s, request{method: "POST", path: "/a2a/scribe", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"run-agent"}}`,
		header: map[string]string{"Authorization": "Bearer team-secret-0123456789", "Content-Type": "application/json"}})
	if body := readBody(t, resp); resp.StatusCode != 404 || !strings.Contains(body, `agent \"scribe\" is not served`) {
		t.Errorf("POST /a2a/scribe for a token limited to other = %d %s, want 404 naming it", resp.StatusCode, body)
	}
}

func TestA2ABadRequests(t *testing.T) {
	s := newServer(t, everythingWorks(new([]runs.Decision)), Options{Tokens: testTokens, Agents: []string{"scribe"}})
	auth := map[string]string{"Authorization": "Bearer " + allSecret, "Content-Type": "application/json"}
	for _, c := range []struct {
		name, path, body string
		header           map[string]string
		status           int
		want             string
	}{
		{"no token", "/a2a/scribe", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"run-agent"}}`, map[string]string{"Content-Type": "application/json"}, 401, "Authorization"},
		{"unknown agent", "/a2a/nobody", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, auth, 404, `agent \"nobody\" is not served over A2A here`},
		{"malformed JSON", "/a2a/scribe", `{"jsonrpc":`, auth, 200, `"code":-32700`},
		{"not JSON-RPC 2.0", "/a2a/scribe", `{"id":1,"method":"tasks/get"}`, auth, 200, `"code":-32600`},
		{"unknown method", "/a2a/scribe", `{"jsonrpc":"2.0","id":1,"method":"tasks/fly","params":{}}`, auth, 200, `"code":-32601`},
		{"unknown task", "/a2a/scribe", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"run-nope"}}`, auth, 200, `"code":-32001`},
		{"no task id", "/a2a/scribe", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}`, auth, 200, "id is required"},
		{"push notifications", "/a2a/scribe", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"id":"run-agent"}}`, auth, 200, `"code":-32003`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := do(t, s, request{method: "POST", path: c.path, body: c.body, header: c.header})
			if body := readBody(t, resp); resp.StatusCode != c.status || !strings.Contains(body, c.want) {
				t.Errorf("POST %s %s = %d %s, want %d with %q", c.path, c.body, resp.StatusCode, body, c.status, c.want)
			}
		})
	}
}

func TestA2ACancelAndStream(t *testing.T) {
	var canceled []string
	running := api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning, Payload: json.RawMessage(`{"agent":"scribe"}`)}
	done := api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusDone, Payload: running.Payload, Result: json.RawMessage(`{"agent":"scribe","content":"Wrote it."}`)}
	gone := api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusCanceled, Payload: running.Payload}
	var after api.Record
	f := &fakeRuns{
		start: func(context.Context, runs.StartRequest) (string, error) { return "run-1", nil },
		get:   getRecords(running),
		cancel: func(_ context.Context, id string) (string, error) {
			canceled = append(canceled, id)
			return "canceled", nil
		},
		follow: func(_ context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
			for _, rec := range []api.Record{running, running, after} {
				if fn(rec) {
					return rec, nil
				}
			}
			t.Errorf("follow went on after a %s run", after.Status)
			return after, nil
		},
	}
	s := newServer(t, f, Options{Tokens: testTokens, Agents: []string{"scribe"}})
	c, _, _ := a2aConnect(t, s, "scribe", allSecret)
	ctx := context.Background()

	after = gone
	task, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: "run-1"})
	if err != nil || task.Status.State != a2a.TaskStateCanceled || len(canceled) != 1 || canceled[0] != "run-1" {
		t.Errorf("tasks/cancel = %v, %v (canceled %v), want run-1 canceled", task, err, canceled)
	}

	after = done
	var states []a2a.TaskState
	var final bool
	var artifact string
	for ev, err := range c.SendStreamingMessage(ctx, a2aSend("Write a note.", "")) {
		if err != nil {
			t.Fatalf("message/stream: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			states = append(states, e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, e.Status.State)
			final = e.Final
		case *a2a.TaskArtifactUpdateEvent:
			artifact = a2aArtifactText(e.Artifact)
		}
	}
	if len(states) != 2 || states[0] != a2a.TaskStateWorking || states[1] != a2a.TaskStateCompleted || !final || artifact != "Wrote it." {
		t.Errorf("message/stream = states %v final %v artifact %q, want working then a final completed, and the answer as an artifact", states, final, artifact)
	}
}

// TestA2AStreamSettled: a stream of a run that settled before it began still ends with
// the result and a final status update; a stream of a run waiting for a decision ends
// input-required, naming the call; tasks/resubscribe needs scope read.
func TestA2AStreamSettled(t *testing.T) {
	done := api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Status: api.StatusDone, Payload: json.RawMessage(`{"agent":"scribe"}`), Result: json.RawMessage(`{"agent":"scribe","content":"Wrote it."}`)}
	var outcome api.Record
	f := &fakeRuns{
		start: func(context.Context, runs.StartRequest) (string, error) { return outcome.ID, nil },
		get:   getRecords(done, agentPending()),
		follow: func(_ context.Context, _ string, fn func(api.Record) bool) (api.Record, error) {
			if !fn(outcome) {
				t.Errorf("stream goes on after a %s run", outcome.Status)
			}
			return outcome, nil
		},
	}
	s := newServer(t, f, Options{Tokens: testTokens, Agents: []string{"scribe"}})
	c, _, _ := a2aConnect(t, s, "scribe", allSecret)
	ctx := context.Background()
	collect := func(events func(func(a2a.Event, error) bool)) (kinds []string, last *a2a.TaskStatusUpdateEvent, artifact string) {
		for ev, err := range events {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch e := ev.(type) {
			case *a2a.Task:
				kinds = append(kinds, "task")
			case *a2a.TaskStatusUpdateEvent:
				kinds = append(kinds, "status")
				last = e
			case *a2a.TaskArtifactUpdateEvent:
				kinds = append(kinds, "artifact")
				artifact = a2aArtifactText(e.Artifact)
			}
		}
		return kinds, last, artifact
	}

	outcome = done
	kinds, last, artifact := collect(c.SendStreamingMessage(ctx, a2aSend("Write a note.", "")))
	if strings.Join(kinds, ",") != "task,artifact,status" || last == nil || !last.Final || last.Status.State != a2a.TaskStateCompleted || artifact != "Wrote it." {
		t.Errorf("stream of a done run = %v (last %+v, artifact %q), want the task, the answer and a final completed", kinds, last, artifact)
	}

	outcome = agentPending()
	kinds, last, _ = collect(c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: "run-agent"}))
	if strings.Join(kinds, ",") != "task,status" || last == nil || !last.Final || last.Status.State != a2a.TaskStateInputRequired ||
		!strings.Contains(a2aText(last.Status.Message), "tool call 2.1 waits for approval") {
		t.Errorf("resubscribe to a waiting run = %v (last %+v), want the task and a final input-required naming call 2.1", kinds, last)
	}

	operator, _, _ := a2aConnect(t, s, "scribe", operatorSecret)
	for _, err := range operator.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: "run-agent"}) {
		if err == nil || !strings.Contains(err.Error(), "lacks scope read, which tasks/resubscribe needs") {
			t.Errorf("resubscribe with an operate token: %v, want refused naming scope read", err)
		}
		break
	}
}
