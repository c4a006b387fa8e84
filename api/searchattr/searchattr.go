// Package searchattr holds the typed keys of Nexo's search attributes (api.SearchAttributes)
// for the Temporal SDK, declared once for the workflows that upsert or start runs with them
// and the clients (runs) that start runs with them or read them.
//
// Why a package of its own and not api: api, the wire contract, depends on the standard
// library only (ARCHITECTURE §3), and a typed key is a value of the SDK's temporal package.
// The names themselves stay constants in api; this package only wraps them.
package searchattr

import (
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

var (
	// Status is api.SearchAttributeStatus, upserted on every status change of a run.
	Status = temporal.NewSearchAttributeKeyKeyword(api.SearchAttributeStatus)
	// ApprovalAgent is api.SearchAttributeApprovalAgent, set while a tool call waits for
	// a human.
	ApprovalAgent = temporal.NewSearchAttributeKeyKeyword(api.SearchAttributeApprovalAgent)
	// Agent is api.SearchAttributeAgent, set when an AgentRun (a top run or a delegate's
	// child) or a session is started.
	Agent = temporal.NewSearchAttributeKeyKeyword(api.SearchAttributeAgent)
)
