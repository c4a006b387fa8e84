//go:build unix

package activities

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f without waiting; false when another process holds it.
func lockFile(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
