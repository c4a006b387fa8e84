// Command worker runs Nexo's workflows and activities on a Temporal task queue. With --dev
// it first starts an embedded Temporal server (SQLite file under .nexo/, plus the Web UI),
// so one command gives a complete local platform. It is the platform (package platform)
// plus the Quickstart's demo workflows (examples/demo): a user's own worker is the same few
// lines with its own workflows instead.
package main

import (
	"context"
	"io"

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

// run, exitCode and usageLine are the command's own, under the names its tests use.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) error {
	return command.Run(ctx, argv, stdout, stderr)
}

func exitCode(err error, stderr io.Writer) int { return command.ExitCode(err, stderr) }

var usageLine = command.UsageLine()
