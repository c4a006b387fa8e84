package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// readmeStarterCommands returns the `bin/starter ...` lines of the sh blocks between the
// text from and the text to, in the README or the guide under docs/ that has from (to is
// looked for after it in the same file; an empty to means the end of that file), comments
// removed: the commands a reader types.
func readmeStarterCommands(t *testing.T, from, to string) []string {
	t.Helper()
	file, s := readmeText(t, from)
	if to != "" {
		j := strings.Index(s, to)
		if j < 0 {
			t.Fatalf("%s has no %q after %q", file, to, from)
		}
		s = s[:j]
	}
	var cmds []string
	in := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.HasPrefix(line, "bin/starter "):
			if k := strings.Index(line, " #"); k >= 0 {
				line = line[:k]
			}
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	return cmds
}

// shellArgs splits a README command line as sh would: words, "double-quoted" words kept
// whole. The command itself (bin/starter) is dropped.
func shellArgs(line string) []string {
	var args []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(line, -1) {
		if m[2] != "" {
			args = append(args, m[2])
		} else {
			args = append(args, m[1])
		}
	}
	return args[1:]
}

// TestOfflineAgentDemoAsWritten runs the README's "Offline, in three terminals" commands as
// printed, with examples/agents' config and script: approve, then the same prompt again
// (notes.md now exists) denied, then three writes approved with one --always.
func TestOfflineAgentDemoAsWritten(t *testing.T) {
	t.Parallel()
	want := []string{
		`bin/starter agent scribe "Write a haiku to notes.md" --wait`,
		`bin/starter show <id>`,
		`bin/starter approve <id> --wait`,
		`bin/starter agent scribe "Write a haiku to notes.md" --wait`,
		`bin/starter deny <id> --reason "not now"`,
		`bin/starter show <id>`,
		`bin/starter agent scribe "Write three haikus, one per file" --wait`,
		`bin/starter approve <id> --always --wait`,
	}
	cmds := readmeStarterCommands(t, "### Offline, in three terminals", "### A harness in place of the model")
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("the README's demo commands changed; update this test with them:\n%s", strings.Join(cmds, "\n"))
	}

	cfg, _ := exampleConfig(t, "agents", "scribe.script.json")
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()

	id := ""
	run := func(i int) result {
		t.Helper()
		r := p.starter(shellArgs(strings.ReplaceAll(cmds[i], "<id>", id))...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s\nworker:\n%s", cmds[i], r.code, r.stdout, r.stderr, p.output())
		}
		if k := strings.Index(r.stdout+r.stderr, "started agent scribe run "); k >= 0 {
			id = strings.Fields((r.stdout + r.stderr)[k+len("started agent scribe run "):])[0]
		}
		return r
	}
	result := func() api.AgentResult {
		t.Helper()
		var res api.AgentResult
		_ = json.Unmarshal(p.record(id).Result, &res)
		return res
	}
	notes := filepath.Join(p.dir, "workspace", "notes.md")
	const haiku = "Durable by design:\nthe worker may fall, the run\nwaits for your yes.\n"

	// Approve.
	if r := run(0); !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 2.1)") {
		t.Fatalf("first run not suspended on call 2.1:\n%s\n%s", r.stdout, r.stderr)
	}
	if out := run(1).stdout; !strings.Contains(out, "tool call 2.1: write_file (write)") {
		t.Errorf("show does not list the pending write:\n%s", out)
	}
	if r := run(2); !strings.Contains(r.stderr, "is done") || !strings.Contains(r.stdout, "I wrote a haiku to notes.md.") {
		t.Errorf("approve --wait: the status on stderr, the result on stdout:\n%s\n%s", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != haiku {
		t.Fatalf("notes.md = %q, %v", b, err)
	}

	// The same prompt again, notes.md there: the script reads it first, so the write is
	// allowed; deny it and the model says so.
	first := id
	if r := run(3); id == first || !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 2.1)") {
		t.Fatalf("second run (id %s) not suspended on call 2.1:\n%s\n%s", id, r.stdout, r.stderr)
	}
	run(4)
	rec := p.waitStatus(id, api.StatusDone)
	if out := run(5).stdout; !strings.Contains(out, "You said no, so I left the workspace as it was.") {
		t.Errorf("show after deny does not carry the model's adapted answer:\n%s", out)
	}
	if res := result(); strings.Contains(res.Content, "I wrote") {
		t.Errorf("after deny the model still claims the write: %q", res.Content)
	}
	if countEvents(rec, "approval_decided") != 1 {
		t.Errorf("approval_decided events = %d, want 1", countEvents(rec, "approval_decided"))
	}
	// The runs share ./workspace: the denied run wrote nothing, so the first run's
	// notes.md is not its artifact (issue 29, item 6).
	if names := artifactNames(rec); len(names) != 0 {
		t.Errorf("the denied run's artifacts = %q, want none: it wrote nothing", names)
	}
	// Approving a second run over the existing file works too (no "read it first").
	id2 := strings.TrimSpace(p.ok("agent", "scribe", "Write a haiku to notes.md"))
	p.waitStatus(id2, api.StatusSuspended)
	if out := p.ok("approve", id2, "--wait"); !strings.Contains(out, "I wrote a haiku to notes.md.") {
		t.Errorf("approve over an existing notes.md:\n%s", out)
	}
	for _, ev := range p.record(id2).Events {
		if ev.Type == "agent_tool_result" && strings.Contains(string(ev.Data), `"ok":false`) && strings.Contains(string(ev.Data), "write_file") {
			t.Errorf("the approved write failed: %s", ev.Data)
		}
	}

	// Three writes, one --always.
	if r := run(6); !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 2.1)") {
		t.Fatalf("three-haiku run not suspended on call 2.1:\n%s\n%s", r.stdout, r.stderr)
	}
	if out := run(7).stdout; !strings.Contains(out, "I wrote three haikus") {
		t.Errorf("approve --always --wait:\n%s", out)
	}
	rec = p.record(id)
	if countEvents(rec, "approval_requested") != 1 || countEvents(rec, "approval_decided") != 1 {
		t.Errorf("approvals requested %d, decided %d; want one of each for three writes",
			countEvents(rec, "approval_requested"), countEvents(rec, "approval_decided"))
	}
	for _, name := range []string{"haiku1.md", "haiku2.md", "haiku3.md"} {
		if _, err := os.Stat(filepath.Join(p.dir, "workspace", name)); err != nil {
			t.Errorf("%s not written: %v", name, err)
		}
	}
	if names, want := artifactNames(rec), []string{"haiku1.md", "haiku2.md", "haiku3.md"}; !reflect.DeepEqual(names, want) {
		t.Errorf("the three-haiku run's artifacts = %q, want %q: what it wrote, not the earlier runs' notes.md", names, want)
	}
}

// artifactNames are the names of the run's artifacts, sorted.
func artifactNames(rec api.Record) []string {
	var names []string
	for _, a := range rec.Artifacts {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return names
}
