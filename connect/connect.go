// Package connect dials Temporal for the binaries (worker, starter, gateway) from the
// typed config: address, namespace, TLS and an API key read from the environment variable
// the config names, so the key never sits in a file or a log; keys the config leaves at
// their defaults come from the standard Temporal client profile (profile.go), so the
// binaries reach the same server as the user's `temporal` CLI. Every client it makes carries
// External Storage over the blob store (package payloads), and so does every worker built
// on one, so no payload the platform sends or receives is bounded by Temporal's 2 MB limit.
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

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/payloads"
)

// Dial connects to the Temporal frontend named by cfg.Temporal. It fails fast, with the
// address in the message, when nothing answers there. Payloads of
// cfg.Payloads.OffloadThreshold bytes or more go to blobs, which must be the store at
// cfg.Artifacts.URL that every other worker, starter and gateway of the deployment shares;
// workers made from the client (worker.New) inherit it.
func Dial(ctx context.Context, cfg config.Config, blobs artifacts.Blobs, logger *slog.Logger, more ...Option) (client.Client, error) {
	return DialWith(ctx, cfg, blobs, logger, os.Getenv, more...)
}

// DialWith is Dial reading the API key temporal.api_key_env names through getenv: a
// worker holds its secrets in memory, not in its environment (internal/secrets).
func DialWith(ctx context.Context, cfg config.Config, blobs artifacts.Blobs, logger *slog.Logger, getenv func(string) string, more ...Option) (client.Client, error) {
	c, _, err := DialSettings(ctx, cfg, blobs, logger, func(n string) (string, bool) {
		if v := getenv(n); v != "" {
			return v, true
		}
		return os.LookupEnv(n)
	}, more...)
	return c, err
}

// DialSettings is Dial over the Temporal client profile merged in (see Resolve), reading
// the environment through lookup. It returns the connection it made: a caller that
// addresses the namespace itself (runs.New, the search-attribute check) must use
// Settings.Namespace, which the profile may have supplied.
func DialSettings(ctx context.Context, cfg config.Config, blobs artifacts.Blobs, logger *slog.Logger, lookup func(string) (string, bool), more ...Option) (client.Client, Settings, error) {
	s, err := Resolve(cfg.Temporal, lookup)
	if err != nil {
		return nil, Settings{}, err
	}
	if blobs == nil {
		return nil, s, fmt.Errorf("connect to Temporal at %s: no blob store for payloads over %d bytes (open artifacts.url)",
			s.Address, cfg.Payloads.OffloadThreshold)
	}
	opts := client.Options{
		Logger:          sdklog.NewStructuredLogger(logger),
		ExternalStorage: payloads.ExternalStorage(blobs, cfg.Payloads.OffloadThreshold),
	}
	s.apply(&opts)
	for _, o := range more {
		o(&opts)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, s, fmt.Errorf("connect to Temporal at %s (from %s; namespace %s from %s%s): %w; is `worker --dev` or a Temporal server running there?",
			s.Address, s.AddressFrom, s.Namespace, s.NamespaceFrom, s.describeAuth(), err)
	}
	return c, s, nil
}

// describeAuth names, for an error, where TLS and the API key came from (never the key).
func (s Settings) describeAuth() string {
	out := ""
	if s.TLS != nil {
		out += "; TLS from " + s.TLSFrom
	}
	if s.APIKeyFrom != "" {
		out += "; API key from " + s.APIKeyFrom
	}
	return out
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
