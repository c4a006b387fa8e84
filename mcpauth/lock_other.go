//go:build !unix

package mcpauth

import (
	"errors"
	"os"
)

// tryLock refuses: the credential file is shared by processes that must not lose a
// rotated refresh token, and this system has no flock here.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("locking the MCP credential file needs a unix system")
}
