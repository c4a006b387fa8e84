package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestSessionPromptOptionsInterruptSteer drives a session through the real starter: a
// prompt with --dir and --max-turns, one whose --max-turns ends it, a turn interrupted in
// a long shell call, a turn steered while its shell call runs, and the refusals of bad
// options and of an interrupt or steer with no turn running.
func TestSessionPromptOptionsInterruptSteer(t *testing.T) {
	t.Parallel()
	sessionOptsScenario(t, nil)
}

// recordSessionOpts records the session of sessionOptsScenario, idle after its turns
// (version 1 of "session-interrupt": an interrupted shell call).
func recordSessionOpts(t *testing.T, r *recorder) { sessionOptsScenario(t, r) }

func sessionOptsScenario(t *testing.T, r *recorder) {
	shell := func(cmd string) fakellm.Call {
		return fakellm.Call{Name: "shell", Arguments: json.RawMessage(fmt.Sprintf(`{"command":%q}`, cmd))}
	}
	model := fakellm.New(
		// turn 1, --dir sub: where am I?
		fakellm.Reply{ToolCalls: []fakellm.Call{shell("pwd")}},
		fakellm.Reply{Content: "You are in sub."},
		// turn 2, --max-turns 1: a second call would be needed
		fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "glob", Arguments: json.RawMessage(`{"pattern":"*"}`)}}},
		// turn 3: a long build, interrupted
		fakellm.Reply{ToolCalls: []fakellm.Call{shell("sleep 120")}},
		// turn 4: a shell call that waits for the test, steered meanwhile
		fakellm.Reply{ToolCalls: []fakellm.Call{shell("while [ ! -e go ]; do sleep 0.05; done; echo released")}},
		fakellm.Reply{Content: "Hello, and the tests pass."},
	)
	model.Index = fakellm.BySequence
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: assistant
    instructions: You are a helpful assistant with a workspace.
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
    max_turns: 5
