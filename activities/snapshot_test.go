package activities_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// tool runs one built-in tool call for testRun asking for a snapshot after it.
func (e *env) snapTool(t *testing.T, spec api.SandboxSpec, base, tool string, args map[string]any) api.RunToolResult {
	t.Helper()
	raw, _ := json.Marshal(args)
	res, err := e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, Sandbox: spec, CallID: "c", Tool: tool,
		Args: raw, Snapshot: true, Base: base})
	if err != nil {
		t.Fatalf("RunTool %s %v: %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("RunTool %s %v: error result %s", tool, args, res.Content)
	}
	return res
}

func manifest(t *testing.T, e *env, ref string) api.Manifest {
	t.Helper()
	m, err := activities.LoadManifest(context.Background(), e.store, ref)
	if err != nil {
		t.Fatalf("LoadManifest(%s): %v", ref, err)
	}
	return m
}

func entry(m api.Manifest, p string) (api.ManifestEntry, bool) {
	for _, e := range m.Entries {
		if e.Path == p {
			return e, true
		}
	}
	return api.ManifestEntry{}, false
}

// A snapshot after each call lists every file with its sha256, uploads only what changed,
// and a restore on another host (a fresh Sandboxes root) brings the files back exactly.
func TestSnapshotAfterEveryCallIsIncrementalAndRestores(t *testing.T) {
	t.Parallel()
	for _, spec := range []api.SandboxSpec{{}, {Type: api.SandboxVirtual}, {Type: api.SandboxBubblewrap}} {
		t.Run(spec.Type+"tier", func(t *testing.T) {
			e := newEnv(t, activities.Deps{})
			if spec.Type == api.SandboxBubblewrap {
				enableBubblewrap(t, e.sbs)
			}
			big := strings.Repeat("x", 100_000)
			r1 := e.snapTool(t, spec, "", agents.ToolWriteFile, map[string]any{"path": "big.txt", "content": big})
			if r1.Snapshot == nil || r1.Snapshot.Files != 1 || r1.Snapshot.Uploaded < 100_000 {
				t.Fatalf("first snapshot = %+v, want 1 file with its 100000 bytes uploaded", r1.Snapshot)
			}
			r2 := e.snapTool(t, spec, r1.Snapshot.Manifest, agents.ToolWriteFile, map[string]any{"path": "dir/a.txt", "content": "v1"})
			if r2.Snapshot == nil || r2.Snapshot.Files != 2 || r2.Snapshot.Uploaded != 2 {
				t.Fatalf("second snapshot = %+v, want 2 files, only the 2 new bytes uploaded", r2.Snapshot)
			}
			m := manifest(t, e, r2.Snapshot.Manifest)
			a, ok := entry(m, "dir/a.txt")
			if !ok || a.SHA256 != artifacts.Sum([]byte("v1")) || a.Size != 2 {
				t.Fatalf("manifest entry dir/a.txt = %+v (found %v), want size 2 and the sha256 of v1", a, ok)
			}
			if len(r2.Snapshot.Manifest) != 64 {
				t.Fatalf("snapshot ref %q is not a sha256 name", r2.Snapshot.Manifest)
			}
			if b, _ := json.Marshal(r2.Snapshot); len(b) > 300 {
				t.Fatalf("the snapshot reference is %d bytes in history, want <= 300: %s", len(b), b)
			}

			// Another host: a worker with its own (empty) sandbox root over the same store.
			other := newEnvWithStore(t, e.dir)
			if spec.Type == api.SandboxBubblewrap {
				enableBubblewrap(t, other.sbs)
			}
			res, err := other.a.Host.RestoreSandboxOnHost(context.Background(), api.ReleaseSandboxRequest{RunID: testRun, Sandbox: spec, Manifest: r2.Snapshot.Manifest})
			if err != nil {
				t.Fatalf("RestoreSandboxOnHost: %v", err)
			}
			if len(res.Lost) != 0 || !res.Found {
				t.Fatalf("restore = %+v, want found, nothing lost", res)
			}
			got := other.snapTool(t, spec, "", agents.ToolReadFile, map[string]any{"path": "dir/a.txt"})
			if !strings.Contains(got.Content, "v1") {
				t.Fatalf("read dir/a.txt on the new host = %q, want v1", got.Content)
			}
		})
	}
}

// A file changed in place (same size, by shell) is seen by the next snapshot.
func TestSnapshotSeesSameSizeRewrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	r1 := e.snapTool(t, api.SandboxSpec{}, "", agents.ToolShell, map[string]any{"command": "printf aaaa > f"})
	r2 := e.snapTool(t, api.SandboxSpec{}, "", agents.ToolShell, map[string]any{"command": "printf bbbb > f"})
	f1, _ := entry(manifest(t, e, r1.Snapshot.Manifest), "f")
	f2, _ := entry(manifest(t, e, r2.Snapshot.Manifest), "f")
	if f1.SHA256 == f2.SHA256 || f2.SHA256 != artifacts.Sum([]byte("bbbb")) {
		t.Fatalf("after rewriting f with bytes of the same size, sha256 %s -> %s, want the sum of bbbb", f1.SHA256, f2.SHA256)
	}
}

