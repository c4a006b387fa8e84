package activities

import (
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// SetMCPIdleTimeout lets the tests shorten how long an unused MCP client lives.
func SetMCPIdleTimeout(a *Activities, d time.Duration) { a.MCP.setMCPIdleTimeout(d) }

// MCPProtocolVersion is the protocol version the run's open client for spec negotiated.
func MCPProtocolVersion(a *Activities, run string, spec api.MCPServerSpec) string {
	return a.MCP.mcpProtocolVersion(run, spec)
}
