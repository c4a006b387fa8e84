package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalExec: Exec runs an argv with its stdin, in the workspace, with the cleared
// environment, keeps stdout from its start, and kills a flood at the cap.
func TestLocalExec(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLocal(dir, LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NEXO_SECRET_FOR_TEST", "sk-leak")
	res, err := l.Exec(context.Background(), []string{"/bin/sh", "-c", `read line; echo "got $line"; pwd; env | grep -c NEXO_SECRET_FOR_TEST; echo oops >&2`},
		ExecOptions{Stdin: []byte("hello\n"), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if res.Stdout != "got hello\n"+real+"\n0\n" || res.Stderr != "oops\n" || res.ExitCode != 1-1 {
		t.Errorf("result = %+v", res)
	}

	res, err = l.Exec(context.Background(), []string{"/bin/sh", "-c", "cat >/dev/null; yes 0123456789"}, ExecOptions{Stdin: []byte("x"), MaxStdout: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutOverflow || len(res.Stdout) != 1000 || !strings.HasPrefix(res.Stdout, "0123456789\n") {
		t.Errorf("flood: overflow %v, %d bytes kept", res.StdoutOverflow, len(res.Stdout))
	}

	// A process that never reads a large stdin does not block the call.
	res, err = l.Exec(context.Background(), []string{"/bin/echo", "ignored"}, ExecOptions{Stdin: make([]byte, 4<<20), Timeout: 10 * time.Second})
	if err != nil || res.Stdout != "ignored\n" {
		t.Errorf("unread stdin: %+v, %v", res, err)
	}

	res, err = l.Exec(context.Background(), []string{"/bin/sleep", "30"}, ExecOptions{Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Errorf("timeout: %+v, %v", res, err)
	}
	if _, err := l.Exec(context.Background(), []string{filepath.Join(dir, "missing")}, ExecOptions{}); err == nil {
		t.Error("a missing program started")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Error(err)
	}
}
