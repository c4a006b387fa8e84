// Command ui serves the Temporal Web UI (github.com/temporalio/ui-server, the server the
// temporal CLI's dev server embeds) as a process of its own, against a Temporal frontend.
// The cluster harness (internal/cluster, Options.UI) builds and starts it; it can also be
// run by hand:
//
//	go run ./internal/cluster/cmd/ui --address 127.0.0.1:7233 --namespace default --port 8080
//
// With a frontend that requires mutual TLS, --tls-ca, --tls-cert, --tls-key and
// --tls-server-name give the CA to verify the frontend with, the client certificate to
// present and the name the frontend's certificate is for. The UI itself serves plain HTTP on
// --ip (default 127.0.0.1); GET /healthz answers once it listens.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

type flags struct {
	address, namespace, ip string
	port                   int
	caFile, certFile       string
	keyFile, serverName    string
}

func main() {
	f, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ui:", err)
		os.Exit(2)
	}
	cfg := f.config()
	srv := uiserver.NewServer(uiserveroptions.WithConfigProvider(cfg))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		srv.Stop()
	}()
	fmt.Printf("Temporal Web UI on http://%s for %s (namespace %s)\n", net.JoinHostPort(f.ip, fmt.Sprint(f.port)), f.address, f.namespace)
	// Start returns once Stop closed the listener; a port it cannot listen on ends the
	// process (exit 1) through echo's fatal log, which prints the reason.
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "ui:", err)
		os.Exit(1)
	}
}

func parse(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("ui", flag.ContinueOnError)
	fs.StringVar(&f.address, "address", "", "Temporal frontend host:port (required)")
	fs.StringVar(&f.namespace, "namespace", "default", "namespace the UI opens on")
	fs.StringVar(&f.ip, "ip", "127.0.0.1", "IP address the UI listens on")
	fs.IntVar(&f.port, "port", 0, "port the UI listens on (required)")
	fs.StringVar(&f.caFile, "tls-ca", "", "CA certificate (PEM) that signed the frontend's certificate")
	fs.StringVar(&f.certFile, "tls-cert", "", "client certificate (PEM) to present to the frontend")
	fs.StringVar(&f.keyFile, "tls-key", "", "key (PEM) of --tls-cert")
	fs.StringVar(&f.serverName, "tls-server-name", "", "name the frontend's certificate is for (default: the host of --address)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if _, _, err := net.SplitHostPort(f.address); err != nil {
		return f, fmt.Errorf("--address %q: want host:port of the Temporal frontend (%v)", f.address, err)
	}
	if net.ParseIP(f.ip) == nil {
		return f, fmt.Errorf("--ip %q: not an IP address", f.ip)
	}
	if f.port < 1 || f.port > 65535 {
		return f, fmt.Errorf("--port %d: want 1-65535", f.port)
	}
	if f.namespace == "" {
		return f, errors.New("--namespace is empty")
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return f, errors.New("--tls-cert and --tls-key go together")
	}
	for name, p := range map[string]string{"--tls-ca": f.caFile, "--tls-cert": f.certFile, "--tls-key": f.keyFile} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return f, fmt.Errorf("%s: %w", name, err)
		}
	}
	if f.serverName != "" && f.caFile == "" && f.certFile == "" {
		return f, errors.New("--tls-server-name without --tls-ca or --tls-cert: TLS is off")
	}
	return f, nil
}

func (f flags) config() *uiconfig.Config {
	host := f.ip
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // the UI server joins host and port with a plain ":"
	}
	cfg := &uiconfig.Config{
		Host:                host,
		Port:                f.port,
		TemporalGRPCAddress: f.address,
		EnableUI:            true,
		DefaultNamespace:    f.namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true}, // the UI serves plain http
		HideLogs:            true,
		DisableNewsFetch:    true, // no calls to the internet
	}
	if f.caFile != "" || f.certFile != "" {
		cfg.TLS = uiconfig.TLS{
			CaFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile,
			ServerName: f.serverName,
			// Verify the frontend's certificate against --tls-ca (or the system roots).
			EnableHostVerification: true,
		}
	}
	return cfg
}
