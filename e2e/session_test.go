package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

func sessionConfig(baseURL string) string {
	return `llm:
  base_url: ` + baseURL + `
  model: fake-model
agents:
  - name: assistant
    instructions: You are a helpful assistant.
`
}

func userMessages(req fakellm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m["role"] == "user" {
			s, _ := m["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

func TestSessionRemembersAcrossProcesses(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: "Nice to meet you, Mac."},
		fakellm.Reply{Content: "Your name is Mac."},
		fakellm.Reply{Content: "Your name is Mac, still."},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()

	if out := p.ok("session", "prompt", "assistant", "u42", "My name is Mac."); strings.TrimSpace(out) != "Nice to meet you, Mac." {
		t.Errorf("first reply = %q", out)
	}
	if out := p.ok("session", "prompt", "assistant", "u42", "What is my name?"); strings.TrimSpace(out) != "Your name is Mac." {
		t.Errorf("second reply = %q", out)
	}
	reqs := model.Requests()
	if got := userMessages(reqs[1]); len(got) != 2 || got[0] != "My name is Mac." {
		t.Fatalf("second request's user messages = %q, want the first turn carried", got)
	}
	if sys, _ := reqs[1].Messages[0]["content"].(string); reqs[1].Messages[0]["role"] != "system" || !strings.HasPrefix(sys, "You are a helpful assistant.") {
		t.Errorf("first message = %v, want the instructions as the system message", reqs[1].Messages[0])
	}
	systems := 0
	for _, m := range reqs[1].Messages {
		if m["role"] == "system" {
			systems++
		}
	}
	if systems != 1 {
		t.Errorf("system messages in a request = %d, want exactly 1", systems)
	}

	// Another instance has its own thread.
	p.ok("session", "prompt", "assistant", "other", "Hello?")
	last := model.Requests()[len(model.Requests())-1]
	if got := userMessages(last); len(got) != 1 || got[0] != "Hello?" {
		t.Errorf("instance other saw %q, want only its own prompt", got)
	}

	show := p.ok("session", "show", "assistant", "u42")
	if !strings.Contains(show, "[1]") || !strings.Contains(show, "What is my name?") || !strings.Contains(show, "Your name is Mac.") {
		t.Errorf("session show:\n%s", show)
	}
	list := p.ok("session", "list")
	if !strings.Contains(list, "u42") || !strings.Contains(list, "other") {
		t.Errorf("session list:\n%s", list)
	}

	// Closing releases it; the next prompt reopens it with its thread.
	p.ok("session", "close", "assistant", "u42")
	if r := p.starter("session", "close", "assistant", "u42"); r.code != 1 || !strings.Contains(r.stderr, "is not open (done)") {
		t.Errorf("second close: exit %d %q", r.code, r.stderr)
	}
	p.ok("session", "prompt", "assistant", "u42", "Still there?")
	last = model.Requests()[len(model.Requests())-1]
	if got := userMessages(last); len(got) != 3 {
		t.Errorf("reopened session sent %q, want the earlier two turns too", got)
	}
}

func TestSessionContinueAsNewAndWatch(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: "one done"},
		fakellm.Reply{Content: "two done"},
		fakellm.Reply{Content: "three is a longer streamed answer", ChunkDelayMS: 30},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	p.ok("session", "prompt", "assistant", "can", "one", "--continue-after-turns", "1")

	// Watch live from another process while the session continues as new.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := exec.CommandContext(ctx, bins.starter, "session", "watch", "assistant", "can", "--from", "0")
	watch.Dir, watch.Env = p.dir, p.env()
	var buf bytes.Buffer
	var mu sync.Mutex
	var errBuf bytes.Buffer
	watch.Stdout, watch.Stderr = lockedWriter{&mu, &buf}, lockedWriter{&mu, &errBuf}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	p.ok("session", "prompt", "assistant", "can", "two")
	p.ok("session", "prompt", "assistant", "can", "three")
	reqs := model.Requests()
	if got := userMessages(reqs[len(reqs)-1]); len(got) != 3 {
		t.Errorf("after two continue-as-new the thread sent %q, want all three prompts", got)
	}
	view := p.ok("session", "show", "assistant", "can", "--json")
	var v api.SessionView
	if err := json.Unmarshal([]byte(view), &v); err != nil || v.Runs < 3 || len(v.Turns) != 3 {
		t.Errorf("session view: runs %d turns %d (%v)", v.Runs, len(v.Turns), err)
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if strings.Count(out, "turn end") >= 3 {
			// Each turn's text is its whole answer, on one line (live text flows on its
			// line and the text event completes it): none lost, none doubled.
			turns := map[string]string{}
			cur := ""
			for _, line := range strings.Split(out, "\n") {
				if i := strings.Index(line, "you: "); i >= 0 {
					cur = line[i+5:]
				} else if i := strings.Index(line, "text: "); i >= 0 {
					turns[cur] += line[i+6:]
				}
			}
			for prompt, want := range map[string]string{"one": "one done", "two": "two done", "three": "three is a longer streamed answer"} {
				if turns[prompt] != want {
					t.Errorf("turn %q streamed %q, want %q\n%s", prompt, turns[prompt], want, out)
				}
			}
			if n := strings.Count(out, "text: "); n != 3 {
				t.Errorf("text lines = %d, want one per turn:\n%s", n, out)
			}
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("watch did not show three turns:\n%s\nwatch stderr: %s\nworker:\n%s", out, errBuf.String(), p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	_ = watch.Wait()
}

func TestSessionConcurrentPromptsAreSerialised(t *testing.T) {
	t.Parallel()
	// alpha's reply is held at the fake model until beta's prompt has reached the session,
	// so beta surely arrives while alpha is being answered (no sleep decides it).
	model := fakellm.New(
		fakellm.Reply{Content: "first answer", Hold: "alpha"},
		fakellm.Reply{Content: "second answer"},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	var wg sync.WaitGroup
	results := make([]result, 2)
	prompt := func(i int, text string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = p.starter("session", "prompt", "assistant", "conc", text)
		}()
	}
	prompt(0, "alpha")
	pollUntil(t, time.Minute, "alpha's model call in flight", func(context.Context) error {
		if n := len(model.Requests()); n != 1 {
			return fmt.Errorf("model requests = %d, want 1", n)
		}
		return nil
	})
	prompt(1, "beta")
	c := p.dial()
	pollUntil(t, time.Minute, "beta's prompt accepted by the session", func(ctx context.Context) error {
		it := c.GetWorkflowHistory(ctx, api.SessionIDPrefix+"assistant:conc", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		accepted := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
				accepted++
			}
		}
		if accepted < 2 {
			return fmt.Errorf("%d prompts accepted, want 2", accepted)
		}
		return nil
	})
	model.Release("alpha")
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("prompt %d: exit %d %s", i, r.code, r.stderr)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2 (one per prompt, no overlap)", len(reqs))
	}
	if got := userMessages(reqs[1]); len(got) != 2 || got[0] != "alpha" || got[1] != "beta" {
		t.Errorf("second request's user messages = %q, want alpha's whole turn before beta", got)
	}
}

// TestSessionApprovalPromptApproveWatch: a prompt whose turn waits on a human says so on
// stderr with the approve command, `session show` lists the pending call, `approve
// --wait` on the session returns when the turn ends with its reply, and `session watch`
// on the idle session shows the last turn (or the last N updates) before following.
func TestSessionApprovalPromptApproveWatch(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: "Hello there."},
		fakellm.Reply{Content: "I will write it down.", ToolCalls: []fakellm.Call{writeNotes("remember this")}},
		fakellm.Reply{Content: "Written to notes.md."},
		fakellm.Reply{Content: "A third answer."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake}
agents:
  - name: scribe
    permissions: {mode: approve}
    sandbox: {type: virtual}
`)
	p.start()
	p.ok("session", "prompt", "scribe", "u42", "Hi.")

	// The prompt whose turn needs an approval, in its own process.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prompt := p.startStarter(ctx, "session", "prompt", "scribe", "u42", "Write it down.")
	want := "next: starter approve session:scribe:u42 --call "
	var call string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if s := prompt.Stderr(); strings.Contains(s, want) {
			call = strings.Fields(s[strings.Index(s, want)+len(want):])[0]
			if !strings.Contains(s, "waiting for your approval of write_file (call "+call+")") || !strings.Contains(s, `"notes.md"`) {
				t.Errorf("prompt's stderr does not say what it waits for:\n%s", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prompt did not print the approve command; stderr:\n%s\nworker:\n%s", prompt.Stderr(), p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(prompt.Stderr(), want); n != 1 {
		t.Errorf("approve command printed %d times, want once:\n%s", n, prompt.Stderr())
	}

	show := p.ok("session", "show", "scribe", "u42")
	for _, w := range []string{"Pending: tool call " + call + ": write_file", `"notes.md"`, "you: Write it down.", "(under way)", want + call} {
		if !strings.Contains(show, w) {
			t.Errorf("session show lacks %q:\n%s", w, show)
		}
	}

	// approve --wait returns when the turn ends, with its reply.
	start := time.Now()
	r := p.starter("approve", "session:scribe:u42", "--call", call, "--wait")
	if r.code != 0 {
		t.Fatalf("approve --wait: exit %d\nstdout: %s\nstderr: %s\nworker:\n%s", r.code, r.stdout, r.stderr, p.output())
	}
	if !strings.Contains(r.stderr, "turn 2 of session session:scribe:u42 ended") || strings.TrimSpace(r.stdout) != "Written to notes.md." {
		t.Errorf("approve --wait stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "turn end") {
		t.Errorf("approve --wait stderr does not follow the turn:\n%s", r.stderr)
	}
	t.Logf("approve --wait returned after %s", time.Since(start))
	if err := prompt.Wait(); err != nil {
		t.Fatalf("prompt: %v\nstderr: %s", err, prompt.Stderr())
	}
	if got := strings.TrimSpace(prompt.Stdout()); got != "Written to notes.md." {
		t.Errorf("prompt's reply = %q", got)
	}
	if strings.Contains(prompt.Stdout(), "approve") {
		t.Errorf("the approve hint went to stdout:\n%s", prompt.Stdout())
	}

	// watch on the idle session: the last turn at once, then what comes.
	watch := p.startStarter(ctx, "session", "watch", "scribe", "u42")
	defer func() { _ = watch.cmd.Process.Kill(); _ = watch.Wait() }()
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			if s := watch.Stdout(); ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("watch did not show %s:\n%s\nstderr: %s", what, watch.Stdout(), watch.Stderr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := waitFor("the last turn", func(s string) bool { return strings.Contains(s, "turn end") })
	if !strings.Contains(first, "you: Write it down.") || !strings.Contains(first, "Written to notes.md.") || strings.Contains(first, "you: Hi.") {
		t.Errorf("watch's first lines, want the last turn only:\n%s", first)
	}
	p.ok("session", "prompt", "scribe", "u42", "Third?")
	waitFor("the new turn", func(s string) bool {
		return strings.Contains(s, "you: Third?") && strings.Count(s, "turn end") == 2 && strings.Contains(s, "A third answer.")
	})

	// --last N: the last N updates, whatever turn they are in.
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	last := exec.CommandContext(wctx, bins.starter, "session", "watch", "scribe", "u42", "--last", "2")
	last.Dir, last.Env = p.dir, p.env()
	out, _ := last.Output() // killed by the timeout while following
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "text: A third answer.") || !strings.Contains(lines[1], "turn end") {
		t.Errorf("watch --last 2 printed:\n%s", out)
	}

	// A closed session: the last turn, and the watch ends.
	p.ok("session", "close", "scribe", "u42")
	closed := p.ok("session", "watch", "scribe", "u42")
	if !strings.Contains(closed, "you: Third?") || !strings.Contains(closed, "turn end") || strings.Contains(closed, "Write it down.") {
		t.Errorf("watch on the closed session printed:\n%s", closed)
	}
	t.Logf("prompt stderr:\n%s\napprove --wait:\n%s", prompt.Stderr(), r.stdout)
}

// TestSessionWatchBeforeFirstPrompt: a watch opened before the session exists says on
// stderr that it waits for the first prompt (not "no run session:…", exit 1), then shows
// that turn from its user_input on when it comes.
func TestSessionWatchBeforeFirstPrompt(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "Hello, early bird."})
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := p.startStarter(ctx, "session", "watch", "assistant", "early")
	const waiting = `no session assistant early yet: waiting for its first prompt (starter session prompt assistant early "..."); Ctrl-C to stop`
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(watch.Stderr(), waiting); {
		if time.Now().After(deadline) {
			t.Fatalf("watch before the first prompt: stderr %q, stdout %q; want it to say it waits", watch.Stderr(), watch.Stdout())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.ok("session", "prompt", "assistant", "early", "Anyone there?")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(watch.Stdout(), "turn end"); {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not show the first turn:\nstdout %s\nstderr %s\nworker:\n%s", watch.Stdout(), watch.Stderr(), p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := watch.Stdout()
	if !strings.Contains(out, "you: Anyone there?") || !strings.Contains(out, "text: Hello, early bird.") {
		t.Errorf("watch shows:\n%s\nwant the first turn's prompt and reply", out)
	}
	if strings.Contains(watch.Stderr(), "no run") {
		t.Errorf("watch stderr %q", watch.Stderr())
	}
	cancel()
	_ = watch.Wait()
}
