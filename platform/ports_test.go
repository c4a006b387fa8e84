package platform

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/gateway"
)

// TestPortErrorNamesTheSetting: a taken port's message names the setting, its
// environment variable and NEXO_PORT_BASE; when the base chose the port, the base comes
// first. The listen error stays in the chain.
func TestPortErrorNamesTheSetting(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	_, listenErr := gateway.Listen(addr, true)
	if listenErr == nil {
		t.Fatalf("gateway.Listen(%s) while held = nil error", addr)
	}
	tests := []struct {
		name string
		err  *PortError
		want string
	}{
		{
			name: "set on its own or by default",
			err:  &PortError{Key: "gateway.addr", Value: addr, Err: listenErr},
			want: "gateway.addr " + addr + " is taken (listen tcp " + addr + ": bind: address already in use): " +
				"set gateway.addr or NEXO_GATEWAY_ADDR, or NEXO_PORT_BASE to move all three",
		},
		{
			name: "from the base",
			err:  &PortError{Key: "gateway.addr", Value: addr, FromBase: true, Err: listenErr},
			want: "gateway.addr " + addr + " (from port_base) is taken (listen tcp " + addr + ": bind: address already in use): " +
				"set NEXO_PORT_BASE (or port_base) to another base to move all three, or gateway.addr or NEXO_GATEWAY_ADDR for this one",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("message\n got %s\nwant %s", got, tt.want)
			}
			if !tt.err.Taken() || !errors.Is(tt.err, syscall.EADDRINUSE) {
				t.Errorf("Taken() = %v, errors.Is EADDRINUSE = %v; want both true", tt.err.Taken(), errors.Is(tt.err, syscall.EADDRINUSE))
			}
		})
	}
}

// TestPortErrorFromBase: Run marks a port error FromBase exactly when port_base chose it.
func TestPortErrorFromBase(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{{"NEXO_PORT_BASE=17233"}, {"NEXO_PORT_BASE=17233", "NEXO_DEV_FRONTEND_PORT=7300"}} {
		cfg, err := config.Load(config.LoadOptions{Env: env, File: writeEmptyConfig(t)})
		if err != nil {
			t.Fatal(err)
		}
		pe := &PortError{Key: "dev.frontend_port", Value: "17233", Err: syscall.EADDRINUSE}
		got := portError(cfg, errors.Join(pe))
		if !errors.As(got, &pe) {
			t.Fatalf("portError lost the PortError: %v", got)
		}
		if want := len(env) == 1; pe.FromBase != want {
			t.Errorf("with %v: FromBase = %v, want %v", env, pe.FromBase, want)
		}
		if msg := got.Error(); !strings.Contains(msg, "dev.frontend_port") || !strings.Contains(msg, "NEXO_PORT_BASE") {
			t.Errorf("with %v: message %q names not both dev.frontend_port and NEXO_PORT_BASE", env, msg)
		}
	}
}

func writeEmptyConfig(t *testing.T) string {
	t.Helper()
	f := t.TempDir() + "/nexo.yaml"
	if err := os.WriteFile(f, []byte("log:\n  level: info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
