package activities

import "time"

// SetMCPIdleTimeout lets the tests shorten how long an unused MCP client lives.
func SetMCPIdleTimeout(a *Activities, d time.Duration) { a.setMCPIdleTimeout(d) }
