package platform

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/gateway"
	"github.com/nexo-temporal/nexo/gateway/gwconfig"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/runs"
)

// serveGateway serves the HTTP API and the web page next to the embedded server on ln,
// until ctx ends. An address already in use (listenErr, a PortError) is reported, not fatal: the
// platform works without its page, and a second `worker --dev` must still start. Tokens
// whose secret is missing stop the worker.
func serveGateway(ctx context.Context, cfg config.Config, tc client.Client, store artifacts.Store, ln net.Listener, listenErr error, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	if ln == nil {
		fmt.Fprintf(stdout, "Nexo HTTP API not started: %v\n", listenErr) // a PortError names the settings
		return nil
	}
	rc := runs.New(tc, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue)
	rc.Payloads = payloads.NewDriver(store)
	rc.Blobs = store                   // closed runs' stored records
	rc.PageURL = cfg.Gateway.PageURL() // runs started through the API link back to their page
	// The worker's own store: one cache, and under mem:// the same bytes the worker wrote.
	gw, err := gwconfig.Server(cfg, rc, store, getenv, logger)
	if err != nil {
		ln.Close()
		return err
	}
	go func() {
		if err := gw.Serve(ctx, ln); err != nil {
			logger.Error("serve the HTTP API", "error", err)
		}
	}()
	fmt.Fprintf(stdout, "Nexo HTTP API and web page: http://%s/ (%s)\n", ln.Addr(), gw.AuthSummary())
	fmt.Fprintf(stdout, "Codec endpoint for the Temporal Web UI: %s\n", gateway.CodecEndpoint(ln))
	return nil
}

// uiOrigins are the browser origins of the embedded Web UI on ip:port, which may call the
// gateway's codec endpoint: the address itself and, on this machine, its localhost name.
func uiOrigins(ip string, port int) []string {
	p := strconv.Itoa(port)
	parsed := net.ParseIP(ip)
	if parsed == nil || parsed.IsUnspecified() {
		return []string{"http://127.0.0.1:" + p, "http://localhost:" + p}
	}
	out := []string{"http://" + net.JoinHostPort(ip, p)}
	if parsed.IsLoopback() {
		out = append(out, "http://localhost:"+p)
	}
	return out
}
