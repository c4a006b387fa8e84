package activities_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Concurrent first uses of a run's sandbox get the one sandbox, made once.
func TestSandboxesOpenConcurrentlyMakesOne(t *testing.T) {
	t.Parallel()
	sbs, err := activities.NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec := api.SandboxSpec{Type: api.SandboxVirtual}
	got := make([]sandbox.Sandbox, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			sb, err := sbs.Open(context.Background(), "run-1", spec)
			if err != nil {
				t.Error(err)
			}
			got[i] = sb
		})
	}
	wg.Wait()
	for i, sb := range got {
		if sb == nil || sb != got[0] {
			t.Fatalf("Open %d returned %p, Open 0 %p: want one sandbox for the run", i, sb, got[0])
		}
	}
	other, err := sbs.Open(context.Background(), "run-2", spec)
	if err != nil || other == got[0] {
		t.Fatalf("another run's Open = %p, %v; want its own sandbox", other, err)
	}
}

// A sandbox file too large to hold in memory is refused as an artifact before it is read,
// with a message naming its size; a small one is stored.
func TestWriteArtifactRefusesHugeFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	huge := filepath.Join(e.ws, "huge.bin")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(activities.MaxArtifactBytes + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	_, err = e.a.Host.WriteArtifact(context.Background(), api.WriteArtifactRequest{RunID: testRun, Name: "huge.bin", Path: "huge.bin"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != api.ErrTypeTooLarge || !app.NonRetryable() ||
		!strings.Contains(app.Message(), fmt.Sprintf("is %d bytes", activities.MaxArtifactBytes+1)) {
		t.Fatalf("WriteArtifact(huge) = %v, want a non-retryable %s error naming the size", err, api.ErrTypeTooLarge)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "small.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	meta, err := e.a.Host.WriteArtifact(context.Background(), api.WriteArtifactRequest{RunID: testRun, Name: "small.txt", Path: "small.txt"})
	if err != nil || meta.Size != 2 {
		t.Fatalf("WriteArtifact(small) = %+v, %v", meta, err)
	}
}

// A run's local sandbox over the user's own dir: refuses a hard link planted there to a
// file outside it; the worker's own per-run directory does not (only the run writes there).
func TestSandboxesUserDirRefusesHardLinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sbs, err := activities.NewSandboxes(root)
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := t.TempDir()
	if err := os.Link(secret, filepath.Join(user, "hardlink_secret")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	ctx := context.Background()
	spec := api.SandboxSpec{Type: api.SandboxLocal, Dir: user}
	sb, err := sbs.Open(ctx, "run-user", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sbs.Release(ctx, "run-user", spec) })
	if data, err := sb.Read(ctx, "hardlink_secret"); !errors.Is(err, sandbox.ErrHardLink) || !strings.Contains(err.Error(), "hardlink_secret") {
		t.Fatalf("read hardlink_secret in a user dir = %q, %v; want ErrHardLink naming the file", data, err)
	}

	own := api.SandboxSpec{Type: api.SandboxLocal}
	sb, err = sbs.Open(ctx, "run-own", own)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sbs.Release(ctx, "run-own", own) })
	if err := os.WriteFile(filepath.Join(root, "run-own", "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "run-own", "a"), filepath.Join(root, "run-own", "b")); err != nil {
		t.Fatal(err)
	}
	if data, err := sb.Read(ctx, "b"); err != nil || string(data) != "x" {
		t.Errorf("read b in the run's own dir = %q, %v; want x", data, err)
	}
}
