//go:build !linux

package sandbox

import (
	"io/fs"
	"os"
)

// changeStamp has nothing beyond size and mtime to offer here: an empty stamp makes every
// snapshot hash the file again.
func changeStamp(fs.FileInfo) (string, int64) { return "", 0 }

func openNoFollow(p string) (*os.File, error) { return os.Open(p) }

// linkCount reports one name: the link count is not read on this system.
func linkCount(fs.FileInfo) uint64 { return 1 }
