//go:build !unix

package devserver

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

// tryLock is a no-op where flock is not available: the database is not locked there.
func tryLock(f *os.File) error { return nil }
