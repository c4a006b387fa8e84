package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// a2aClient resolves agent's card on the platform's gateway with a2a-go's own resolver
// and returns a2a-go's own client of it, sending token.
func a2aClient(t *testing.T, p *platform, agent, token string) (*a2aclient.Client, *a2a.AgentCard, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: withHeaders{"Authorization": "Bearer " + token}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, fmt.Sprintf("http://127.0.0.1:%d/a2a/%s", p.gateway, agent))
	if err != nil {
		return nil, nil, err
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card, nil
}

// a2aMessage is a user message with text, on task ("" for a new task).
func a2aMessage(text string, task a2a.TaskID) *a2a.MessageSendParams {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.TaskID = task
	return &a2a.MessageSendParams{Message: m}
}

// a2aTexts joins the text parts of parts.
func a2aTexts(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		if tp, ok := p.(a2a.TextPart); ok {
			out = append(out, tp.Text)
		}
	}
	return strings.Join(out, "\n")
}

// TestGatewayA2A: `worker --dev` with tokens serves its agents over A2A, driven by
// a2a-go's own client: the card names its JSON-RPC endpoint; message/send to helper
// (auto) answers the completed task with the answer as its artifact; to scribe (approve
// mode) an input-required task naming the pending write_file, approved with a message on
// the task, after which it completes; another denied through the inbox (`starter deny`)
// ends with the model's answer to the denial; tasks/get reads a task, tasks/cancel
// cancels a waiting one, and message/stream streams helper's run to a final completed.
// No token, an unknown token, the read token acting, and an unknown agent are refused.
func TestGatewayA2A(t *testing.T) {
	t.Parallel()
	const (
		opsSecret    = "ops-a2a-e2e-secret-0123456789"
		viewerSecret = "viewer-a2a-e2e-secret-0123456789"
	)
	write := func(path string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"path": path, "content": "from A2A"})
		return b
	}
	model := fakellm.New(
		fakellm.Reply{Prompt: "say hello", Content: "Hello over A2A."},
		fakellm.Reply{Prompt: "stream hello", Content: "Streamed hello."},
		fakellm.Reply{Prompt: "write the note", ToolCalls: []fakellm.Call{{Name: "write_file", Arguments: write("a2a.md")}}},
		fakellm.Reply{Prompt: "write the note", Content: "Wrote a2a.md."},
		fakellm.Reply{Prompt: "write the secret", ToolCalls: []fakellm.Call{{Name: "write_file", Arguments: write("secret.md")}}},
		fakellm.Reply{Prompt: "write the secret", Content: "I did not write it."},
		fakellm.Reply{Prompt: "write to cancel", ToolCalls: []fakellm.Call{{Name: "write_file", Arguments: write("cancel.md")}}},
	)
	p := newPlatform(t)
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake}
agents:
  - name: helper
    sandbox: {type: virtual}
  - name: scribe
    permissions: {mode: approve}
    sandbox: {type: virtual}
gateway:
  tokens:
    - {name: ops,    token_env: NEXO_OPS_TOKEN,    scopes: [read, operate, approve]}
    - {name: viewer, token_env: NEXO_VIEWER_TOKEN, scopes: [read]}
