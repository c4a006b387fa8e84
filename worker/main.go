// Command worker runs Nexo's workflows and activities on a Temporal task queue. With --dev
// it first starts an embedded Temporal server (SQLite file under .nexo/, plus the Web UI),
// so one command gives a complete local platform. It is the platform (package platform)
// with nothing added: a user's own worker is the same few lines plus its workflows.
package main

import (
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

var command = platform.Command{Name: "worker", Options: []platform.Option{dev.Server()}}

func main() { command.Main() }

// Its tests are e2e/worker_cli_test.go, against the built binary: a test binary here would
// link the Temporal server once more.
