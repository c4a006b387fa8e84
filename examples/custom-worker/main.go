// Command custom-worker is a user's own Nexo worker: the whole platform (the shipped
// workflows, agents, sandboxes, gateway, and the embedded server under --dev) plus the
// workflow RefundRequest and the activities of a small shop (package refund, so that their
// tests link no Temporal server). For a worker of your own outside this repository, do not
// copy it: `starter worker new <dir> --module <path>` writes a module of that shape (see
// README.md here):
//
//	go run ./examples/custom-worker --dev --config examples/custom-worker/nexo.yaml
package main

import (
	"github.com/nexo-temporal/nexo/examples/custom-worker/refund"
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

func main() { platform.Main(options()...) }

// options are what this worker adds to the platform: the embedded server for --dev, and
// the workflow RefundRequest with the shop's activities (its replay test registers those).
func options() []platform.Option {
	return append([]platform.Option{dev.Server()}, refund.Options()...) // --dev: the embedded Temporal server and Web UI
}