`)
	p.extraEnv = append(p.extraEnv, "NEXO_OPS_TOKEN="+opsSecret, "NEXO_VIEWER_TOKEN="+viewerSecret)
	p.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Refused: no token, an unknown one, an unknown agent.
	for name, token := range map[string]string{"no token": "", "unknown token": "not-a-token-of-this-gateway"} {
		if _, _, err := a2aClient(t, p, "helper", token); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("card with %s: %v, want 401", name, err)
		}
	}
	if _, _, err := a2aClient(t, p, "nobody", opsSecret); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("card of an unknown agent: %v, want 404", err)
	}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/a2a/helper", p.gateway), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("JSON-RPC without a token: %s, want 401", resp.Status)
	}

	helper, card, err := a2aClient(t, p, "helper", opsSecret)
	if err != nil {
		t.Fatalf("helper's card: %v\n%s", err, p.output())
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d/a2a/helper", p.gateway); card.URL != want || card.Name != "helper" {
		t.Errorf("card = %s at %s, want helper at %s", card.Name, card.URL, want)
	}

	send := func(c *a2aclient.Client, params *a2a.MessageSendParams) *a2a.Task {
		t.Helper()
		res, err := c.SendMessage(ctx, params)
		if err != nil {
			t.Fatalf("message/send %q: %v\n%s", a2aTexts(params.Message.Parts), err, p.output())
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("message/send = %T, want a task", res)
		}
		return task
	}

	// helper: the completed task carries the answer.
	task := send(helper, a2aMessage("please say hello", ""))
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || a2aTexts(task.Artifacts[0].Parts) != "Hello over A2A." {
		t.Fatalf("helper's task = %s %+v, want completed with the answer", task.Status.State, task.Artifacts)
	}
	rec := p.record(string(task.ID))
	var in api.AgentRunInput
	if err := json.Unmarshal(rec.Payload, &in); err != nil || rec.Workflow != api.WorkflowAgentRun || in.Agent != "helper" || in.Prompt != "please say hello" {
		t.Errorf("run %s: %s %s, want an AgentRun of helper on the message's text", task.ID, rec.Workflow, rec.Payload)
	}

	// The read token reads tasks, and acts on nothing.
	viewer, _, err := a2aClient(t, p, "scribe", viewerSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := viewer.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err == nil || !strings.Contains(err.Error(), "is not a run of agent scribe") {
		t.Errorf("tasks/get of helper's task on scribe = %v, %v, want task not found", got, err)
	}
	if _, err := viewer.SendMessage(ctx, a2aMessage("please write the note", "")); err == nil || !strings.Contains(err.Error(), "token viewer lacks scope operate, which message/send needs (it has: read)") {
		t.Errorf("viewer's message/send: %v, want refused naming scope operate", err)
	}

	// scribe: input-required with the pending call, approved through A2A.
	scribe, _, err := a2aClient(t, p, "scribe", opsSecret)
	if err != nil {
		t.Fatal(err)
	}
	task = send(scribe, a2aMessage("please write the note", ""))
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil ||
		!strings.Contains(a2aTexts(task.Status.Message.Parts), "waits for approval: write_file") {
		t.Fatalf("scribe's task = %s %+v, want input-required naming write_file", task.Status.State, task.Status.Message)
	}
	if _, err := viewer.SendMessage(ctx, a2aMessage("approve", task.ID)); err == nil || !strings.Contains(err.Error(), "lacks scope approve") {
		t.Errorf("viewer's approval: %v, want refused naming scope approve", err)
	}
	if got, err := viewer.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("viewer's tasks/get = %v, %v, want still input-required", got, err)
	}
	done := send(scribe, a2aMessage("approve", task.ID))
	if done.ID != task.ID || done.Status.State != a2a.TaskStateCompleted || len(done.Artifacts) != 1 || a2aTexts(done.Artifacts[0].Parts) != "Wrote a2a.md." {
		t.Fatalf("approved task = %s %s %+v, want %s completed with the answer\n%s", done.ID, done.Status.State, done.Artifacts, task.ID, p.output())
	}
	if rec := p.record(string(task.ID)); countEvents(rec, "approval_requested") != 1 || !strings.Contains(string(rec.Result), "Wrote a2a.md.") {
		t.Errorf("run %s: %d approval_requested, result %s", task.ID, countEvents(rec, "approval_requested"), rec.Result)
	}

	// Another, denied through the inbox; tasks/get sees it end.
	task = send(scribe, a2aMessage("please write the secret", ""))
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("scribe's second task = %s, want input-required", task.Status.State)
	}
	p.ok("deny", string(task.ID), "--reason", "not the secret")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := viewer.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if got.Status.State == a2a.TaskStateCompleted {
			if len(got.Artifacts) != 1 || a2aTexts(got.Artifacts[0].Parts) != "I did not write it." {
				t.Errorf("denied task's artifacts = %+v, want the model's answer to the denial", got.Artifacts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("denied task still %s after 60s", got.Status.State)
		}
	}

	// tasks/cancel cancels a waiting run.
	task = send(scribe, a2aMessage("please write to cancel", ""))
	if _, err := viewer.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err == nil || !strings.Contains(err.Error(), "lacks scope operate") {
		t.Errorf("viewer's tasks/cancel: %v, want refused naming scope operate", err)
	}
	canceled, err := scribe.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("tasks/cancel = %v, %v, want canceled", canceled, err)
	}
	if rec := p.record(string(task.ID)); rec.Status != api.StatusCanceled {
		t.Errorf("run %s after tasks/cancel is %s, want canceled", task.ID, rec.Status)
	}
	if _, err := scribe.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err == nil || !strings.Contains(err.Error(), "cannot be canceled") {
		t.Errorf("tasks/cancel of a canceled task: %v, want not cancelable", err)
	}
	if _, err := scribe.GetTask(ctx, &a2a.TaskQueryParams{ID: "019aaaaa-0000-7000-8000-000000000000"}); err == nil || !strings.Contains(err.Error(), "task not found") {
		t.Errorf("tasks/get of an unknown task: %v, want task not found", err)
	}

	// message/stream: status updates to a final completed, with the answer.
	var (
		states   []a2a.TaskState
		final    bool
		artifact string
	)
	for ev, err := range helper.SendStreamingMessage(ctx, a2aMessage("please stream hello", "")) {
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
			artifact = a2aTexts(e.Artifact.Parts)
		}
	}
	if len(states) < 2 || states[len(states)-1] != a2a.TaskStateCompleted || !final || artifact != "Streamed hello." {
		t.Errorf("message/stream = states %v final %v artifact %q, want updates ending in a final completed, with the answer", states, final, artifact)
	}
}
