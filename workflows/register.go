package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	notifierwf "github.com/nexo-temporal/nexo/workflows/notifier"
	"github.com/nexo-temporal/nexo/workflows/registry"
	"github.com/nexo-temporal/nexo/workflows/tokenlimiter"
)

// RegisterAll registers every workflow the platform itself runs on a worker: AgentRun and
// Session through the run runtime, and the task queue's registry (package registry) and
// the endpoints' token limiters (package tokenlimiter) and the receivers' notifiers
// (package notifier), which are not runs and so are
// registered plainly, without the run runtime. The demo workflows of the Quickstart are not
// among them: they live in examples/demo, and the shipped worker adds them.
func RegisterAll(r Registry) {
	Register(r, api.WorkflowAgentRun, agentRunResult, Options{})
	Register(r, api.WorkflowSession, Session, Options{})
	r.RegisterWorkflowWithOptions(registry.Workflow, workflow.RegisterOptions{Name: api.WorkflowRegistry})
	r.RegisterWorkflowWithOptions(tokenlimiter.Workflow, workflow.RegisterOptions{Name: api.WorkflowTokenLimiter})
	r.RegisterWorkflowWithOptions(notifierwf.Workflow, workflow.RegisterOptions{Name: api.WorkflowNotifier})
}
