// Package connect dials Temporal for the binaries (worker, starter, gateway) from the
// typed config: address, namespace, TLS and an API key read from the environment variable
// the config names, so the key never sits in a file or a log.
package connect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/nexo-temporal/nexo/config"
)

// Dial connects to the Temporal frontend named by cfg.Temporal. It fails fast, with the
// address in the message, when nothing answers there.
func Dial(ctx context.Context, cfg config.Config, logger *slog.Logger) (client.Client, error) {
	opts := client.Options{
		HostPort:  cfg.Temporal.Address,
		Namespace: cfg.Temporal.Namespace,
		Logger:    sdklog.NewStructuredLogger(logger),
	}
	if cfg.Temporal.TLS.Enabled {
		tc, err := tlsConfig(cfg.Temporal.TLS)
		if err != nil {
			return nil, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	if key := cfg.APIKey(os.Getenv); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w; is `worker --dev` or a Temporal server running there?",
			cfg.Temporal.Address, cfg.Temporal.Namespace, err)
	}
	return c, nil
}

func tlsConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load temporal.tls client certificate %s: %w", t.CertFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read temporal.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal.tls.ca_file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
