package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A local workspace archived and restored into another directory (another host) comes
// back file for file; what the target held before is gone; a link is not carried.
func TestLocalArchiveRestoresOnAnotherDirectory(t *testing.T) {
	ctx := context.Background()
	src, err := NewLocal(t.TempDir(), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{"notes.md": "one", "sub/deep/x.txt": "two"} {
		if _, err := src.Write(ctx, p, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	dst, err := NewLocal(t.TempDir(), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Write(ctx, "stale.md", []byte("old")); err != nil {
		t.Fatal(err)
	}
	rc, err := src.ArchiveWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := dst.RestoreWorkspace(ctx, rc); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"notes.md": "one", "sub/deep/x.txt": "two"} {
		if b, err := dst.Read(ctx, p); err != nil || string(b) != want {
			t.Errorf("%s after restore = %q, %v", p, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst.Dir(), "stale.md")); !os.IsNotExist(err) {
		t.Errorf("stale.md survived the restore: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst.Dir(), "link")); !os.IsNotExist(err) {
		t.Errorf("the symlink was carried: %v", err)
	}
}

// A virtual workspace's archive fills a fresh virtual sandbox (a restarted worker) and a
// local one alike.
func TestVirtualArchiveRoundTrip(t *testing.T) {
	ctx := context.Background()
	v := NewVirtual()
	if _, err := v.Write(ctx, "a/b.md", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	rc, err := v.ArchiveWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := NewVirtual()
	if err := w.RestoreWorkspace(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if b, err := w.Read(ctx, "/workspace/a/b.md"); err != nil || string(b) != "kept" {
		t.Errorf("restored virtual a/b.md = %q, %v", b, err)
	}
	rc, _ = v.ArchiveWorkspace(ctx)
	l, _ := NewLocal(t.TempDir(), LocalOptions{})
	if err := l.RestoreWorkspace(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Read(ctx, "a/b.md"); err != nil || string(b) != "kept" {
		t.Errorf("local from a virtual archive: %q, %v", b, err)
	}
}
