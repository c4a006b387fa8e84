package devserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Two servers on one database would both own its history shard and fight over it; the
// second refuses at once, naming the process that holds it.
func TestStartRefusesDatabaseInUse(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the database is not locked on windows")
	}
	db := filepath.Join(t.TempDir(), ".nexo", "temporal.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := Start(ctx, Options{DBPath: db})
	if err != nil {
		t.Fatalf("first Start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			first.Stop()
		}
	}()

	began := time.Now()
	second, err := Start(ctx, Options{DBPath: db})
	if err == nil {
		second.Stop()
		t.Fatal("second Start on the same database succeeded; want it refused")
	}
	want := fmt.Sprintf("database %s is in use by process %d", db, os.Getpid())
	if !errors.Is(err, ErrDBInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("second Start: err = %v, want ErrDBInUse saying %q", err, want)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("second Start took %v to refuse; want at once", d)
	}

	// The lock goes with the server: once it stopped, the database is free again.
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	third, err := Start(ctx, Options{DBPath: db})
	if err != nil {
		t.Fatalf("Start after the first server stopped: %v", err)
	}
	third.Stop()
}
