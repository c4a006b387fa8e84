package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// gcConfig: scribe writes and runs commands without asking; hopper writes notes.md
// without asking and waits for approval of a shell command (so its run stays open,
// suspended).
func gcConfig(modelURL string) string {
	return autoConfig(modelURL, "local") + `  - name: hopper
    instructions: You keep notes.
    permissions:
      mode: approve
      approve_when:
        - {capability: write, detail: "notes.md"}
    sandbox: {type: local}
    max_turns: 8
`
}

// ageStore sets the modification time of every object in the store to age ago, so only
// references keep anything (the grace period no longer does).
func ageStore(t *testing.T, dir string, age time.Duration) {
	t.Helper()
	at := time.Now().Add(-age)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(path, at, at)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gcJSON is the part of `starter store gc --json` the test reads.
type gcJSON struct {
	Marked struct{ Open, Closed int }
	Report struct {
		DryRun  bool `json:"dry_run"`
		Swept   int  `json:"swept"`
		Kept    int  `json:"kept"`
		Removed []struct {
			Key string `json:"key"`
		} `json:"removed"`
		Problems []string `json:"problems"`
	}
}

// TestStoreGCRemovesOnlyWhatNoRunNeeds: a finished agent run with snapshots and an open
// (suspended) one, every blob they wrote made older than the grace period, plus orphan
// blobs and a forgotten run's artifact, as old. `store gc --dry-run` lists exactly the
// orphans and deletes nothing; `store gc` removes them; both runs still read their files
// and records, and on a fresh worker the suspended run, approved, finishes and a session
// answers its next prompt (their threads are intact).
func TestStoreGCRemovesOnlyWhatNoRunNeeds(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Prompt: "task-done", ToolCalls: []fakellm.Call{writeCall("a.txt", "A1\n")}},
		fakellm.Reply{Prompt: "task-done", ToolCalls: []fakellm.Call{shellCall("echo more >> a.txt")}},
		fakellm.Reply{Prompt: "task-done", Content: "done"},
		fakellm.Reply{Prompt: "task-open", ToolCalls: []fakellm.Call{writeCall("notes.md", "B1\n")}},
		fakellm.Reply{Prompt: "task-open", ToolCalls: []fakellm.Call{shellCall("echo more >> notes.md")}},
		fakellm.Reply{Prompt: "task-open", Content: "finished after approval"},
		fakellm.Reply{Prompt: "session-one", Content: "noted"},
		fakellm.Reply{Prompt: "session-one", Content: "still here"},
	)
	p := newPlatform(t)
	p.writeConfig(gcConfig(model.Start(t)))
	p.start()
	done := strings.TrimSpace(p.ok("agent", "scribe", "task-done"))
	open := strings.TrimSpace(p.ok("agent", "hopper", "task-open"))
	p.waitStatus(done, api.StatusDone)
	p.waitStatus(open, api.StatusSuspended)
	if out := p.ok("session", "prompt", "scribe", "u1", "session-one"); !strings.Contains(out, "noted") {
		t.Fatalf("session prompt:\n%s", out)
	}

	store := p.artifactsDir()
	var orphans []string
	for _, body := range []string{"an orphan: a tool output of a retried attempt", "another orphan"} {
		s := sha256.Sum256([]byte(body))
		key := "blobs/" + hex.EncodeToString(s[:])
		if err := os.WriteFile(filepath.Join(store, key), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, key)
	}
	if err := os.MkdirAll(filepath.Join(store, "run-forgotten"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "run-forgotten", "out.txt"), []byte("a run Temporal no longer knows"), 0o644); err != nil {
		t.Fatal(err)
	}
	orphans = append(orphans, "run-forgotten/out.txt")
	sort.Strings(orphans)
	ageStore(t, store, 48*time.Hour)

	var dry gcJSON
	if err := json.Unmarshal([]byte(p.ok("store", "gc", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range dry.Report.Removed {
		listed = append(listed, r.Key)
	}
	sort.Strings(listed)
	if strings.Join(listed, " ") != strings.Join(orphans, " ") || !dry.Report.DryRun || len(dry.Report.Problems) != 0 {
		t.Fatalf("store gc --dry-run lists %v (problems %v); want exactly the orphans %v", listed, dry.Report.Problems, orphans)
	}
	if dry.Marked.Open < 1 || dry.Report.Kept == 0 {
		t.Errorf("dry run marked %+v, kept %d blobs; want the open run among the roots and the runs' blobs kept", dry.Marked, dry.Report.Kept)
	}
	for _, k := range orphans {
		if _, err := os.Stat(filepath.Join(store, k)); err != nil {
			t.Fatalf("after --dry-run, %s: %v; want it still there", k, err)
		}
	}

	t.Logf("store gc --dry-run (human):\n%s", p.ok("store", "gc", "--dry-run"))
	out := p.ok("store", "gc")
	t.Logf("store gc:\n%s", out)
	for _, want := range []string{"removed 2 blobs", "and 1 run artifacts", "removed " + orphans[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("store gc:\n%s\nwant %q", out, want)
		}
	}
	for _, k := range orphans {
		if _, err := os.Stat(filepath.Join(store, k)); !os.IsNotExist(err) {
			t.Errorf("after store gc, %s: %v; want it removed", k, err)
		}
	}

	// Nothing is left to remove, with any grace.
	if again := p.ok("store", "gc", "--grace", "72h"); !strings.Contains(again, "removed 0 blobs (0 B) and 0 run artifacts") {
		t.Errorf("a second store gc --grace 72h:\n%s\nwant nothing removed", again)
	}

	// Both runs still read their files and records from the store.
	if got := p.ok("sandbox", "cat", done, "a.txt"); got != "A1\nmore\n" {
		t.Errorf("finished run's a.txt after gc = %q, want A1 and more", got)
	}
	if files := p.ok("sandbox", "files", done); !strings.Contains(files, "a.txt") {
		t.Errorf("sandbox files %s after gc:\n%s", done, files)
	}
	if files := p.ok("sandbox", "files", open); !strings.Contains(files, "notes.md") {
		t.Errorf("sandbox files %s after gc:\n%s", open, files)
	}
	if rec := p.record(done); rec.Status != api.StatusDone || rec.Warning != "" {
		t.Errorf("show %s after gc: status %s, warning %q; want done from its stored record", done, rec.Status, rec.Warning)
	}
	if out := p.ok("show", open); !strings.Contains(out, "suspended") {
		t.Errorf("show %s after gc:\n%s", open, out)
	}
	// The open run and the session go on: their next model calls read their threads from
	// the store (a new worker, so no cache holds a blob gc removed).
	p.stop()
	p.start()
	if out := p.ok("session", "prompt", "scribe", "u1", "second"); !strings.Contains(out, "still here") {
		t.Errorf("session prompt after gc:\n%s", out)
	}
	if out := p.ok("session", "show", "scribe", "u1"); !strings.Contains(out, "session-one") || !strings.Contains(out, "second") {
		t.Errorf("session show after gc:\n%s\nwant both turns", out)
	}
	p.ok("approve", open)
	rec := p.waitStatus(open, api.StatusDone)
	if !strings.Contains(string(rec.Result), "finished after approval") {
		t.Errorf("the open run after gc and approval: result %s", rec.Result)
	}
	if got := p.ok("sandbox", "cat", open, "notes.md"); got != "B1\nmore\n" {
		t.Errorf("open run's notes.md = %q, want B1 and more", got)
	}

	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"store", "gc", "--grace", "5m"}, 2, "--grace 5m0s is shorter than 1h0m0s"},
		{[]string{"store", "gc", "extra"}, 2, "gc takes no arguments"},
		{[]string{"store", "sweep"}, 2, `unknown store subcommand "sweep"`},
		{[]string{"store"}, 2, "want a subcommand: gc"},
	} {
		r := p.starter(bad.args...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("starter %v: exit %d, stderr %q; want exit %d naming %q", bad.args, r.code, r.stderr, bad.code, bad.want)
		}
	}
	// A retention too short to mean anything is refused, naming the key.
	p.extraEnv = append(p.extraEnv, "NEXO_ARTIFACTS_RETENTION=5m")
	r := p.starter("store", "gc")
	p.extraEnv = p.extraEnv[:len(p.extraEnv)-1]
	if r.code != 1 || !strings.Contains(r.stderr, "artifacts.retention 5m0s: want 0 (keep every stored record) or at least 1h0m0s") {
		t.Errorf("store gc with artifacts.retention 5m: exit %d, stderr %q; want exit 1 naming the key", r.code, r.stderr)
	}
}
