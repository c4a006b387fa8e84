package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// watchFor runs a `session watch` command (which follows until stopped) for d and returns
// what it printed; it fails the test if the command ended on its own with an error.
func (p *platform) watchFor(d time.Duration, args ...string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.starter, args...)
	cmd.Dir, cmd.Env = p.dir, p.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil && ctx.Err() == nil {
		p.t.Fatalf("starter %s: %v\n%s\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// TestSessionExampleAsWritten runs the README's Sessions commands as printed, with
// examples/sessions' config and script: the memory demo, watch, show, list, close and
// reopen with the same thread.
func TestSessionExampleAsWritten(t *testing.T) {
	t.Parallel()
	want := []string{
		`bin/starter session prompt assistant u42 "My name is Mac."`,
		`bin/starter session prompt assistant u42 "What is my name?"`,
		`bin/starter session watch assistant u42`,
		`bin/starter session watch assistant u42 --last 20`,
		`bin/starter session watch assistant u42 --from 0`,
		`bin/starter session show assistant u42`,
		`bin/starter session list`,
		`bin/starter session close assistant u42`,
		`bin/starter session prompt assistant u42 "What is my name?"`,
		`bin/starter session show assistant u42`,
	}
	cmds := readmeStarterCommands(t, "## Sessions", "## Writing a workflow")
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("the README's Sessions commands changed; update this test with them:\n%s", strings.Join(cmds, "\n"))
	}

	cfg, model := exampleConfig(t, "sessions", "assistant.script.json")
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	run := func(i int) string { t.Helper(); return p.ok(shellArgs(cmds[i])...) }

	if out := strings.TrimSpace(run(0)); out != "Nice to meet you, Mac." {
		t.Errorf("first reply = %q", out)
	}
	if out := strings.TrimSpace(run(1)); !strings.HasPrefix(out, "Your name is Mac") {
		t.Errorf("second reply = %q", out)
	}
	reqs := model.Requests()
	if got := userMessages(reqs[len(reqs)-1]); len(got) != 2 || got[0] != "My name is Mac." {
		t.Fatalf("the second prompt's request carries user messages %q, want the first turn's too", got)
	}
	if last := p.watchFor(3*time.Second, shellArgs(cmds[2])...); !strings.Contains(last, "you: What is my name?") || strings.Contains(last, "you: My name is Mac.") {
		t.Errorf("watch does not show the last turn alone:\n%s", last)
	}
	if last := p.watchFor(3*time.Second, shellArgs(cmds[3])...); !strings.Contains(last, "you: My name is Mac.") || !strings.Contains(last, "you: What is my name?") {
		t.Errorf("watch --last 20 does not show both turns:\n%s", last)
	}
	replay := p.watchFor(5*time.Second, shellArgs(cmds[4])...)
	for _, s := range []string{"you: My name is Mac.", "text: Nice to meet you, Mac.", "you: What is my name?", "turn end"} {
		if !strings.Contains(replay, s) {
			t.Errorf("watch --from 0 does not show %q:\n%s", s, replay)
		}
	}
	if out := run(5); !strings.Contains(out, "2 turns") || !strings.Contains(out, "you: My name is Mac.") || !strings.Contains(out, "assistant: Nice to meet you, Mac.") {
		t.Errorf("session show:\n%s", out)
	}
	if out := run(6); !regexp.MustCompile(`assistant\s+u42\s+running`).MatchString(out) {
		t.Errorf("session list:\n%s", out)
	}
	run(7)
	if out := run(6); regexp.MustCompile(`assistant\s+u42\s+running`).MatchString(out) {
		t.Errorf("session list after close still shows it running:\n%s", out)
	}
	if out := strings.TrimSpace(run(8)); !strings.HasPrefix(out, "Your name is Mac") {
		t.Errorf("reply after reopening = %q", out)
	}
	reqs = model.Requests()
	if got := userMessages(reqs[len(reqs)-1]); len(got) != 3 || got[0] != "My name is Mac." {
		t.Errorf("the reopened session's request carries user messages %q, want the thread kept", got)
	}
	if out := run(9); !strings.Contains(out, "3 turns, 2 runs") {
		t.Errorf("session show after reopening:\n%s", out)
	}
}
