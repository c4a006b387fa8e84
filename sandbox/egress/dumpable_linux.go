package egress

import "syscall"

// nonDumpable closes the forwarder's /proc/<pid>/mem, environ and fds to other processes
// of its user (prctl PR_SET_DUMPABLE 0), as the worker does for itself.
func nonDumpable() {
	const prSetDumpable = 4
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
}
