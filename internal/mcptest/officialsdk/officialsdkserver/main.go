// Command officialsdkserver serves the test MCP tools (package officialsdk, built on the
// official MCP Go SDK) over stdio; the interop tests start it as a stdio MCP server.
// NEXO_TEST_MCP_VERSIONS, a comma-separated list, narrows the protocol versions it
// accepts.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nexo-temporal/nexo/internal/mcptest/officialsdk"
)

func main() {
	o := officialsdk.Options{Process: true}
	if v := os.Getenv("NEXO_TEST_MCP_VERSIONS"); v != "" {
		o.Versions = strings.Split(v, ",")
	}
	if err := officialsdk.NewServer(o).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "officialsdkserver:", err)
		os.Exit(1)
	}
}
