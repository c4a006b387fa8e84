package activities_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/bwrap"
)

// enableBubblewrap gives sbs the bubblewrap tier, as the worker does once its probe
// passed; without bwrap the test skips, except under CI, where .ci/run installs it.
func enableBubblewrap(t *testing.T, sbs *activities.Sandboxes) {
	t.Helper()
	bin, err := bwrap.LookPath("")
	if err == nil {
		err = bwrap.Probe(context.Background(), bin)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap must run under CI: %v", err)
		}
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	sbs.WithBubblewrap(bin)
}

// TestBubblewrapShellTool: the shell tool on a bubblewrap sandbox runs sealed in the
// run's workspace: what it writes there is in the call's snapshot, /etc/shadow is not
// there to read, and Release removes the run's directory.
func TestBubblewrapShellTool(t *testing.T) {
	e := newEnv(t, activities.Deps{})
	enableBubblewrap(t, e.sbs)
	spec := api.SandboxSpec{Type: api.SandboxBubblewrap}
	res, err := e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, Sandbox: spec, CallID: "c", Tool: agents.ToolShell,
		Args: argsJSON(t, map[string]any{"command": "echo sealed > s.txt; cat /etc/shadow"}), Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content, "exit code 1") || !strings.Contains(res.Content, "No such file") {
		t.Errorf("shell result = %q, want cat /etc/shadow to fail: no such file", res.Content)
	}
	if res.Snapshot == nil {
		t.Fatalf("no snapshot after the shell call: %+v", res)
	}
	if en, ok := entry(manifest(t, e, res.Snapshot.Manifest), "s.txt"); !ok || en.Size != int64(len("sealed\n")) {
		t.Errorf("snapshot entry s.txt = %+v (found %v), want the command's write", en, ok)
	}
	if err := e.sbs.Release(context.Background(), testRun, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.ws); !os.IsNotExist(err) {
		t.Errorf("the run's workspace %s is still there after Release (stat: %v)", e.ws, err)
	}
}
