package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLocalRefusesHardLinks plants, in a user's directory, a hard link to a file outside
// it: the file tools, the listing a snapshot hashes and the archive must refuse it, naming
// the file and why, while the directory's other files still work.
func TestLocalRefusesHardLinks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link counts are read on Linux only")
	}
	outside := filepath.Join(t.TempDir(), "secret")
	mustWrite(t, outside, "api key: s3cr3t")
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "notes.md"), "hello")
	if err := os.Link(outside, filepath.Join(dir, "hardlink_secret")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	ctx := context.Background()
	l, err := NewLocal(dir, LocalOptions{RefuseHardLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(ctx) })

	wantRefusal := func(t *testing.T, op string, err error) {
		t.Helper()
		if !errors.Is(err, ErrHardLink) {
			t.Fatalf("%s: err = %v, want ErrHardLink", op, err)
		}
		for _, want := range []string{"hardlink_secret", "2 names", "outside the workspace"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", op, err, want)
			}
		}
	}

	data, err := l.Read(ctx, "hardlink_secret")
	if strings.Contains(string(data), "s3cr3t") {
		t.Fatalf("read through the hard link returned the outside file: %q", data)
	}
	wantRefusal(t, "read", err)
	if got, err := l.Read(ctx, "notes.md"); err != nil || string(got) != "hello" {
		t.Errorf("read notes.md = %q, %v; want hello", got, err)
	}

	_, err = l.ListWorkspace(ctx)
	wantRefusal(t, "list", err)
	_, err = l.OpenWorkspaceFile(ctx, "hardlink_secret")
	wantRefusal(t, "open", err)

	rc, err := l.ArchiveWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(rc)
	rc.Close()
	if strings.Contains(string(archive), "s3cr3t") {
		t.Fatal("the archive carries the outside file")
	}
	wantRefusal(t, "archive", err)

	// Writing the name replaces the link (rename), never the outside file.
	if _, err := l.Write(ctx, "hardlink_secret", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "api key: s3cr3t" {
		t.Errorf("outside file = %q after a write through its link", got)
	}
	if got, err := l.Read(ctx, "hardlink_secret"); err != nil || string(got) != "mine" {
		t.Errorf("read after write = %q, %v; want mine", got, err)
	}
}

// TestLocalHardLinksAllowedByDefault: a per-run workspace (RefuseHardLinks unset) reads a
// file with two names, such as one a build tool linked within the workspace.
func TestLocalHardLinksAllowedByDefault(t *testing.T) {
	l, dir := newLocal(t, LocalOptions{})
	mustWrite(t, filepath.Join(dir, "a"), "x")
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	if got, err := l.Read(context.Background(), "b"); err != nil || string(got) != "x" {
		t.Errorf("read b = %q, %v; want x", got, err)
	}
}
