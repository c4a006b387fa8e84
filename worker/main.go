// Command worker runs Nexo's workflows and activities on a Temporal task queue. With --dev
// it first starts an embedded Temporal server (SQLite file under .nexo/, plus the Web UI),
// so one command gives a complete local platform. It is the platform (package platform)
// plus the Quickstart's demo workflows (examples/demo): a user's own worker is the same few
// lines with its own workflows instead.
package main

import (
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

var command = platform.Command{Name: "worker", Options: []platform.Option{
	dev.Server(),
	// DocumentApproval and BuildDashboard with their activities, for the Quickstart.
	platform.Workflows(demo.Register),
	platform.Activity(demo.Activities{}),
}}

func main() { command.Main() }

// Its tests are e2e/worker_cli_test.go, against the built binary: a test binary here would
// link the Temporal server once more.
