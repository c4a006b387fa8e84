package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// waitBudgetPause polls the run id (a session's workflow id) until it is suspended on a
// budget pause and returns the pause's call id. The session may not exist yet: its first
// prompt creates it.
func (p *platform) waitBudgetPause(id string) string {
	p.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if r := p.starter("show", id, "--json"); r.code == 0 {
			var rec api.Record
			if err := json.Unmarshal([]byte(r.stdout), &rec); err == nil && rec.Status == api.StatusSuspended {
				if a, ok := rec.Approval(); ok && a.Capability == api.CapabilityBudget {
					return a.CallID
				}
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not pause on its budget within 60s\nworker:\n%s", id, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSessionBudgetRaiseReturnsThePrompt (hardening round two, item 2): a session turn
// that pauses on its budget is raised by `starter approve <session> --budget +N`, and the
// `session prompt` that waits for that turn returns the turn's answer, exit 0, in every way
// the raise can come: while the prompt's update waits, in the run the session continued as
// new into, through the HTTP API, with approve --wait; and a prompt sent through the HTTP
// API answers once the starter raised its turn.
func TestSessionBudgetRaiseReturnsThePrompt(t *testing.T) {
	t.Parallel()
	var replies []fakellm.Reply
	for _, answer := range []string{"There are no files.", "Still no files.", "No files, as before.", "None, a fourth time.", "Through the API: none."} {
		replies = append(replies,
			fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "glob", Arguments: json.RawMessage(`{"pattern":"*"}`)}}},
			fakellm.Reply{Content: answer})
	}
	model := fakellm.New(replies...)
	p := newPlatform(t)
	p.writeConfig(budgetConfig(t, model.Start(t)))
	p.start()
	id := api.SessionID("counter", "desk")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// prompt starts `session prompt` in the background, waits for its turn's budget
	// pause, lets raise decide it and returns what the prompt printed once it exited.
	prompt := func(turn int, text string, raise func(call string, bg *bgStarter)) (string, string) {
		t.Helper()
		bg := p.startStarter(ctx, "session", "prompt", "counter", "desk", text, "--continue-after-turns", "1")
		call := p.waitBudgetPause(id)
		if want := "budget-" + itoa(turn) + ".2"; call != want {
			t.Errorf("turn %d paused on %s, want %s", turn, call, want)
		}
		raise(call, bg)
		done := make(chan error, 1)
		go func() { done <- bg.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("turn %d: session prompt: %v\nstdout: %s\nstderr: %s\nworker:\n%s", turn, err, bg.Stdout(), bg.Stderr(), p.output())
			}
		case <-time.After(60 * time.Second):
			_ = bg.cmd.Process.Kill()
			<-done
			t.Fatalf("turn %d: session prompt still waits 60s after the raise\nstdout: %s\nstderr: %s\nworker:\n%s", turn, bg.Stdout(), bg.Stderr(), p.output())
		}
		return bg.Stdout(), bg.Stderr()
	}

	// 1. Raised with the starter while the prompt's update waits: first by too little, which
	// the starter says (the turn pauses again at once and the prompt goes on waiting, naming
	// the new pause), then enough.
	out, errOut := prompt(1, "Count the files.", func(call string, bg *bgStarter) {
		if got := p.ok("approve", id, "--budget", "+1"); !strings.Contains(got, "raised the budget of run "+id+" by +1 tokens ("+call+"), which is not enough: agent counter used ") ||
			!strings.Contains(got, " of 2 tokens in this turn, so it pauses again") {
			t.Errorf("approve --budget +1 on a turn that used more: %s", got)
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			if again := p.waitBudgetPause(id); again != call {
				if again != call+"-2" {
					t.Errorf("the turn paused again on %s, want %s-2", again, call)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the turn did not pause again after a raise that was not enough")
			}
			time.Sleep(100 * time.Millisecond)
		}
		// As a user would: raise once the prompt said what it waits for.
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(bg.Stderr(), "(call "+call+"-2)"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the prompt did not name the second pause:\n%s", bg.Stderr())
			}
		}
		if got := p.ok("approve", id, "--budget", "+50000"); !strings.Contains(got, "raised the budget of run "+id+" by +50000 tokens ("+call+"-2); the agent goes on") {
			t.Errorf("approve --budget: %s", got)
		}
	})
	if strings.TrimSpace(out) != "There are no files." {
		t.Errorf("turn 1: prompt printed %q (stderr %q), want the turn's answer", out, errOut)
	}
	// The notice of a pause reads as one (its figures, not its JSON) with the command it takes.
	if !strings.Contains(errOut, "waiting for your raise of its budget (call budget-1.2-2): agent counter used ") ||
		!strings.Contains(errOut, "starter approve "+id+" --budget +N") || strings.Contains(errOut, `{"agent"`) {
		t.Errorf("turn 1: the prompt's stderr does not name the pause and how to raise it:\n%s", errOut)
	}

	// 2. The session continued as new after turn 1 (--continue-after-turns 1): the new
	// run's turn pauses and is raised there.
	out, _ = prompt(2, "Count them again.", func(string, *bgStarter) { p.ok("approve", id, "--budget", "+50k") })
	if strings.TrimSpace(out) != "Still no files." {
		t.Errorf("turn 2 (after continue-as-new): prompt printed %q, want the turn's answer", out)
	}

	// 3. Raised through the HTTP API.
	g := gateway(t, p)
	out, _ = prompt(3, "Count them once more.", func(call string, _ *bgStarter) {
		if status, b := g.call("POST", "/v1/runs/"+id+"/approvals/"+call, map[string]any{"action": "approve", "budget": map[string]any{"tokens": 1000}}); status != 202 {
			t.Errorf("API raise of %s: %d %s", call, status, b)
		}
	})
	if strings.TrimSpace(out) != "No files, as before." {
		t.Errorf("turn 3 (raised through the API): prompt printed %q, want the turn's answer", out)
	}

	// 4. Raised with approve --wait, which follows the turn to its end and prints the
	// turn's reply alone on stdout, like the prompt (issue 29 item 9).
	var waited result
	out, _ = prompt(4, "Count them a fourth time.", func(string, *bgStarter) { waited = p.starter("approve", id, "--budget", "+50000", "--wait") })
	if strings.TrimSpace(out) != "None, a fourth time." {
		t.Errorf("turn 4 (raised with approve --wait): prompt printed %q, want the turn's answer", out)
	}
	if waited.code != 0 || strings.TrimSpace(waited.stdout) != "None, a fourth time." || !strings.Contains(waited.stderr, "raised the budget of run "+id) ||
		!strings.Contains(waited.stderr, "turn 4 of session "+id+" ended") {
		t.Errorf("approve --budget --wait: exit %d\nstdout: %s\nstderr: %s", waited.code, waited.stdout, waited.stderr)
	}

	// 5. Prompted through the HTTP API (the request lasts as long as the turn), raised with
	// the starter: the API answers the turn's reply.
	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", g.base+"/v1/sessions/counter/desk/prompt", strings.NewReader(`{"text": "Count them through the API."}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b), err}
	}()
	if call := p.waitBudgetPause(id); call != "budget-5.2" {
		t.Errorf("turn 5 paused on %s, want budget-5.2", call)
	}
	p.ok("approve", id, "--budget", "+50000")
	select {
	case a := <-answered:
		var rep api.PromptReply
		if a.err != nil || a.status != 200 || json.Unmarshal([]byte(a.body), &rep) != nil || rep.Reply != "Through the API: none." || rep.Turn != 5 {
			t.Errorf("POST prompt, raised with the starter: %d %s (%v), want 200 and turn 5's reply", a.status, a.body, a.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the API's prompt still waits 60s after the raise\nworker:\n%s", p.output())
	}

	view := p.ok("session", "show", "counter", "desk", "--json")
	var v api.SessionView
	if err := json.Unmarshal([]byte(view), &v); err != nil {
		t.Fatal(err)
	}
	if v.TurnCount != 5 || v.Runs < 5 {
		t.Errorf("session: %d turns over %d runs, want 5 turns over 5 runs (one continue-as-new per turn)", v.TurnCount, v.Runs)
	}
}
