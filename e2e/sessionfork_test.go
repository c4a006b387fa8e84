package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// The fork demo's shipped script (examples/sessions/fork.script.json): turn 1 writes
// a.txt=v1; turn 2 reads it and writes v2. The fake answers by the assistant messages in
// the thread, so a fork at turn 2 (two assistant messages so far) is answered as turn 2
// was: it reads a.txt first, which shows the workspace it was forked with, then writes v2
// again; a prompt to the fork after its first turn is told a.txt holds v2.

// toolContents are the contents of the tool messages of a request.
func toolContents(req fakellm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m["role"] == "tool" {
			s, _ := m["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

func TestSessionForkAtTurn(t *testing.T) {
	t.Parallel()
	cfg, model := shippedDemo(t, "bin/starter session fork scribe src --at 2 --id fork1") // the docs' demo, as shipped
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	p.ok("session", "prompt", "scribe", "src", "Write v1 to a.txt.")
	p.ok("session", "prompt", "scribe", "src", "Now make it v2.")
	src := api.SessionID("scribe", "src")
	if got := p.ok("sandbox", "cat", src, "a.txt"); got != "v2\n" {
		t.Fatalf("the source's a.txt = %q, want v2", got)
	}
	sourceEvents := len(p.record(src).Events)
	turn2 := model.Requests()[2] // the first model call of turn 2
	before := len(model.Requests())

	// Fork at turn 2: turn 2's prompt asked again, on turn 1's thread and files.
	out := p.ok("session", "fork", "scribe", "src", "--at", "2", "--id", "fork1")
	if !strings.Contains(out, "session scribe fork1: forked from scribe/src at turn 2") || !strings.Contains(out, "Wrote v2.") {
		t.Errorf("session fork printed:\n%s", out)
	}
	reqs := model.Requests()[before:]
	if len(reqs) != 3 {
		t.Fatalf("the fork made %d model calls, want 3 (read, write, answer)", len(reqs))
	}
	if got := userMessages(reqs[0]); !reflect.DeepEqual(got, []string{"Write v1 to a.txt.", "Now make it v2."}) {
		t.Errorf("the fork's first call carried the user messages %q, want turn 1's and turn 2's prompt", got)
	}
	// The thread is turn 1's exactly (the source's turn 2 began from the same one).
	if a, b := mustJSONString(t, reqs[0].Messages[1:]), mustJSONString(t, turn2.Messages[1:]); a != b {
		t.Errorf("the fork's first call:\n%s\nthe source's turn 2 began with:\n%s", a, b)
	}
	if got := toolContents(reqs[1]); len(got) != 2 || !strings.Contains(got[1], "v1") || strings.Contains(got[1], "v2") {
		t.Errorf("the fork's read of a.txt returned %q, want v1 (the workspace turn 2 found)", got)
	}
	fid := api.SessionID("scribe", "fork1")
	frec := p.record(fid)
	if d := eventOf(t, frec, "forked_from"); d["session"] != "scribe/src" || d["turn"] != float64(2) || d["snapshot"] == "" {
		t.Errorf("forked_from = %v, want session scribe/src, turn 2 and its snapshot", d)
	}
	if got := p.ok("sandbox", "cat", fid, "a.txt", "--at", "1.1.1"); got != "v1\n" {
		t.Errorf("the fork's a.txt as its first call found it = %q, want v1", got)
	}
	// The source is untouched: its files, its stream.
	if got := p.ok("sandbox", "cat", src, "a.txt"); got != "v2\n" || len(p.record(src).Events) != sourceEvents {
		t.Errorf("the source changed: a.txt %q, %d events (was %d)", got, len(p.record(src).Events), sourceEvents)
	}
	// The fork is a session like any other: it numbers its own turns and takes prompts.
	var view api.SessionView
	if err := json.Unmarshal([]byte(p.ok("session", "show", "scribe", "fork1", "--json")), &view); err != nil {
		t.Fatal(err)
	}
	if view.TurnCount != 1 || len(view.Turns) != 1 || view.Turns[0].Prompt != "Now make it v2." {
		t.Errorf("the fork's turns = %+v, want one: turn 2's prompt asked again", view.Turns)
	}

	p.ok("session", "prompt", "scribe", "fork1", "What does a.txt hold now?")
	if got := userMessages(model.Requests()[len(model.Requests())-1]); len(got) != 3 || got[1] != "Now make it v2." {
		t.Errorf("a prompt to the fork carried the user messages %q, want turn 1's, the fork's turn and the new one", got)
	}

	p.ok("session", "close", "scribe", "fork1")
	if w := p.ok("session", "watch", "scribe", "fork1", "--from", "0"); !strings.Contains(w, "forked_from") ||
		!strings.Contains(w, "you: Now make it v2.") || !strings.Contains(w, "you: What does a.txt hold now?") {
		t.Errorf("session watch of the closed fork:\n%s\nwant forked_from, then its two turns", w)
	}

	// --prompt asks something else instead; no --id names a new instance.
	before = len(model.Requests())
	out = p.ok("session", "fork", "scribe", "src", "--at", "2", "--prompt", "Check a.txt, then make it v2.", "--json")
	var res struct {
		Instance string `json:"instance"`
		Prompt   string `json:"prompt"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || api.ValidateInstance(res.Instance) != nil || res.Prompt != "Check a.txt, then make it v2." {
		t.Errorf("session fork --json = %s (%v)", out, err)
	}
	if got := userMessages(model.Requests()[before]); len(got) != 2 || got[1] != "Check a.txt, then make it v2." {
		t.Errorf("fork --prompt asked %q, want turn 1's prompt then the new one", got)
	}

	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"session", "fork", "scribe", "src", "--at", "3"}, 2, "has no turn 3: --at takes 1-2"},
		{[]string{"session", "fork", "scribe", "src", "--at", "0"}, 2, "not a turn number"},
		{[]string{"session", "fork", "scribe", "src", "--at", "two"}, 2, "not a turn number"},
		{[]string{"session", "fork", "scribe", "src"}, 2, "--at"},
		{[]string{"session", "fork", "scribe", "nobody", "--at", "1"}, 1, "session:scribe:nobody"},
		{[]string{"session", "fork", "scribbler", "src", "--at", "1"}, 1, `offers agent "scribbler"`},
		{[]string{"session", "fork", "scribe", "src", "--at", "1", "--id", "fork1"}, 1, "session:scribe:fork1 already exists"},
		{[]string{"session", "fork", "scribe", "src", "--at", "1", "--id", "a/b"}, 2, "--id"},
	} {
		n := len(model.Requests())
		r := p.starter(bad.args...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("starter %v: exit %d, stderr %q; want exit %d naming %q", bad.args, r.code, r.stderr, bad.code, bad.want)
		}
		if len(model.Requests()) != n {
			t.Errorf("starter %v asked the model: a refused fork must start nothing", bad.args)
		}
	}
	list := p.ok("session", "list")
	if strings.Count(list, "scribe") != 3 {
		t.Errorf("session list after the refused forks:\n%s\nwant the source and the two forks only", list)
	}

	// A turn an earlier run served (this source continues as new after every turn) forks
	// the same way: its model call is found back along the continue-as-new chain, the
	// snapshot it found in the archived stream.
	p.ok("session", "prompt", "scribe", "can", "Write v1 to a.txt.", "--continue-after-turns", "1")
	p.ok("session", "prompt", "scribe", "can", "Now make it v2.")
	var canView api.SessionView
	if err := json.Unmarshal([]byte(p.ok("session", "show", "scribe", "can", "--json")), &canView); err != nil || canView.Runs < 3 {
		t.Fatalf("session can: %+v (%v), want 3 runs (continued as new after each turn)", canView, err)
	}
	before = len(model.Requests())
	p.ok("session", "fork", "scribe", "can", "--at", "2", "--id", "canfork")
	reqs = model.Requests()[before:]
	if len(reqs) < 2 || !reflect.DeepEqual(userMessages(reqs[0]), []string{"Write v1 to a.txt.", "Now make it v2."}) {
		t.Fatalf("the fork of a continued session made %d calls, the first with user messages %q", len(reqs), userMessages(reqs[0]))
	}
	if got := toolContents(reqs[1]); len(got) != 2 || !strings.Contains(got[1], "v1") || strings.Contains(got[1], "v2") {
		t.Errorf("the fork of a continued session read a.txt as %q, want v1", got)
	}
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recordSessionFork: a session writes a.txt on turn 1 and rewrites it on turn 2, then is
// forked at turn 2 (the fork reads the file it was forked with and writes v2 again).
func recordSessionFork(t *testing.T, r *recorder) {
	cfg, _ := shippedDemo(t, "bin/starter session fork scribe src --at 2 --id fork1")
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	c := p.dial()
	p.ok("session", "prompt", "scribe", "src", "Write v1 to a.txt.")
	p.ok("session", "prompt", "scribe", "src", "Now make it v2.")
	p.ok("session", "fork", "scribe", "src", "--at", "2", "--id", "fork1")
	r.save(c, "session_fork_source.json", api.SessionID("scribe", "src"), "")
	r.save(c, "session_forked.json", api.SessionID("scribe", "fork1"), "")
}
