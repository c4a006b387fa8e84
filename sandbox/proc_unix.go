//go:build unix

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// shellSupported: commands run with /bin/sh in their own process group.
const shellSupported = true

// guardScript is the process-group leader of every command. It blocks reading its stdin,
// a pipe whose only write end the worker holds; when the worker dies — even by SIGKILL,
// which nothing can trap — the kernel closes that end, read returns, and the guard kills
// its whole group: the command and everything it started. Without it a killed worker
// leaves its commands running while Temporal retries the call on another worker, so the
// orphan and the retry both run. A pipe, unlike PR_SET_PDEATHSIG, is tied to the process
// (not to the thread that forked) and reaches every process of the group, not only the
// one it was set on, and works on every unix.
const guardScript = "read _; kill -9 0"

// guard is a running group leader (see guardScript).
type guard struct {
	cmd  *exec.Cmd
	keep *os.File // the write end: closing it (or dying) kills the group
}

// startGuard starts a guard as the leader of a new process group, whose id is its pid.
func startGuard() (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start process guard: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.Stdin = r // *os.File: no copying goroutine, the guard reads the pipe itself
	cmd.Env = []string{"PATH=" + shellPath}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start process guard: %w", err)
	}
	return &guard{cmd: cmd, keep: w}, nil
}

// pgid is the id of the guarded group.
func (g *guard) pgid() int { return g.cmd.Process.Pid }

// stop kills the group and reaps the guard. Until it is reaped the guard's pid, which is
// the group id, cannot be reused, so killing the group never hits an unrelated process.
func (g *guard) stop() {
	killGroup(g.pgid())
	g.keep.Close()
	_ = g.cmd.Wait()
}

// joinGroup makes cmd a member of the guarded group.
func joinGroup(cmd *exec.Cmd, g *guard) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.pgid()}
}

// ownGroup makes cmd the leader of a new process group, whose id is its pid.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to every process in the group. A group that is already gone
// (ESRCH) is not an error.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// exitCode follows the shell convention: the exit status, or 128+signal when a signal
// killed the process (137 for SIGKILL).
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Guard is a process group that dies with this process (see guardScript), for the
// worker's own long-lived children outside a sandbox, such as a stdio MCP server: when
// the worker is SIGKILLed, the server and everything it started are killed too, instead
// of running on as orphans while a retry starts another.
type Guard struct {
	g    *guard
	once sync.Once
}

// StartGuard starts a guard; Join commands to it before they start.
func StartGuard() (*Guard, error) {
	g, err := startGuard()
	if err != nil {
		return nil, err
	}
	return &Guard{g: g}, nil
}

// Join makes cmd (not started yet) a member of the guarded group.
func (g *Guard) Join(cmd *exec.Cmd) { joinGroup(cmd, g.g) }

// Stop kills the group (the members and whatever they started) and reaps the guard; a
// second Stop does nothing.
func (g *Guard) Stop() { g.once.Do(g.g.stop) }
