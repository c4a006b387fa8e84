package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

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
