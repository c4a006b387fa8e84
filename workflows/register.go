package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// RegisterAll registers every workflow the platform itself runs on a worker: AgentRun and
// Session through the run runtime, and the task queue's registry (RegistryWorkflow) and
// the endpoints' token limiters (TokenLimiterWorkflow), which are not runs and so are
// registered plainly, without the run runtime. The demo workflows of the Quickstart are not
// among them: they live in examples/demo, and the shipped worker adds them.
func RegisterAll(r Registry) {
	Register(r, api.WorkflowAgentRun, AgentRun, Options{})
	Register(r, api.WorkflowSession, Session, Options{})
	r.RegisterWorkflowWithOptions(RegistryWorkflow, workflow.RegisterOptions{Name: api.WorkflowRegistry})
	r.RegisterWorkflowWithOptions(TokenLimiterWorkflow, workflow.RegisterOptions{Name: api.WorkflowTokenLimiter})
}
