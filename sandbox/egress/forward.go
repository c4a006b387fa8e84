package egress

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nexo-temporal/nexo/sandbox/egress/forwarder"
)

// ForwarderName is the name the worker's executable answers to as the forwarder inside a
// sandbox (see package forwarder, which this package links into every binary that uses
// it).
const ForwarderName = forwarder.Name

// ForwardPort is the port the forwarder listens on inside a sandbox (its own network
// namespace, so every sandbox can use the same).
const ForwardPort = 3128

// Executable is the program the sandbox runs as its forwarder: this process's own
// executable, resolved (a bind mount needs the file, not a link to it).
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the worker's executable for the egress forwarder: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe, nil
}
