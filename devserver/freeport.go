package devserver

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"
)

// The services whose ports Options names, as PortError.Service says them.
const (
	ServiceFrontend = "frontend"
	ServiceUI       = "UI"
)

// PortError: Start could not bind a port Options named (FrontendPort, UIPort). It
// matches ErrPortTaken when something else listens there. The package names the port by
// its service; a caller that knows which setting chose it (package platform) names that.
type PortError struct {
	// Service is ServiceFrontend or ServiceUI.
	Service string
	// Port is the port Options named.
	Port int
	// Err is the listen error.
	Err error
}

func (e *PortError) Error() string {
	if e.Taken() {
		return fmt.Sprintf("%s port %d is taken (%v)", e.Service, e.Port, e.Err)
	}
	return fmt.Sprintf("%s port %d cannot be bound (%v)", e.Service, e.Port, e.Err)
}

func (e *PortError) Unwrap() error { return e.Err }

// Is matches ErrPortTaken when the port is taken.
func (e *PortError) Is(target error) bool { return target == ErrPortTaken && e.Taken() }

// Taken reports whether the listen failed because something else listens on the port
// (rather than, say, a privileged port or an IP this machine does not have).
func (e *PortError) Taken() bool { return errors.Is(e.Err, syscall.EADDRINUSE) }

// FreePort returns a TCP port on ip that nothing listens on right now.
//
// The port is not reserved: another process may take it before the caller binds it. To make
// that unlikely on Linux (which hands out ephemeral ports at random, so a just-released port
// can come straight back), FreePort leaves a connection to the port in TIME_WAIT on the server
// side: the kernel then skips the port for bind(:0) for about a minute while an explicit bind
// with SO_REUSEADDR (Go's default for listeners) still succeeds. macOS and Windows allocate
// ephemeral ports sequentially and need no such trick.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("listen on %s: %w", ip, err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		return port, nil
	}
	// Connect, accept, and close the accepted side first: the side that closes first is the
	// one that enters TIME_WAIT, and it must be the listening port's side.
	client, err := net.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("reserve port %d: %w", port, err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("reserve port %d: %w", port, err)
	}
	if err := server.Close(); err != nil {
		return 0, fmt.Errorf("reserve port %d: %w", port, err)
	}
	return port, nil
}

// checkPortFree reports an error when something already listens on ip:port.
func checkPortFree(ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
