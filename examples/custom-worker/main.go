// Command custom-worker is a user's own Nexo worker: the whole platform (the shipped
// workflows, agents, sandboxes, gateway, and the embedded server under --dev) plus the
// workflow RefundRequest and the activities of a small shop. Copy this folder to start
// yours:
//
//	go run ./examples/custom-worker --dev --config examples/custom-worker/nexo.yaml
package main

import (
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

func main() { platform.Main(options()...) }

// options are what this worker adds to the platform (its replay test registers the same).
func options() []platform.Option {
	return []platform.Option{
		dev.Server(), // --dev: the embedded Temporal server and Web UI
		platform.Workflow("RefundRequest", RefundRequest),
		platform.Activity(NewShop()), // LookupOrder and IssueRefund
	}
}
