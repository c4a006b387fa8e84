//go:build linux

package secrets

import "syscall"

// protect marks the process not dumpable: its /proc/<pid> files (environ, mem, ...) then
// belong to root and other processes of the same user, such as the commands the local
// sandbox runs, can neither read them nor attach a debugger. (It also means no core
// dumps.) A process running as root is not protected from its root children.
func protect() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
}
