package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/mcpauth"
)

// openOAuth prepares the OAuth of a server declared with oauth: mcp-go's configuration
// over the credential file's token store, and a first read of the token (refreshed if it
// is due), so that a server nobody logged in to fails at once with the command to run.
func (c *mcpConn) openOAuth(ctx context.Context, p *mcpPool, spec api.MCPServerSpec) error {
	cfg, err := mcpauth.Config(spec, p.lookupEnv) // client_secret_env: the worker holds its secrets in memory
	if err != nil {
		return c.errorf(err, "oauth")
	}
	store := mcpauth.NewStore(p.creds, spec, cfg)
	cfg.TokenStore = store
	c.oauth, c.oauthCfg = store, cfg
	if _, err := store.GetToken(ctx); err != nil {
		if errors.Is(err, transport.ErrNoToken) {
			err = fmt.Errorf("%w: no token stored for %s in %s", mcpauth.ErrLogin, spec.URL, p.creds.Path)
		}
		return p.oauthError(c, spec, err, "oauth")
	}
	return nil
}

// loginNeeded tells the errors only a new `starter mcp login` fixes: no token stored, a
// refresh the authorization server refused, or the MCP server refusing the token (401).
func loginNeeded(err error) bool {
	return errors.Is(err, mcpauth.ErrLogin) || errors.Is(err, transport.ErrNoToken) ||
		errors.Is(err, transport.ErrOAuthAuthorizationRequired)
}

// oauthError wraps err as c.errorf does and, when only a login helps, says which.
func (p *mcpPool) oauthError(c *mcpConn, spec api.MCPServerSpec, err error, format string, args ...any) error {
	if loginNeeded(err) && p.loginHint != nil {
		format += "; run: " + p.loginHint(spec)
	}
	return c.errorf(err, format, args...)
}

// mcpLoginHint is the command that logs in to spec's server: `starter mcp login <agent>
// <server>`, with the configured agent that declares it (the first by name when several
// do; <agent> when this worker's config declares none).
func (a *MCP) mcpLoginHint(spec api.MCPServerSpec) string {
	var names []string
	for name, ag := range a.agents {
		for _, m := range ag.MCP {
			if m.Name == spec.Name && m.URL == spec.URL && m.OAuth != nil && spec.OAuth != nil && m.OAuth.ClientID == spec.OAuth.ClientID {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	agent := "<agent>"
	if len(names) > 0 {
		agent = names[0]
	}
	return strings.Join([]string{"starter mcp login", agent, spec.Name}, " ")
}
