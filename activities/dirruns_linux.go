package activities

import (
	"io/fs"
	"syscall"
	"time"
)

// statusChanged is the file's status-change time (ctime).
func statusChanged(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}
