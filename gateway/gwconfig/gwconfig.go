// Package gwconfig builds the gateway from the platform's config. It is the one place
// where config meets the gateway, so that the gateway itself depends only on api, runs
// and the Temporal client (ARCHITECTURE §3) and can be mounted by a program that has no
// Nexo config at all; the binaries (`starter serve`, `worker --dev`) come through here.
package gwconfig

import (
	"fmt"
	"log/slog"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/gateway"
	"github.com/nexo-temporal/nexo/payloads"
)

// Server builds a gateway.Server from cfg: the tokens of gateway.tokens with their
// secrets read through getenv (nil: os.Getenv), store (the caller's handle on
// artifacts.url, which it closes), which is also where the codec endpoint reads offloaded
// payloads (payloads.offload_threshold, gateway.codec_origins), and
// gateway.max_body_bytes; the MCP server at /mcp offers the agents of cfg.Agents as tools. The listen address is the caller's (cfg.Gateway.Addr or a flag).
func Server(cfg config.Config, rc gateway.Runs, store artifacts.Store, getenv func(string) string, logger *slog.Logger) (*gateway.Server, error) {
	var tokens []gateway.Token
	for _, t := range cfg.Gateway.Tokens {
		secret := t.Secret(getenv)
		if secret == "" {
			return nil, fmt.Errorf("gateway.tokens[%s].token_env: environment variable %s is empty or unset; export the token's secret there", t.Name, t.TokenEnv)
		}
		tokens = append(tokens, gateway.Token{Name: t.Name, Secret: secret, Scopes: t.Scopes, Agents: t.Agents, Workflows: t.Workflows})
	}
	agents := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		agents[i] = a.Name
	}
	return gateway.New(gateway.Options{Runs: rc, Artifacts: store, Tokens: tokens, MaxBodyBytes: cfg.Gateway.MaxBodyBytes, Logger: logger,
		ExternalStorage: payloads.ExternalStorage(store, cfg.Payloads.OffloadThreshold), CodecOrigins: cfg.Gateway.CodecOrigins,
		TemporalUI: cfg.Gateway.TemporalUI, Namespace: cfg.Temporal.Namespace, Agents: agents})
}
