package activities

import (
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// TestBubblewrapOptions: a bubblewrap spec's memory and pids reach the tier; a size that
// is not one is an error naming the field.
func TestBubblewrapOptions(t *testing.T) {
	opts, err := BubblewrapOptions(api.SandboxSpec{Type: api.SandboxBubblewrap, Memory: "512m", PidsLimit: 64, Env: map[string]string{"A": "b"}})
	if err != nil || opts.Memory != 512<<20 || opts.Pids != 64 || opts.Env["A"] != "b" {
		t.Errorf("BubblewrapOptions = %+v, %v; want 512 MiB, 64 pids, env A", opts, err)
	}
	for _, bad := range []string{"lots", "1k", "-1g"} {
		if _, err := BubblewrapOptions(api.SandboxSpec{Type: api.SandboxBubblewrap, Memory: bad}); err == nil || !strings.HasPrefix(err.Error(), "memory: ") {
			t.Errorf("memory %q: err = %v, want one naming memory", bad, err)
		}
	}
}

// TestBubblewrapUnavailable: a worker where bubblewrap did not probe refuses a bubblewrap
// sandbox with the reason, and its per-run directory is the run's (removed on Release).
func TestBubblewrapUnavailable(t *testing.T) {
	s, err := NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get("run-1", api.SandboxSpec{Type: api.SandboxBubblewrap})
	if err == nil || !strings.Contains(err.Error(), "install bubblewrap") {
		t.Errorf("Get without bubblewrap = %v, want ErrSandboxUnavailable saying how to install it", err)
	}
	if !ownsDir(api.SandboxSpec{Type: api.SandboxBubblewrap}) || ownsDir(api.SandboxSpec{Type: api.SandboxBubblewrap, Dir: "/x"}) {
		t.Error("ownsDir: a bubblewrap sandbox without dir is the run's, one with dir the user's")
	}
}
