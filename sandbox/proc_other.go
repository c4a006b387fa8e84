//go:build !unix

package sandbox

import (
	"os"
	"os/exec"
)

// shellSupported: Local.Shell needs /bin/sh and process groups, so a unix host.
const shellSupported = false

type guard struct{}

func startGuard() (*guard, error)       { return nil, ErrNoShell }
func (g *guard) pgid() int              { return 0 }
func (g *guard) stop()                  {}
func joinGroup(cmd *exec.Cmd, g *guard) {}
func ownGroup(cmd *exec.Cmd)            {}
func killGroup(pgid int)                {}
func exitCode(ps *os.ProcessState) int  { return ps.ExitCode() }

// Guard is not available here: StartGuard fails with ErrNoShell.
type Guard struct{}

func StartGuard() (*Guard, error) { return nil, ErrNoShell }
func (g *Guard) Join(*exec.Cmd)   {}
func (g *Guard) Stop()            {}
