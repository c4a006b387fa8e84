//go:build unix

package skills_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/skills"
)

// A SKILL.md that is a FIFO is refused at once: blocking on it would hang the worker's
// start, which loads every skill an agent names.
func TestLoadRefusesFIFO(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "piped"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "piped", skills.FileName), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := skills.Load(root, "piped"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("err = %v, want ErrInvalid saying it is not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load still blocked on a FIFO SKILL.md after 5s")
	}
}
