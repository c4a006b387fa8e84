package workflows

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// typedSpec is an agent whose final reply must be {"title": string, "score": integer}.
func typedSpec(retries *int) agents.Spec {
	return agents.Spec{Name: "grader", Instructions: "You grade essays.", OutputRetries: retries,
		OutputSchema: map[string]any{
			"type":                 "object",
			"required":             []any{"title", "score"},
			"properties":           map[string]any{"title": map[string]any{"type": "string"}, "score": map[string]any{"type": "integer"}},
			"additionalProperties": false,
		}}
}

func runTyped(t *testing.T, spec agents.Spec, script ...string) (*agentFakes, api.Record, json.RawMessage, error) {
	t.Helper()
	env := newEnv(t)
	f := &agentFakes{spec: spec}
	for _, s := range script {
		f.script = append(f.script, text(s))
	}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: spec.Name, Prompt: "grade it"}))
	rec := queryRecord(t, env)
	if err := env.GetWorkflowError(); err != nil {
		return f, rec, nil, err
	}
	var out json.RawMessage
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return f, rec, out, nil
}

func TestTypedOutputValidFirstTime(t *testing.T) {
	t.Parallel()
	// A fenced reply is read inside its fence.
	f, rec, out, err := runTyped(t, typedSpec(nil), "```json\n{\"title\": \"On rivers\", \"score\": 7}\n```")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"title":"On rivers","score":7}` {
		t.Errorf("workflow result = %s, want the validated object alone", out)
	}
	if string(rec.Result) != `{"title":"On rivers","score":7}` {
		t.Errorf("record result = %s, want the validated object", rec.Result)
	}
	if len(f.requests) != 1 {
		t.Fatalf("model calls = %d, want 1", len(f.requests))
	}
	sys := f.requests[0].System
	if !strings.HasPrefix(sys, "You grade essays.") || !strings.Contains(sys, "JSON Schema") || !strings.Contains(sys, `"score":{"type":"integer"}`) {
		t.Errorf("system prompt does not carry the schema:\n%s", sys)
	}
	if n := countEvents(rec, api.EventOutputInvalid); n != 0 {
		t.Errorf("%d output_invalid events, want none", n)
	}
}

func TestTypedOutputOneRetryThenValid(t *testing.T) {
	t.Parallel()
	f, rec, out, err := runTyped(t, typedSpec(nil),
		`Sure! The title is "On rivers".`,
		`{"title": "On rivers", "score": 7}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"title":"On rivers","score":7}` || string(rec.Result) != string(out) {
		t.Errorf("result = %s (record %s), want the object of the second reply", out, rec.Result)
	}
	if len(f.requests) != 2 {
		t.Fatalf("model calls = %d, want 2", len(f.requests))
	}
	msgs := f.requests[1].Messages
	last := msgs[len(msgs)-1]
	if last.Role != api.RoleUser || !strings.Contains(last.Content, "is not JSON") || !strings.Contains(last.Content, `Sure! The title is "On rivers".`) {
		t.Errorf("the retry's last message = %+v, want a user message with the reply and the error", last)
	}
	evs := eventsOf(rec, api.EventOutputInvalid)
	if len(evs) != 1 || evs[0]["retries_left"] != float64(2) || !strings.Contains(evs[0]["error"].(string), "not JSON") {
		t.Errorf("output_invalid events = %v, want one with 2 retries left", evs)
	}
	if done := eventsOf(rec, "agent_done"); len(done) != 1 || done[0]["turns"] != float64(2) {
		t.Errorf("agent_done = %v, want one at turn 2", done)
	}
}

func TestTypedOutputRetriesExhaustedFails(t *testing.T) {
	t.Parallel()
	one := 1
	f, rec, _, err := runTyped(t, typedSpec(&one),
		`{"title": "On rivers"}`,
		`{"title": "On rivers", "score": "seven"}`,
		`{"title": "never asked", "score": 1}`)
	if err == nil {
		t.Fatal("the run succeeded, want it failed after its one retry")
	}
	if !strings.Contains(err.Error(), ErrOutputInvalid.Error()) || !strings.Contains(err.Error(), "score") ||
		!strings.Contains(err.Error(), "output_retries 1") {
		t.Errorf("error = %v, want it to name the output check and the failed property", err)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Errorf("error %T is not an application error", err)
	}
	if len(f.requests) != 2 {
		t.Errorf("model calls = %d, want 2 (the reply and one retry)", len(f.requests))
	}
	if rec.Status != api.StatusFailed || rec.Error == nil || !strings.Contains(*rec.Error, ErrOutputInvalid.Error()) {
		t.Errorf("record status %s error %v, want failed naming the output check", rec.Status, rec.Error)
	}
	evs := eventsOf(rec, api.EventOutputInvalid)
	if len(evs) != 2 || evs[1]["retries_left"] != float64(0) {
		t.Errorf("output_invalid events = %v, want two, the last with no retry left", evs)
	}
}

func TestTypedOutputNoRetries(t *testing.T) {
	t.Parallel()
	zero := 0
	f, rec, _, err := runTyped(t, typedSpec(&zero), `not json`, `{"title": "x", "score": 1}`)
	if err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("error = %v, want the run failed on the first reply", err)
	}
	if len(f.requests) != 1 || countEvents(rec, api.EventOutputInvalid) != 1 {
		t.Errorf("model calls = %d, output_invalid = %d; want 1 and 1", len(f.requests), countEvents(rec, api.EventOutputInvalid))
	}
}

func TestUntypedAgentResultUnchanged(t *testing.T) {
	t.Parallel()
	spec := typedSpec(nil)
	spec.OutputSchema = nil
	f, rec, out, err := runTyped(t, spec, `not json, and fine`)
	if err != nil {
		t.Fatal(err)
	}
	var res api.AgentResult
	if err := json.Unmarshal(out, &res); err != nil || res.Content != "not json, and fine" || res.Output != nil || res.Turns != 1 {
		t.Errorf("result = %s (%v), want the AgentResult with the text", out, err)
	}
	if f.requests[0].KeepReply {
		t.Errorf("an untyped agent's model call asked for the reply whole (KeepReply): its long replies belong in the store")
	}
	if string(rec.Result) != string(out) || f.requests[0].System != "You grade essays." {
		t.Errorf("record result %s, system %q", rec.Result, f.requests[0].System)
	}
}

func TestTypedOutputBadSchemaFailsTheRun(t *testing.T) {
	t.Parallel()
	spec := typedSpec(nil)
	spec.OutputSchema = map[string]any{"pattern": "("}
	f, _, _, err := runTyped(t, spec, `{}`)
	if err == nil || !strings.Contains(err.Error(), "agent grader: output_schema is not a valid JSON Schema") {
		t.Fatalf("error = %v, want the schema named", err)
	}
	if len(f.requests) != 0 {
		t.Errorf("model calls = %d, want none", len(f.requests))
	}
}

// A typed agent's model calls ask for the reply whole (KeepReply), and a long one (the
// activity stores it and keeps it whole, with its reference) is checked and returned whole,
// while its agent_done event keeps a preview and the reference, never the bulk.
func TestTypedOutputLongReplyWhole(t *testing.T) {
	t.Parallel()
	title := strings.Repeat("a long title ", 1500) // ~19,500 bytes
	reply := `{"title": "` + title + `", "score": 9}`
	env := newEnv(t)
	f := &agentFakes{spec: typedSpec(nil)}
	f.script = []api.ChatMessage{{Role: api.RoleAssistant, Content: reply, ContentRef: strings.Repeat("cd", 32), ContentBytes: len(reply)}}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "grader", Prompt: "grade it"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Title string `json:"title"`
		Score int    `json:"score"`
	}
	if err := env.GetWorkflowResult(&out); err != nil || out.Title != title || out.Score != 9 {
		t.Errorf("result title %d bytes, score %d, %v; want the whole object", len(out.Title), out.Score, err)
	}
	if !f.requests[0].KeepReply {
		t.Errorf("a typed agent's model call did not ask for the reply whole (KeepReply)")
	}
	rec := queryRecord(t, env)
	for _, ev := range rec.Events {
		if ev.Type != api.EventAgentDone {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if c, _ := d["content"].(string); len(c) > api.PreviewBytes+100 || !strings.HasPrefix(c, `{"title": "a long title`) || d["content_ref"] != strings.Repeat("cd", 32) {
			t.Errorf("agent_done carries %d bytes of content, ref %v; want a preview and the reference", len(c), d["content_ref"])
		}
	}
}
