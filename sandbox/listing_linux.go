//go:build linux

package sandbox

import (
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// changeStamp is the inode and status-change time of a file: ctime moves on every write,
// truncate, rename onto it and chmod, and cannot be set back by the file's owner (unlike
// mtime), so an unchanged stamp means unchanged bytes.
func changeStamp(fi fs.FileInfo) (string, int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 0
	}
	return strconv.FormatUint(st.Ino, 10), st.Ctim.Sec*1e9 + st.Ctim.Nsec
}

func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// linkCount is the number of names (hard links) of a file.
func linkCount(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink)
}
