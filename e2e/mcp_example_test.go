package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// TestMCPExampleAsWritten runs the README's MCP example as printed, from a directory laid
// out as the repository (bin/notes-mcp, examples/mcp/notes) with examples/mcp's config and
// script: notes__search runs at once (mcp_allow), notes__read waits for the approval; a
// second run denied gets the model's answer from the search alone.
func TestMCPExampleAsWritten(t *testing.T) {
	t.Parallel()
	want := []string{
		`bin/starter agent librarian "What do the notes say about backups?" --wait`,
		`bin/starter show <id>`,
		`bin/starter approve <id> --wait`,
	}
	cmds := readmeStarterCommands(t, "A runnable example, offline: `examples/mcp/notes-mcp`", "- **Names.** The model sees each tool")
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("the README's MCP example commands changed; update this test with them:\n%s", strings.Join(cmds, "\n"))
	}

	cfg, _ := exampleConfig(t, "mcp", "librarian.script.json")
	p := newPlatform(t)
	server := mcptest.Binary(t, "github.com/nexo-temporal/nexo/examples/mcp/notes-mcp")
	b, err := os.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(p.dir, "examples", "mcp", "notes")
	if err := os.MkdirAll(filepath.Join(p.dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "bin", "notes-mcp"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(notes, os.DirFS(filepath.Join("..", "examples", "mcp", "notes"))); err != nil {
		t.Fatal(err)
	}
	p.writeConfig(cfg)
	p.start()

	r := p.starter(shellArgs(cmds[0])...)
	out := r.stdout + r.stderr
	if r.code != 0 || !strings.Contains(out, "suspended: approval of notes__read (call 2.1)") {
		t.Fatalf("%s: exit %d\n%s\nworker:\n%s", cmds[0], r.code, out, p.output())
	}
	id := strings.Fields(out[strings.Index(out, "started agent librarian run ")+len("started agent librarian run "):])[0]
	rec := p.record(id)
	if res := toolResults(t, rec)["notes__search"]; !strings.Contains(res, "backups.md:5: - Open question: who owns the backup alerts") {
		t.Errorf("notes__search did not run before the approval, or found nothing: %q", res)
	}
	if countEvents(rec, "approval_requested") != 1 {
		t.Errorf("approval_requested events = %d, want 1 (notes__read only)", countEvents(rec, "approval_requested"))
	}
	if show := p.ok(shellArgs(strings.ReplaceAll(cmds[1], "<id>", id))...); !strings.Contains(show, "tool call 2.1: notes__read (mcp)") || !strings.Contains(show, `{"note":"backups.md"}`) {
		t.Errorf("show does not list the pending notes__read:\n%s", show)
	}
	if r := p.starter(shellArgs(strings.ReplaceAll(cmds[2], "<id>", id))...); r.code != 0 || !strings.Contains(r.stderr, "is done") || !strings.Contains(r.stdout, "Backups run nightly at 02:00") {
		t.Errorf("approve --wait: want the status on stderr, the result on stdout:\n%s\n%s", r.stdout, r.stderr)
	}
	if res := toolResults(t, p.record(id))["notes__read"]; !strings.Contains(res, "it took 41 minutes") {
		t.Errorf("notes__read result = %q, want the note", res)
	}

	// Denied: the model is told, and answers from the search alone.
	id2 := strings.TrimSpace(p.ok("agent", "librarian", "What do the notes say about backups?"))
	p.waitStatus(id2, api.StatusSuspended)
	p.ok("deny", id2, "--reason", "private")
	rec = p.waitStatus(id2, api.StatusDone)
	if !strings.Contains(string(rec.Result), "from the search alone") {
		t.Errorf("after deny: result %s", rec.Result)
	}
	if _, ran := toolResults(t, rec)["notes__read"]; ran && !strings.Contains(toolResults(t, rec)["notes__read"], "a human denied") {
		t.Errorf("the denied notes__read ran: %q", toolResults(t, rec)["notes__read"])
	}
}
