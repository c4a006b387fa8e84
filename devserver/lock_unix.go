//go:build unix

package devserver

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: someone else holds the lock.
var errLocked = errors.New("locked")

// tryLock takes an exclusive flock on f without waiting. flock locks belong to the open
// file, so a second open in the same process conflicts too.
func tryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLocked
		}
		return err
	}
}
