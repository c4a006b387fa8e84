//go:build unix

package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO in the workspace (mkfifo, or the agent's own shell) is not a file to read or
// write: every file operation refuses it at once instead of blocking for a writer.
func TestLocalFIFO(t *testing.T) {
	l, dir := newLocal(t, LocalOptions{})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("pipe", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// done runs op with a deadline: without the fix Read blocks in open(2) forever.
	done := func(t *testing.T, name string, op func() error) error {
		t.Helper()
		ch := make(chan error, 1)
		go func() { ch <- op() }()
		select {
		case err := <-ch:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on a FIFO still blocked after 5s", name)
			return nil
		}
	}
	for _, p := range []string{"pipe", "link"} {
		t.Run(p, func(t *testing.T) {
			err := done(t, "Read", func() error { _, err := l.Read(ctx, p); return err })
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Read(%s) = %v, want ErrNotRegular", p, err)
			}
			if _, err := l.Stat(ctx, p); !errors.Is(err, ErrNotRegular) {
				t.Errorf("Stat(%s) = %v, want ErrNotRegular", p, err)
			}
			err = done(t, "Write", func() error { _, err := l.Write(ctx, p, []byte("x")); return err })
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Write(%s) = %v, want ErrNotRegular", p, err)
			}
		})
	}
	if fi, err := os.Lstat(filepath.Join(dir, "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v, %v", fi, err)
	}
	if got, err := l.Glob(ctx, "**"); err != nil || len(got) != 0 {
		t.Errorf("Glob(**) = %v, %v; want no files (a FIFO is not listed)", got, err)
	}
}