// A restore whose file blob is missing brings back the rest and names what it lost.
func TestRestoreNamesLostFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	e.snapTool(t, api.SandboxSpec{}, "", agents.ToolWriteFile, map[string]any{"path": "keep.txt", "content": "kept"})
	r := e.snapTool(t, api.SandboxSpec{}, "", agents.ToolWriteFile, map[string]any{"path": "gone.txt", "content": "will vanish"})
	if err := os.Remove(filepath.Join(e.dir, "blobs", artifacts.Sum([]byte("will vanish")))); err != nil {
		t.Fatalf("remove the blob of gone.txt: %v", err)
	}
	other := newEnvWithStore(t, e.dir)
	res, err := other.a.Host.RestoreSandboxOnHost(context.Background(), api.ReleaseSandboxRequest{RunID: testRun, Manifest: r.Snapshot.Manifest})
	if err != nil {
		t.Fatalf("RestoreSandboxOnHost: %v", err)
	}
	if len(res.Lost) != 1 || res.Lost[0] != "gone.txt" {
		t.Fatalf("lost = %v, want [gone.txt]", res.Lost)
	}
	got := other.snapTool(t, api.SandboxSpec{}, "", agents.ToolReadFile, map[string]any{"path": "keep.txt"})
	if !strings.Contains(got.Content, "kept") {
		t.Fatalf("read keep.txt = %q", got.Content)
	}
}

// A per-run workspace this host has to make anew (its directory is gone, as on a host
// whose disk was lost) is rebuilt from the run's last snapshot before the call runs.
func TestSandboxMadeAnewIsRebuiltFromBase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	r := e.snapTool(t, api.SandboxSpec{}, "", agents.ToolWriteFile, map[string]any{"path": "mine.txt", "content": "written before"})
	other := newEnvWithStore(t, e.dir)
	if err := other.sbs.Release(context.Background(), testRun, api.SandboxSpec{}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"path": "mine.txt"})
	res, err := other.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, CallID: "c2", Tool: agents.ToolReadFile, Args: raw, Base: r.Snapshot.Manifest})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "written before") || res.Rebuilt == nil {
		t.Fatalf("read after the workspace was lost = %q (rebuilt %+v), want the file back, rebuilt from the snapshot", res.Content, res.Rebuilt)
	}
}

// newEnvWithStore is another worker (its own sandbox root, its own store cache) over the
// same store directory.
func newEnvWithStore(t *testing.T, dir string) *env {
	t.Helper()
	st, err := artifacts.OpenWith(context.Background(), "file://"+dir, artifacts.Options{CacheBytes: artifacts.DefaultCacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sbs, err := activities.NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, activities.Deps{Store: st, Sandboxes: sbs})
	e.store = st
	return e
}

// A user's own dir (their checkout) is theirs, not the run's: no snapshot is taken of it,
// after a call or as a run starts to wait, unless the agent asks (sandbox.snapshot: true),
// and nothing of it reaches the store (docs/sandboxes.md).
func TestUserDirIsSnapshottedOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	user := api.SandboxSpec{Type: api.SandboxLocal, Dir: t.TempDir()}
	res := e.snapTool(t, user, "", agents.ToolWriteFile, map[string]any{"path": "mine.txt", "content": "my own file"})
	if res.Snapshot != nil {
		t.Errorf("write in a user's dir took snapshot %+v, want none", res.Snapshot)
	}
	park, err := e.a.Host.SnapshotSandbox(context.Background(), api.ReleaseSandboxRequest{RunID: testRun, Sandbox: user, Manifest: api.ManifestRequested})
	if err != nil || park.Ref != nil || park.Bytes != 0 {
		t.Errorf("snapshot at a wait of a user's dir = %+v, %v; want nothing taken", park, err)
	}
	if b, err := e.store.GetBlob(context.Background(), artifacts.Sum([]byte("my own file"))); err == nil {
		t.Errorf("the user's file is in the store (%q): a user's dir must not be copied", b)
	}

	asked := user
	asked.Snapshot = true
	res = e.snapTool(t, asked, "", agents.ToolWriteFile, map[string]any{"path": "other.txt", "content": "snapshot me"})
	if res.Snapshot == nil || res.Snapshot.Files != 2 {
		t.Errorf("write in a user's dir with snapshot: true took %+v, want a snapshot of its two files", res.Snapshot)
	}
}
