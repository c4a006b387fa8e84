package api

// Temporal application error types raised by Nexo. A type listed as non-retryable in the
// workflows' default activity options stops retries at once: retrying cannot fix it.
const (
	// ErrTypeBadInput: a request, payload or signal that cannot be used as given.
	ErrTypeBadInput = "NexoBadInput"
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
)
