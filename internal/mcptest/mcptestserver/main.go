// Command mcptestserver serves the test MCP tools (package mcptest) over stdio; the tests
// start it as a stdio MCP server.
package main

import (
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexo-temporal/nexo/internal/mcptest"
)

func main() {
	if err := server.ServeStdio(mcptest.NewServer(mcptest.Options{Process: true})); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}
