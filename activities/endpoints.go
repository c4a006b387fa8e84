package activities

import (
	"maps"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// endpointName is the canonical name of an endpoint a request or an agent names: ""
// is the default endpoint (llm: itself); names are lower case, as config files fold them.
func endpointName(name string) string {
	if name == "" {
		return api.DefaultEndpoint
	}
	return strings.ToLower(name)
}

// llmAt is the client of the named endpoint, or a non-retryable error naming op when
// this worker has no such endpoint (workers of one fleet must share llm.endpoints).
func (a *Model) llmAt(op, endpoint string) (*LLM, error) {
	name := endpointName(endpoint)
	if name == api.DefaultEndpoint {
		if a.llm == nil {
			// Retryable: in a fleet whose workers disagree, the retry may reach a worker
			// that has the agent, and so a model (only a worker with agents needs one).
			return nil, temporal.NewApplicationError(
				op+": this worker has no model configured (set llm.base_url and llm.model); another worker of the task queue may take it", api.ErrTypeAgentUnavailable)
		}
		return a.llm, nil
	}
	if l := a.endpoints[name]; l != nil {
		return l, nil
	}
	known := slices.Sorted(maps.Keys(a.endpoints))
	if a.llm != nil {
		known = append([]string{api.DefaultEndpoint}, known...)
	}
	// Retryable, like a missing agent: during a rolling deploy another worker of the task
	// queue may already have the endpoint.
	return nil, temporal.NewApplicationError(
		op+": this worker has no model endpoint \""+name+"\" (it has: "+strings.Join(known, ", ")+
			"); every worker of the task queue needs the same llm.endpoints; another worker may take it", api.ErrTypeAgentUnavailable)
}

// modelAt is the model a call to endpoint uses (the agent's, else the endpoint's), or a
// non-retryable error naming op.
func (a *Model) modelAt(op, endpoint, agentModel string) (string, error) {
	l, err := a.llmAt(op, endpoint)
	if err != nil {
		return "", err
	}
	model := agentModel
	if model == "" {
		model = l.model
	}
	if model == "" {
		field := "llm.model"
		if name := endpointName(endpoint); name != api.DefaultEndpoint {
			field = "llm.endpoints." + name + ".model"
		}
		return "", temporal.NewNonRetryableApplicationError(op+": no model: set "+field+" or the agent's model", api.ErrTypeBadInput, nil)
	}
	return model, nil
}

// clientFor is the go-openai client of endpoint; call it after modelAt succeeded.
func (a *Model) clientFor(endpoint string) *openai.Client {
	l, err := a.llmAt("model call", endpoint)
	if err != nil {
		return nil
	}
	return l.client
}

// withEndpoint records in spec its endpoint's canonical name and, when the endpoint has
// a request rate limit, the task queue its model calls go to (api.ModelTaskQueue), so the
// workflow routes them there deterministically.
func (a *Model) withEndpoint(spec agents.Spec) agents.Spec {
	if spec.LLM != "" {
		spec.LLM = endpointName(spec.LLM)
	}
	spec.ModelQueue = a.modelQueues[endpointName(spec.LLM)]
	return spec
}

// RegisterCalls registers only the model calls (CompleteChat, CompactThread): for the
// worker of an endpoint's rate-limited task queue.
func (a *Model) RegisterCalls(r Registry) {
	r.RegisterActivityWithOptions(a.CompleteChat, activity.RegisterOptions{Name: api.ActivityCompleteChat})
	r.RegisterActivityWithOptions(a.CompactThread, activity.RegisterOptions{Name: api.ActivityCompactThread})
}

// Register registers the model calls and ResolveAgent.
func (a *Model) Register(r Registry) {
	a.RegisterCalls(r)
	r.RegisterActivityWithOptions(a.ResolveAgent, activity.RegisterOptions{Name: api.ActivityResolveAgent})
}
