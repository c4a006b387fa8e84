package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/gateway"
	"github.com/nexo-temporal/nexo/gateway/gwconfig"
)

// serveCmd serves the HTTP API and the web page against whatever Temporal the config
// names, until Ctrl-C. `worker --dev` serves the same gateway next to its embedded server.
func serveCmd() *command {
	return &command{
		name: "serve", args: "[--addr HOST:PORT]",
		summary: "Serve the HTTP API (/v1) and the web page: runs, live events, artifacts, approvals.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("addr", "", "listen on this host:port (default gateway.addr, 127.0.0.1:8234); a non-loopback address needs gateway.tokens")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			// First: the gateway's tokens and keys live in memory from here on.
			if err := e.takeSecrets(); err != nil {
				return err
			}
			cfg, err := e.config()
			if err != nil {
				return err
			}
			addr, _ := fs.GetString("addr")
			if addr == "" {
				addr = cfg.Gateway.Addr
			}
			e.service = "nexo-gateway" // its traces name the gateway, not the CLI
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			rc.PageURLFromWorkers = false // this gateway is the page its runs link to
			if cfg.Gateway.URL == "" {
				rc.PageURL = config.Gateway{Addr: addr}.PageURL() // --addr, when given
			}
			store, err := e.artifactStore(ctx)
			if err != nil {
				return err
			}
			gw, err := gwconfig.Server(cfg, rc, store, e.getenv, cfg.NewLogger(e.stderr))
			if err != nil {
				return err
			}
			ln, err := gw.Listen(addr)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "Nexo HTTP API and web page: http://%s/ (Temporal %s; %s)\n", ln.Addr(), cfg.Temporal.Address, gw.AuthSummary())
			origins := "none: list the UI's origin in gateway.codec_origins"
			if len(cfg.Gateway.CodecOrigins) > 0 {
				origins = strings.Join(cfg.Gateway.CodecOrigins, ", ")
			}
			fmt.Fprintf(e.stdout, "Codec endpoint for a Temporal Web UI: %s (origins %s)\n", gateway.CodecEndpoint(ln), origins)
			return gw.Serve(ctx, ln)
		},
	}
}
