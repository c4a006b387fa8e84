package api

import "time"

// The outbound A2A tool: an agent's `a2a:` remotes are remote Agent2Agent agents it may
// call, each offered as the tool a2a_<name> (agents.A2AToolName). The cards are read by
// DescribeA2AAgents when the run builds its tools (the result is in history, so replay
// needs no remote), and each call is one CallA2AAgent: message/send, then tasks/get until
// the task ends, on the worker that runs it.
const (
	ActivityDescribeA2AAgents = "DescribeA2AAgents"
	ActivityCallA2AAgent      = "CallA2AAgent"
)

// ErrTypeA2ATransport: a remote A2A agent could not be reached, or answered 5xx
// (retryable: the activity's retry policy tries again).
const ErrTypeA2ATransport = "NexoA2ATransport"

// A2ARemote declares a remote A2A agent an agent may call. It travels in workflow
// history, so it holds no secret: the bearer token is read by the worker from the
// environment variable TokenEnv names and sent as "Authorization: Bearer ...".
type A2ARemote struct {
	// Name makes the tool's name, a2a_<name>: letters, digits, - and _.
	Name string `json:"name" mapstructure:"name" yaml:"name"`
	// URL is the remote agent's base URL: its card is read from
	// <url>/.well-known/agent-card.json, and when no card can be read, URL is taken as
	// its JSON-RPC endpoint.
	URL string `json:"url" mapstructure:"url" yaml:"url"`
	// TokenEnv names the worker's environment variable holding a bearer token sent with
	// the card request and every call. Empty: no token.
	TokenEnv string `json:"token_env,omitempty" mapstructure:"token_env" yaml:"token_env"`
	// Timeout bounds one call: from message/send until the task ends. Zero:
	// DefaultA2ATimeout.
	Timeout Duration `json:"timeout,omitempty" mapstructure:"timeout" yaml:"timeout"`
	// Description tells the model what the remote does when its card cannot be read
	// (the card's name, description and skills win when it can).
	Description string `json:"description,omitempty" mapstructure:"description" yaml:"description"`
}

// Bounds of an A2A remote.
const (
	DefaultA2ATimeout = 5 * time.Minute
	MinA2ATimeout     = time.Second
	MaxA2ATimeout     = 24 * time.Hour
	// MaxA2ADescription bounds a remote's description, the configured one and the one
	// made from its card: it joins every model call's tool list.
	MaxA2ADescription = 4000
)

// CallTimeout is Timeout or DefaultA2ATimeout.
func (r A2ARemote) CallTimeout() time.Duration {
	if r.Timeout > 0 {
		return time.Duration(r.Timeout)
	}
	return DefaultA2ATimeout
}

// DescribeA2AAgentsRequest reads the cards of a run's remotes.
type DescribeA2AAgentsRequest struct {
	RunID   string      `json:"run_id"`
	Remotes []A2ARemote `json:"remotes"`
}

// A2AAgent is a remote as the run offers it: its tool description and the JSON-RPC
// endpoint its calls go to, both taken from its card when it could be read (Error empty),
// else from the declaration.
type A2AAgent struct {
	Remote      string `json:"remote"`
	Description string `json:"description"`
	Endpoint    string `json:"endpoint"`
	// Card is the card's own name, when it was read.
	Card string `json:"card,omitempty"`
	// Error says why the card could not be read; the remote is offered anyway, described
	// by the declaration, and its calls go to its url.
	Error string `json:"error,omitempty"`
}

// DescribeA2AAgentsResult has one entry per remote of the request, in its order.
type DescribeA2AAgentsResult struct {
	Agents []A2AAgent `json:"agents"`
}

// CallA2AAgentRequest sends one message to a remote for a run's tool call.
type CallA2AAgentRequest struct {
	RunID  string    `json:"run_id"`
	CallID string    `json:"call_id"`
	Remote A2ARemote `json:"remote"`
	// Endpoint is the JSON-RPC endpoint DescribeA2AAgents found (A2AAgent.Endpoint).
	Endpoint string `json:"endpoint"`
	// Message is the text sent; ContextID and TaskID, when set, continue a conversation
	// or answer a task that asked for input.
	Message   string `json:"message"`
	ContextID string `json:"context_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	// StoreOver and Note as in CallMCPToolRequest.
	StoreOver int    `json:"store_over,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Events of a run whose agent has A2A remotes: the remotes offered, by name, with the
// endpoint their calls go to (once per toolset), and a card that could not be read
// (remote, error).
const (
	EventA2AAgents    = "a2a_agents"
	EventA2ACardError = "a2a_card_error"
)
