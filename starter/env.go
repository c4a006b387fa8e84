package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/internal/secrets"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/telemetry"
)

// env is what a command runs with: output streams, and config and clients made on first
// use (so --help and usage errors never need a server).
type env struct {
	stdout, stderr io.Writer
	fs             *pflag.FlagSet

	cfg    *config.Config
	tc     client.Client
	client *runs.Client
	store  artifacts.Store
	tel    *telemetry.Telemetry // traces, when OTEL_* asks (starter/telemetry.go)
	// service is the OpenTelemetry service.name of this command ("" means nexo-starter).
	service string
	// lookupEnv reads the variables the config names for secrets; nil is os.LookupEnv.
	// A long-running command (serve) sets it to the secrets it took out of its
	// environment (takeSecrets).
	lookupEnv func(string) (string, bool)
}

// takeSecrets moves every secret the config names (gateway tokens, the Temporal API key,
// ...) out of this process's environment into memory and makes the process not dumpable,
// as the worker does (internal/secrets): a command of the same user, such as a shell in a
// local sandbox, can then read neither /proc/<pid>/environ nor the memory. It may
// re-execute the starter in place (same pid, same arguments), so it runs before anything
// is started or printed.
func (e *env) takeSecrets() error {
	cfg, err := e.config()
	if err != nil {
		return err
	}
	s, err := secrets.Take(slices.Concat(cfg.SecretEnvNames(), connect.ProfileSecretEnvNames, telemetry.SecretEnvNames))
	if err != nil {
		return err
	}
	e.lookupEnv = s.LookupEnv
	return nil
}

// getenv is os.Getenv over the secrets takeSecrets took.
func (e *env) getenv(name string) string {
	v, _ := e.lookup()(name)
	return v
}

func (e *env) lookup() func(string) (string, bool) {
	if e.lookupEnv != nil {
		return e.lookupEnv
	}
	return os.LookupEnv
}

func bindCommonFlags(fs *pflag.FlagSet) {
	config.BindFlags(fs)
}

func (e *env) config() (config.Config, error) {
	if e.cfg != nil {
		return *e.cfg, nil
	}
	cfg, err := config.Load(config.LoadOptions{Flags: e.fs})
	if err != nil {
		return config.Config{}, err
	}
	e.cfg = &cfg
	return cfg, nil
}

func (e *env) runs(ctx context.Context) (*runs.Client, error) {
	if e.client != nil {
		return e.client, nil
	}
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	// The SDK logs at info about its own connection, which a CLI does not show: --log-level
	// debug shows the client's debug logs, the default (info) and warn show warnings.
	level := max(cfg.SlogLevel(), slog.LevelWarn)
	if cfg.SlogLevel() < slog.LevelInfo {
		level = cfg.SlogLevel()
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	// The worker offloads large payloads (a big run input, a long record) to the store at
	// artifacts.url; the starter reads and writes them there too.
	store, err := e.artifactStore(ctx)
	if err != nil {
		return nil, err
	}
	traced, err := e.traced(ctx, e.service)
	if err != nil {
		return nil, err
	}
	tc, conn, err := connect.DialSettings(ctx, cfg, store, logger, e.lookup(), traced)
	if err != nil {
		return nil, err
	}
	e.tc = tc
	cfg.Temporal.Address, cfg.Temporal.Namespace = conn.Address, conn.Namespace // the profile may supply them
	if e.cfg != nil {
		e.cfg.Temporal = cfg.Temporal
	}
	e.client = runs.New(tc, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue)
	e.client.Payloads = payloads.NewDriver(store)
	e.client.Blobs = store                   // closed runs' stored records
	e.client.PageURL = cfg.Gateway.PageURL() // the Temporal UI links each run started back to its page
	// Unless gateway.url says where the page is, the page a live worker serves (its
	// gateway.addr may not be ours).
	e.client.PageURLFromWorkers = cfg.Gateway.URL == ""
	return e.client, nil
}

// record reads the record of run id.
func (e *env) record(ctx context.Context, id string) (api.Record, error) {
	rc, err := e.runs(ctx)
	if err != nil {
		return api.Record{}, err
	}
	return rc.Get(ctx, id)
}

// artifactStore opens the artifact store the workers write (artifacts.url), once per
// command, so a watch that reads many archived segments shares one cache.
func (e *env) artifactStore(ctx context.Context) (artifacts.Store, error) {
	if e.store != nil {
		return e.store, nil
	}
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	st, err := artifacts.OpenWith(ctx, cfg.Artifacts.URL, artifacts.Options{CacheBytes: cfg.Artifacts.CacheBytes})
	if err != nil {
		return nil, err
	}
	e.store = st
	return st, nil
}

func (e *env) close() {
	if e.tc != nil {
		e.tc.Close()
	}
	if e.store != nil {
		_ = e.store.Close() // PutBlob has written a blob through before it returns
	}
	e.closeTelemetry()
}

// printJSON writes v as indented JSON.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return nil
}
