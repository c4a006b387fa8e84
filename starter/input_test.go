package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInputIsBoundedWhileReading: --input @/dev/zero (or a huge file) stops at the bound
// with an error instead of reading until the starter runs out of memory.
func TestInputIsBoundedWhileReading(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	_, err := readInput("@/dev/zero")
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "larger than 64 MiB") {
		t.Fatalf("readInput(@/dev/zero) = %v, want a usage error naming the bound", err)
	}
	p := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(p, []byte(`{"doc_id":"42"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readInput("@" + p); err != nil || string(b) != `{"doc_id":"42"}` {
		t.Errorf("readInput(@file) = %s, %v", b, err)
	}
}
