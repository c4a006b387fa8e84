//go:build linux

package sandbox

import (
	"syscall"
	"unsafe"
)

// waitid(2) constants (linux/wait.h).
const (
	pPID    = 1
	wExited = 0x4
	wNoWait = 0x1000000
)

// waitExited blocks until process pid has exited, leaving it unreaped (a zombie) so its
// pid — and so its process-group id — stays reserved until exec.Cmd.Wait reaps it.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return errno
		}
	}
}
