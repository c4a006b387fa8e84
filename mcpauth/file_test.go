package mcpauth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileOthersMayReadIsRefused: a credential file of mode 0644 used to be read and
// reported fine; like ssh with a private key, it is refused naming the fix.
func TestFileOthersMayReadIsRefused(t *testing.T) {
	f := File{Path: filepath.Join(t.TempDir(), "creds.json")}
	ctx := context.Background()
	if err := f.Update(ctx, func(m map[string]Entry) error {
		m[Key("https://mcp.example/", "c")] = Entry{URL: "https://mcp.example/", ClientID: "c", AccessToken: "secret-access-4711"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := f.Entries(ctx)
	if err == nil || !strings.Contains(err.Error(), "mode 0644 lets other users read or change its tokens") || !strings.Contains(err.Error(), "chmod 600 "+f.Path) {
		t.Fatalf("Entries of a 0644 file = %v, want a refusal naming the mode and the chmod", err)
	}
	if strings.Contains(err.Error(), "secret-access-4711") {
		t.Fatalf("the refusal quotes the token: %v", err)
	}
	if err := os.Chmod(f.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Entries(ctx); err != nil || len(got) != 1 {
		t.Fatalf("Entries after chmod 600 = %v, %v", got, err)
	}
	dir := File{Path: t.TempDir()}
	if _, err := dir.Entries(ctx); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Entries of a directory = %v", err)
	}
}

// TestFileLockWaitIsBoundedAndNamesTheHolder: `mcp status` used to wait forever while
// another process held the lock; a caller without a deadline now gives up after LockWait
// and says who holds it.
func TestFileLockWaitIsBoundedAndNamesTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creds.json")
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- File{Path: path}.locked(context.Background(), func() error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	start := time.Now()
	_, err := File{Path: path, LockWait: 200 * time.Millisecond}.Entries(context.Background())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (", os.Getpid())) || !strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("Entries while the lock is held = %v, want it to give up naming the holder's pid", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("gave up after %s, want about LockWait", waited)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := (File{Path: path}).Entries(context.Background()); err != nil {
		t.Fatalf("Entries once the lock is free: %v", err)
	}
}
