package dev

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/platform"
)

// TestStartNamesTheTakenPort: with its frontend or UI port held by another listener, the
// embedded server does not start, and the error names the setting and its environment
// variable (platform.PortError) while errors.Is still finds devserver.ErrPortTaken.
func TestStartNamesTheTakenPort(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	p := strconv.Itoa(port)
	tests := []struct {
		name string
		opts platform.DevServerOptions
		want string
	}{
		{"frontend", platform.DevServerOptions{IP: "127.0.0.1", FrontendPort: port},
			"dev.frontend_port " + p + " is taken (listen tcp 127.0.0.1:" + p + ": bind: address already in use): " +
				"set dev.frontend_port or NEXO_DEV_FRONTEND_PORT, or NEXO_PORT_BASE to move all three"},
		{"UI", platform.DevServerOptions{IP: "127.0.0.1", UIPort: port},
			"dev.ui_port " + p + " is taken (listen tcp 127.0.0.1:" + p + ": bind: address already in use): " +
				"set dev.ui_port or NEXO_DEV_UI_PORT, or NEXO_PORT_BASE to move all three"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := start(context.Background(), tt.opts)
			if err == nil {
				srv.Stop()
				t.Fatalf("start with port %d held = nil error", port)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %s\nwant %s", got, tt.want)
			}
			if !errors.Is(err, devserver.ErrPortTaken) {
				t.Errorf("errors.Is(%v, devserver.ErrPortTaken) = false", err)
			}
			var pe *platform.PortError
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Key, "dev.") {
				t.Errorf("error %v is no platform.PortError of a dev.* key", err)
			}
		})
	}
}
