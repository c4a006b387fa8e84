//go:build unix

package activities

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts a stdio MCP server in a process group of its own (its id is the
// server's pid), so closing it also stops whatever it started, and a Ctrl-C meant for
// the worker reaches the server only through the worker's orderly shutdown.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to what is left of a process group; a group that is gone
// (ESRCH) is fine.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
