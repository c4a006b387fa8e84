package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// TestDockerSnapshotsSeeEveryChange: on the Docker tier (times in whole seconds, files
// read one by one on the command server, the archive past OpenLimit changed files) each
// snapshot holds exactly the workspace's bytes: a same-size rewrite within the second, a
// bulk change of 100 files (the archive), then one file changed again (read alone).
func TestDockerSnapshotsSeeEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := artifacts.OpenWith(ctx, "file://"+t.TempDir(), artifacts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sbs, err := NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec := api.SandboxSpec{Type: api.SandboxDocker, Image: benchDockerEngine(t, sbs)}
	a := New(Deps{Store: st, Sandboxes: sbs})
	runID := fmt.Sprintf("gotest-docker-snap-%d", time.Now().UnixNano())
	sb, err := sbs.Open(ctx, runID, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sbs.Release(ctx, runID, spec)
	step := func(cmd string, want map[string]string) {
		t.Helper()
		if res, err := sb.Shell(ctx, cmd, time.Minute); err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", cmd, err, res)
		}
		ref, err := a.Host.snapshotWorkspace(ctx, runID, spec, sb)
		if err != nil {
			t.Fatalf("snapshot after %s: %v", cmd, err)
		}
		m, err := LoadManifest(ctx, st, ref.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range m.Entries {
			if e.Type == api.EntryFile {
				got[e.Path] = e.SHA256
			}
		}
		for p, content := range want {
			if got[p] != artifacts.Sum([]byte(content)) {
				t.Fatalf("after %q the snapshot holds %s as %s, want the sum of %q", cmd, p, got[p], content)
			}
		}
	}
	step("printf aaaa > f", map[string]string{"f": "aaaa"})
	step("printf bbbb > f", map[string]string{"f": "bbbb"})
	bulk := map[string]string{"f": "bbbb"}
	for i := range 100 {
		bulk[fmt.Sprintf("many/m%03d", i)] = fmt.Sprintf("m%03d", i)
	}
	step(`mkdir many && i=0; while [ $i -lt 100 ]; do printf m%03d $i > many/$(printf m%03d $i); i=$((i+1)); done`, bulk)
	bulk["many/m007"] = "m999"
	step("printf m999 > many/m007", bulk)
}

// TestDockerShellSnapshotUsesTheCallsListing: a shell call on the Docker tier with a
// snapshot asked for takes the workspace's listing in the command's own round trip (no
// listing of its own after it), and the snapshot still holds every write of every call:
// a new file, the same size rewritten within the second, a file removed.
func TestDockerShellSnapshotUsesTheCallsListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := artifacts.OpenWith(ctx, "file://"+t.TempDir(), artifacts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sbs, err := NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec := api.SandboxSpec{Type: api.SandboxDocker, Image: benchDockerEngine(t, sbs)}
	a := New(Deps{Store: st, Sandboxes: sbs})
	runID := fmt.Sprintf("gotest-docker-listed-%d", time.Now().UnixNano())
	defer sbs.Release(ctx, runID, spec)
	for i, step := range []struct {
		cmd  string
		want map[string]string
	}{
		{"printf aaaa > f; printf keep > g", map[string]string{"f": "aaaa", "g": "keep"}},
		{"printf bbbb > f", map[string]string{"f": "bbbb", "g": "keep"}},
		{"rm g; printf cccc > f", map[string]string{"f": "cccc"}},
	} {
		var p Phases
		args, _ := json.Marshal(map[string]any{"command": step.cmd})
		res, err := a.Tools.RunTool(WithPhases(ctx, &p), api.RunToolRequest{RunID: runID, CallID: fmt.Sprintf("c%d", i),
			Tool: agents.ToolShell, Args: args, Sandbox: spec, Snapshot: true})
		if err != nil || res.IsError || res.Snapshot == nil {
			t.Fatalf("%s: %v %+v", step.cmd, err, res)
		}
		if d := p.Get(PhaseList); d != 0 {
			t.Errorf("%s: the snapshot listed the workspace again (%v) instead of taking the call's listing", step.cmd, d)
		}
		m, err := LoadManifest(ctx, st, res.Snapshot.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range m.Entries {
			if e.Type == api.EntryFile {
				got[e.Path] = e.SHA256
			}
		}
		want := map[string]string{}
		for p, content := range step.want {
			want[p] = artifacts.Sum([]byte(content))
		}
		if !maps.Equal(got, want) {
			t.Fatalf("after %q the snapshot holds %v, want %v (the sums of %v)", step.cmd, got, want, step.want)
		}
	}
}
