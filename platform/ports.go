package platform

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/nexo-temporal/nexo/config"
)

// PortError: a port the config names (dev.frontend_port, dev.ui_port, gateway.addr)
// cannot be bound, usually because another program holds it. Its message names the
// setting and its environment variable, and NEXO_PORT_BASE, which moves all three. The
// embedded server's own error (devserver.PortError, errors.Is devserver.ErrPortTaken)
// stays in the chain: Unwrap gives it.
type PortError struct {
	// Key is the config key that chose the port.
	Key string
	// Value is the key's value: "7233", "127.0.0.1:8234".
	Value string
	// FromBase: port_base gave the value (config.Config.FromPortBase).
	FromBase bool
	// Err is the failure to listen.
	Err error
}

func (e *PortError) Error() string {
	what := "cannot be bound"
	if e.Taken() {
		what = "is taken"
	}
	cause := e.Err
	var op *net.OpError // "listen tcp 127.0.0.1:7233: bind: address already in use"
	if errors.As(e.Err, &op) {
		cause = op
	}
	if e.FromBase {
		return fmt.Sprintf("%s %s (from %s) %s (%v): set %s (or %s) to another base to move all three, or %s or %s for this one",
			e.Key, e.Value, config.PortBaseKey, what, cause, config.PortBaseEnv, config.PortBaseKey, e.Key, config.EnvVar(e.Key))
	}
	return fmt.Sprintf("%s %s %s (%v): set %s or %s, or %s to move all three",
		e.Key, e.Value, what, cause, e.Key, config.EnvVar(e.Key), config.PortBaseEnv)
}

func (e *PortError) Unwrap() error { return e.Err }

// Taken reports whether another program listens on the port (rather than, say, a
// privileged port or an address this machine does not have).
func (e *PortError) Taken() bool { return errors.Is(e.Err, syscall.EADDRINUSE) }

// portError names the setting of a port error for cfg: a PortError (from the dev server's
// start, see platform/dev) gets FromBase; err as it is otherwise.
func portError(cfg config.Config, err error) error {
	var pe *PortError
	if errors.As(err, &pe) {
		pe.FromBase = cfg.FromPortBase(pe.Key)
	}
	return err
}
