package bwrap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workerEnv makes the test binary act as a worker: it runs workerCommand sealed in a
// bubblewrap sandbox over the directory the variable names, and blocks until killed.
const workerEnv = "NEXO_BWRAP_TEST_WORKER_DIR"

// workerCommand starts a background job, says it started, and sleeps; the markers appear
// only if something of it outlives the killed worker.
const workerCommand = `(sleep 20; touch bg.marker) & touch started; sleep 20; touch fg.marker`

func TestMain(m *testing.M) {
	if dir := os.Getenv(workerEnv); dir != "" {
		sb, err := New(dir, Options{})
		if err == nil {
			_, err = sb.Shell(context.Background(), workerCommand, time.Minute)
		}
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// descendants returns the pids of every live process below pid, read from /proc (the
// sandbox's processes are in a pid namespace of their own, but this one sees them).
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, ...
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestShellDiesWithKilledWorker: a worker SIGKILLed in the middle of a sealed command takes
// the command and its background job with it (no guard process runs beside bwrap: its
// --die-with-parent and pid namespace are the guarantee), as the local tier's guard does
// for its commands (sandbox/orphan_test.go).
func TestShellDiesWithKilledWorker(t *testing.T) {
	requireBwrap(t)
	dir := filepath.Join(t.TempDir(), "ws")
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), workerEnv+"="+dir)
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %v", what, d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitUntil("the sealed command started", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	procs := descendants(t, worker.Process.Pid)
	t.Cleanup(func() { // they would survive the test if the guarantee failed
		for _, p := range procs {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	// bwrap, its pid 1, the shell, the background subshell, two sleeps.
	if len(procs) < 4 {
		t.Fatalf("the worker %d has %d processes below it (%v), want bwrap and the command's", worker.Process.Pid, len(procs), procs)
	}
	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	for _, p := range procs {
		waitUntil("process "+strconv.Itoa(p)+" of the sealed command gone after its worker was killed", 10*time.Second,
			func() bool { return !alive(p) })
	}
	for _, m := range []string{"fg.marker", "bg.marker"} {
		if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
			t.Errorf("%s exists: the command ran on after its worker died", m)
		}
	}
}
