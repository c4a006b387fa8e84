package workflows

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// forkOfTurn2 is a fork at turn 2 of a session whose turn 1 was "My name is Mac.".
func forkOfTurn2(snapshot string) *api.SessionFork {
	return &api.SessionFork{Session: "assistant/src", Turn: 2, Snapshot: snapshot, Messages: []api.ChatMessage{
		{Role: api.RoleUser, Content: "My name is Mac."},
		{Role: api.RoleAssistant, Content: "Nice to meet you."},
	}}
}

func TestForkedSessionStartsFromTheForkedThread(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	prompt(env, time.Minute, "What is my name?", &out)
	closeSession(env, time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "fork1", Fork: forkOfTurn2("")}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].err != nil || out[0].reply.Reply != "Your name is Mac" || out[0].reply.Turn != 1 {
		t.Fatalf("replies = %+v, want the fork's turn 1 answered from the forked thread", out)
	}
	if msgs := m.requests[0].Messages; len(msgs) != 3 || msgs[0].Content != "My name is Mac." || msgs[2].Content != "What is my name?" {
		t.Errorf("the fork's first model call carried %+v, want the forked thread then the prompt", msgs)
	}
	rec := queryRecord(t, env)
	var forked []map[string]any
	for _, e := range rec.Events {
		if e.Type == "forked_from" {
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			forked = append(forked, d)
		}
	}
	if len(forked) != 1 || forked[0]["session"] != "assistant/src" || forked[0]["turn"] != float64(2) {
		t.Errorf("forked_from events = %v, want one naming assistant/src turn 2", forked)
	}
	if rec.Events[0].Type != "forked_from" {
		t.Errorf("first event %s, want forked_from before the first turn", rec.Events[0].Type)
	}
}

// A fork that continues as new hands its restored workspace on like any session: the
// fork's snapshot is restored on the host it claimed (archiving the stream claims one),
// which the continuation carries; the thread is in the carry, so the fork is not.
func TestForkedSessionContinuedKeepsItsRestoredWorkspace(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{}
	m.register(env, sessionSpec)
	var out []promptResult
	prompt(env, time.Minute, "What is my name?", &out)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "fork2",
		ContinueAfterTurns: 1, Fork: forkOfTurn2("manifest-m1")}))
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("err = %v, want continue-as-new after one turn", err)
	}
	var next json.RawMessage
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	var in api.SessionInput
	if err := json.Unmarshal(next, &in); err != nil || in.Carry == nil {
		t.Fatalf("continued input = %s (%v)", next, err)
	}
	if h := in.Carry.Host; h == nil || h.Snapshot == nil || h.Snapshot.Manifest != "manifest-m1" {
		t.Errorf("continued host = %+v, want the host holding the fork's snapshot manifest-m1", h)
	}
	if in.Fork != nil {
		t.Errorf("continued fork = %+v, want none: the workspace is restored and the thread carried", in.Fork)
	}

	// The continuation keeps the thread from its carry and records no second forked_from.
	env2 := newEnv(t)
	m2 := &echoModel{}
	m2.register(env2, sessionSpec)
	var out2 []promptResult
	in.ContinueAfterTurns = 0
	prompt(env2, time.Minute, "What is my name?", &out2)
	closeSession(env2, time.Hour)
	env2.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, in))
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out2) != 1 || out2[0].reply.Turn != 2 || out2[0].reply.Reply != "Your name is Mac" {
		t.Errorf("the continuation's reply = %+v, want turn 2 still knowing the forked thread", out2)
	}
	for _, e := range queryRecord(t, env2).Events {
		if e.Type == "forked_from" {
			t.Errorf("the continuation recorded forked_from again: %s", e.Data)
		}
	}
}
