package api

// Temporal application error types raised by Nexo. A type listed as non-retryable in the
// workflows' default activity options stops retries at once: retrying cannot fix it.
const (
	// ErrTypeBadInput: a request, payload or signal that cannot be used as given.
	ErrTypeBadInput = "NexoBadInput"
	// ErrTypeStoreCorrupt: the stored bytes of a blob (a thread segment, a tool output, an
	// input payload, a workspace snapshot) do not match the sha256 that names them. Final:
	// the run fails with it rather than retry (nothing a retry does brings the bytes back).
	ErrTypeStoreCorrupt = "NexoStoreCorrupt"
	// ErrTypeNotFound: a named thing (run, file, artifact) does not exist.
	ErrTypeNotFound = "NexoNotFound"
	// ErrTypeEscape: a path leads outside its sandbox.
	ErrTypeEscape = "NexoPathEscape"
	// ErrTypeTooLarge: a payload over Temporal's limits or ours.
	ErrTypeTooLarge = "NexoTooLarge"
	// ErrTypeMCPTransport: an MCP server's transport broke (retryable: the retry
	// reconnects).
	ErrTypeMCPTransport = "NexoMCPTransport"
	// ErrTypeReservedKey: a checkpoint named after a reserved state key.
	ErrTypeReservedKey = "NexoReservedStateKey"
	// ErrTypeRequirements: an agent's sandbox does not meet its `requires`.
	ErrTypeRequirements = "NexoRequirementsUnmet"
	// ErrTypeSessionHandover: a session refused a prompt because it is handing over to
	// its continue-as-new run (retryable: the same prompt sent again reaches the new run).
	// Its detail is a SessionHandover.
	ErrTypeSessionHandover = "NexoSessionHandover"
	// ErrTypeModelUnavailable: the model provider answered 408, 429 or 5xx, or could not
	// be reached (retryable within the model call's retry budget, llm.retry_for).
	ErrTypeModelUnavailable = "NexoModelUnavailable"
	// ErrTypeAgentUnavailable: the worker that ran the activity has no such agent, or no
	// model, in its config (a rolling deploy, workers that disagree). Another worker of
	// the task queue may have it: AgentRun tries again for a while (see
	// workflows/agentavail.go) and a model call retries, instead of failing the run.
	ErrTypeAgentUnavailable = "NexoAgentUnavailable"
	// ErrTypeTokenWait: a model call's booking with its endpoint's token limiter is
	// further off than an attempt waits (retryable: the next attempt starts when the
	// booking is due, via NextRetryDelay, and finds the same booking).
	ErrTypeTokenWait = "NexoTokenWait"
)

// StoreCorruptLead begins the message of every ErrTypeStoreCorrupt error ("the stored
// bytes of thread segment 1a2b… do not match their sha256: …"), so the CLI, the API and
// check-replay can lead with it wherever it is wrapped.
const StoreCorruptLead = "the stored bytes of"

// SessionHandover is the detail of an ErrTypeSessionHandover error.
type SessionHandover struct {
	// Session is the session's workflow id; RunID the run that refused the prompt.
	Session string `json:"session"`
	RunID   string `json:"run_id"`
}
