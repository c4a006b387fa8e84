//go:build unix

package sandbox

import (
	"os"
	"os/exec"
	"syscall"
)

// shellSupported: commands run with /bin/sh in their own process group.
const shellSupported = true

// setProcessGroup puts the command in a new process group whose id is its pid, so the
// command and everything it starts can be killed together.
func setProcessGroup(cmd *exec.Cmd) {
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
