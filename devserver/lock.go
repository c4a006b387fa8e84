package devserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ErrDBInUse means another server (in this process or another) holds the database.
var ErrDBInUse = errors.New("in use")

// dbLock is the exclusive lock a server holds on its database for its whole life: two
// servers on one SQLite file would both own its history shard and fight over it (hundreds
// of errors a minute each), so the second refuses at once instead.
type dbLock struct{ f *os.File }

// lockDB takes the lock on db (the database file; display is how to name it to the user)
// through the file db+".lock" beside it, which then holds the owner's pid. The lock is the
// operating system's (flock), so it goes with the process however it ends: a killed
// server leaves a lock file behind but no lock.
func lockDB(db, display string) (*dbLock, error) {
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	f, err := os.OpenFile(db+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock database %s: %w", display, err)
	}
	if err := tryLock(f); err != nil {
		owner := "another process"
		if b, rerr := os.ReadFile(db + ".lock"); rerr == nil {
			if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil && pid > 0 {
				owner = "process " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("database %s is %w by %s (stop that server, or give this one another database)", display, ErrDBInUse, owner)
		}
		return nil, fmt.Errorf("lock database %s: %w", display, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dbLock{f: f}, nil
}

// release gives the lock up. The lock file stays (removing it would race with a server
// that has just opened it).
func (l *dbLock) release() {
	if l != nil {
		l.f.Close()
	}
}
