package activities

import (
	"testing"
)

// A worker keeps its host id across restarts on one sandbox root; a second process on the
// same root while the first runs gets another id; a different root is another host.
func TestHostIDSurvivesRestartAndIsNotShared(t *testing.T) {
	root := t.TempDir()
	id1, release1, err := HostID(root)
	if err != nil || !validHostID(id1) {
		t.Fatalf("HostID = %q, %v", id1, err)
	}
	id2, release2, err := HostID(root)
	if err != nil || id2 == id1 {
		t.Errorf("a second process on a held root got %q (first %q), %v; want an id of its own", id2, id1, err)
	}
	release2()
	release1()
	again, release, err := HostID(root)
	if err != nil || again != id1 {
		t.Errorf("after a restart HostID = %q, want %q (%v)", again, id1, err)
	}
	release()
	other, release, err := HostID(t.TempDir())
	if err != nil || other == id1 {
		t.Errorf("another root's id = %q, want a new one (%v)", other, err)
	}
	release()
}
