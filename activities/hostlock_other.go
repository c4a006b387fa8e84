//go:build !unix

package activities

import "os"

// lockFile: no advisory locks here; a second worker on the same root shares its host id.
func lockFile(*os.File) bool { return true }

func unlockFile(*os.File) {}