`)
	p.writeWorkspace(map[string]string{"sub/a.txt": "a\n"})
	p.start()
	c := p.dial()
	id := api.SessionID("assistant", "opts")

	// Bad options are refused before anything is sent.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-turns", "0"}, "--max-turns 0: want a number of model calls from 1 to 1000"},
		{[]string{"--max-turns", "1001"}, "--max-turns 1001"},
		{[]string{"--dir", "../outside"}, `dir "../outside" leads outside the workspace`},
		{[]string{"--dir", "/etc"}, `dir "/etc" is absolute`},
	} {
		res := p.starter(append([]string{"session", "prompt", "assistant", "opts", "Hi."}, bad.args...)...)
		if res.code == 0 || !strings.Contains(res.stderr, bad.want) {
			t.Errorf("session prompt %v: exit %d, stderr %q; want refused: %s", bad.args, res.code, res.stderr, bad.want)
		}
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("refused prompts reached the model %d times", n)
	}

	// Turn 1: the shell runs in sub.
	if out := p.ok("session", "prompt", "assistant", "opts", "--dir", "sub", "--max-turns", "3", "Where am I?"); !strings.Contains(out, "You are in sub.") {
		t.Errorf("turn 1 replied %q", out)
	}
	reqs := model.Requests()
	if got := toolContents(reqs[1]); len(got) != 1 || !strings.Contains(got[0], filepath.Join("workspace", "sub")) {
		t.Errorf("pwd with --dir sub printed %q, want the workspace's sub directory", got)
	}

	// Turn 2: --max-turns 1 ends the turn with the turn-limit error after one model call.
	res := p.starter("session", "prompt", "assistant", "opts", "--max-turns", "1", "List everything, twice.")
	if res.code == 0 || !strings.Contains(res.stderr, "turn limit reached") || !strings.Contains(res.stderr, "max_turns 1") {
		t.Errorf("turn 2: exit %d, stderr %q; want the turn-limit error naming max_turns 1", res.code, res.stderr)
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("model calls after turn 2 = %d, want 3 (one for turn 2)", n)
	}

	// Turn 3: interrupted in its shell call.
	done := p.goStarter("session", "prompt", "assistant", "opts", "Build it.")
	waitSessionEvent(t, p, id, func(e api.Event) bool {
		return e.Type == api.StreamToolCall && strings.Contains(string(e.Data), "sleep 120")
	})
	start := time.Now()
	if out := p.ok("session", "interrupt", "assistant", "opts"); !strings.Contains(out, "interrupted turn 3") {
		t.Errorf("interrupt printed %q", out)
	}
	pr := <-done
	if pr.code != 0 || !strings.Contains(pr.stderr, "turn 3 was interrupted") {
		t.Errorf("the interrupted prompt: exit %d, stderr %q", pr.code, pr.stderr)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the interrupt took %s: the shell call was not cancelled", d)
	}
	ends := eventsOf(t, p, id, api.StreamTurnEnd)
	if len(ends) != 3 || ends[2]["interrupted"] != true {
		t.Errorf("turn_end events = %v, want the third interrupted", ends)
	}

	// Turn 4: steered while its shell call waits.
	done = p.goStarter("session", "prompt", "assistant", "opts", "Run the tests.")
	waitSessionEvent(t, p, id, func(e api.Event) bool {
		return e.Type == api.StreamToolCall && strings.Contains(string(e.Data), "released")
	})
	steered := p.goStarter("session", "prompt", "assistant", "opts", "--steer", "Also say hello.")
	waitUpdateAccepted(t, c, id, api.UpdateSteer)
	if err := os.WriteFile(filepath.Join(p.dir, "workspace", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if sr := <-steered; sr.code != 0 || !strings.Contains(sr.stdout, "turn 4 took the message") {
		t.Errorf("steer: exit %d\n%s\n%s", sr.code, sr.stdout, sr.stderr)
	}
	if pr := <-done; pr.code != 0 || !strings.Contains(pr.stdout, "Hello, and the tests pass.") {
		t.Errorf("turn 4: exit %d\n%s\n%s", pr.code, pr.stdout, pr.stderr)
	}
	reqs = model.Requests()
	if last := userMessages(reqs[len(reqs)-1]); len(last) == 0 || last[len(last)-1] != "Also say hello." {
		t.Errorf("the call after the steer had user messages %q, want the steered one last", last)
	}
	// The interrupted turn left nothing in the thread.
	for _, u := range userMessages(reqs[len(reqs)-1]) {
		if u == "Build it." || u == "List everything, twice." {
			t.Errorf("turn 4's thread holds %q, the prompt of a turn that did not finish", u)
		}
	}

	// No turn running: both refused, nothing changes.
	for _, args := range [][]string{{"session", "interrupt", "assistant", "opts"}, {"session", "prompt", "assistant", "opts", "--steer", "Anyone?"}} {
		res := p.starter(args...)
		if res.code == 0 || !strings.Contains(res.stderr, "no turn running") {
			t.Errorf("%v with no turn: exit %d, stderr %q; want refused: no turn running", args, res.code, res.stderr)
		}
	}
	if show := p.ok("session", "show", "assistant", "opts"); !strings.Contains(show, "(interrupted)") {
		t.Errorf("session show does not mark turn 3 interrupted:\n%s", show)
	}
	if r != nil {
		waitQuiet(t, c, id, "")
		r.save(c, "session_interrupted_steered_idle.json", id, "")
	}
}

// waitSessionEvent waits until the session's record has an event ok accepts.
func waitSessionEvent(t *testing.T, p *platform, id string, ok func(api.Event) bool) {
	t.Helper()
	pollUntil(t, time.Minute, "an event of session "+id, func(context.Context) error {
		for _, e := range p.record(id).Events {
			if ok(e) {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
}

// eventsOf is the data of the session's events of type typ.
func eventsOf(t *testing.T, p *platform, id, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range p.record(id).Events {
		if e.Type == typ {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

// waitUpdateAccepted waits until the session's history has accepted an update called name.
func waitUpdateAccepted(t *testing.T, c client.Client, id, name string) {
	t.Helper()
	pollUntil(t, time.Minute, name+" accepted by "+id, func(ctx context.Context) error {
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == name {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
}

// TestGatewaySessionInterrupt: through the HTTP API, an interrupt ends the turn whose
// model call is in flight (the waiting prompt answers interrupted: true), the session
// answers the next prompt, and an interrupt or a steer with no turn running is a 409.
func TestGatewaySessionInterrupt(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Match: "Hello.", Content: "Hi there."},
		fakellm.Reply{Content: "This never arrives.", Hold: "forever"},
	)
	t.Cleanup(func() { model.Release("forever") })
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	g := gateway(t, p)
	const path = "/v1/sessions/assistant/gw"

	type answer struct {
		status int
		body   []byte
	}
	held := make(chan answer, 1)
	go func() {
		status, body := g.call("POST", path+"/prompt", map[string]any{"text": "Think forever.", "max_turns": 2})
		held <- answer{status, body}
	}()
	pollUntil(t, time.Minute, "the model call in flight", func(context.Context) error {
		if n := len(model.Requests()); n != 1 {
			return fmt.Errorf("model requests = %d, want 1", n)
		}
		return nil
	})
	var ir api.InterruptReply
	if b := g.must(http.StatusOK, "POST", path+"/interrupt", nil); json.Unmarshal(b, &ir) != nil || ir.Turn != 1 {
		t.Fatalf("interrupt answered %s", b)
	}
	a := <-held
	var pr api.PromptReply
	if a.status != http.StatusOK || json.Unmarshal(a.body, &pr) != nil || !pr.Interrupted || pr.Turn != 1 || pr.Reply != "" {
		t.Fatalf("the interrupted prompt answered %d %s", a.status, a.body)
	}
	for _, c := range []struct {
		route string
		body  any
	}{{"/interrupt", nil}, {"/steer", map[string]string{"text": "Anyone?"}}} {
		status, body := g.call("POST", path+c.route, c.body)
		if status != http.StatusConflict || !strings.Contains(string(body), "no turn running") {
			t.Errorf("POST %s with no turn: %d %s, want 409 naming no turn running", c.route, status, body)
		}
	}
	if status, body := g.call("POST", path+"/prompt", map[string]any{"text": "Hello.", "max_turns": 0}); status != http.StatusBadRequest || !strings.Contains(string(body), "max_turns 0") {
		t.Errorf("max_turns 0: %d %s, want 400 naming max_turns", status, body)
	}
	var next api.PromptReply
	if b := g.must(http.StatusOK, "POST", path+"/prompt", map[string]string{"text": "Hello."}); json.Unmarshal(b, &next) != nil || next.Turn != 2 || next.Reply != "Hi there." {
		t.Fatalf("the prompt after the interrupt answered %s", b)
	}
}
