package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// workerEnv makes the test binary act as a worker: it runs helperCommand in a Local
// sandbox over the directory the variable names, and blocks until it is killed.
const workerEnv = "NEXO_SANDBOX_TEST_WORKER_DIR"

// helperCommand records the pids of the shell and of a background job, then sleeps; the
// markers appear only if something of it outlives the killed worker.
const helperCommand = `(sleep 30; touch bg.marker) & echo $! > bg.pid; echo $$ > sh.pid; sleep 30; touch fg.marker`

func TestMain(m *testing.M) {
	if dir := os.Getenv(workerEnv); dir != "" {
		l, err := NewLocal(dir, LocalOptions{})
		if err == nil {
			_, err = l.Shell(context.Background(), helperCommand, time.Minute)
		}
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A worker killed by SIGKILL mid-command takes the command, and what it started, with it:
// Temporal retries the call elsewhere, and an orphan would run it a second time.
func TestLocalShellDiesWithKilledWorker(t *testing.T) {
	requireProc(t)
	dir := t.TempDir()
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), workerEnv+"="+dir)
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	sh := readPID(t, filepath.Join(dir, "sh.pid"))
	bg := readPID(t, filepath.Join(dir, "bg.pid"))
	t.Cleanup(func() { // without the fix they would survive the test
		syscall.Kill(sh, syscall.SIGKILL)
		syscall.Kill(bg, syscall.SIGKILL)
	})
	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	for name, pid := range map[string]int{"shell " + strconv.Itoa(sh): sh, "background job " + strconv.Itoa(bg): bg} {
		waitFor(t, name+" gone after the worker was killed", 10*time.Second, func() bool { return !alive(pid) })
	}
	for _, m := range []string{"fg.marker", "bg.marker"} {
		if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
			t.Errorf("%s exists: the command ran on after its worker died", m)
		}
	}
}
