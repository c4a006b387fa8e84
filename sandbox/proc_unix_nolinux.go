//go:build unix && !linux

package sandbox

import "errors"

// waitExited is not available here: Shell reaps with exec.Cmd.Wait and then kills the
// group, accepting the (tiny) window in which the group id could be reused.
func waitExited(pid int) error { return errors.ErrUnsupported }
