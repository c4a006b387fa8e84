//go:build !unix

package sandbox

import (
	"errors"
	"os"
	"os/exec"
)

// shellSupported: Local.Shell needs /bin/sh and process groups, so a unix host.
const shellSupported = false

func setProcessGroup(cmd *exec.Cmd)    {}
func killGroup(pgid int)               {}
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }
func waitExited(pid int) error         { return errors.ErrUnsupported }
