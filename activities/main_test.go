package activities_test

import (
	"os"
	"testing"

	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// TestMain removes the MCP test servers the package's tests built.
func TestMain(m *testing.M) { os.Exit(mcptest.Main(m)) }
