package api

import (
	"encoding/json"
	"time"
)

// MCP activity names.
const (
	ActivityListMCPTools = "ListMCPTools"
	ActivityCallMCPTool  = "CallMCPTool"
	ActivityCloseMCP     = "CloseMCP"
)

// MCP transports.
const (
	MCPStdio = "stdio"
	MCPSSE   = "sse"
	MCPHTTP  = "http"
)

// MCPServerSpec declares an MCP server an agent may use. It travels in workflow history,
// so it holds no secret: a bearer token is read by the worker from the environment variable
// TokenEnv names and sent as "Authorization: Bearer ...", or, with OAuth, taken from the
// worker's credential file (written by `starter mcp login`). Do not put secrets in Headers
// or Env; name them in TokenEnv.
type MCPServerSpec struct {
	// Name prefixes the server's tools as the model sees them: <name>__<tool>.
	Name string `json:"name" mapstructure:"name" yaml:"name"`
	// Transport is stdio, sse or http (streamable HTTP).
	Transport string `json:"transport" mapstructure:"transport" yaml:"transport"`
	// Command and Args start a stdio server; Env is added to its (otherwise minimal)
	// environment.
	Command string            `json:"command,omitempty" mapstructure:"command" yaml:"command"`
	Args    []string          `json:"args,omitempty" mapstructure:"args" yaml:"args"`
	Env     map[string]string `json:"env,omitempty" mapstructure:"env" yaml:"env"`
	// URL of an sse or http server, and extra request headers.
	URL     string            `json:"url,omitempty" mapstructure:"url" yaml:"url"`
	Headers map[string]string `json:"headers,omitempty" mapstructure:"headers" yaml:"headers"`
	// TokenEnv names the environment variable holding a bearer token.
	TokenEnv string `json:"token_env,omitempty" mapstructure:"token_env" yaml:"token_env"`
	// OAuth has the worker authenticate with OAuth 2.1 tokens (sse and http only; not
	// with TokenEnv).
	OAuth *MCPOAuth `json:"oauth,omitempty" mapstructure:"oauth" yaml:"oauth"`
	// Result shapes what the model, the events, the history and the store get of each of
	// this server's tool results (the worker applies it inside CallMCPTool).
	Result *MCPResultPolicy `json:"result,omitempty" mapstructure:"result" yaml:"result"`
	// Timeout bounds one call of this server's tools (connecting excluded); a call that
	// passes it is an error result the model sees, and the run goes on. Zero: only the
	// activity's own bound (5 minutes).
	Timeout Duration `json:"timeout,omitempty" mapstructure:"timeout" yaml:"timeout"`
}

// MCPResultPolicy redacts and caps an MCP server's tool results before they go anywhere.
type MCPResultPolicy struct {
	// MaxBytes caps a result (after redaction), cut at a UTF-8 boundary with a note the
	// model reads: "[result cut at N of M bytes]". Zero: the default cap (MCPResultCap of
	// package activities).
	MaxBytes int `json:"max_bytes,omitempty" mapstructure:"max_bytes" yaml:"max_bytes"`
	// Redact holds regular expressions (Go RE2 syntax); every match in a result's text
	// is replaced by MCPRedacted.
	Redact []string `json:"redact,omitempty" mapstructure:"redact" yaml:"redact"`
}

// Bounds of an MCP server's result policy and timeout.
const (
	MaxMCPResultBytes = 64 << 20
	MinMCPTimeout     = time.Second
	MaxMCPTimeout     = 24 * time.Hour
)

// MCPRedacted replaces what a server's result.redact patterns match.
const MCPRedacted = "[redacted]"

// MCPOAuth declares how a remote MCP server is authorized with OAuth 2.1: `starter mcp
// login` runs the authorization code flow with PKCE once and stores the tokens in the
// worker's credential file, and the worker refreshes them. Only names travel here: the
// tokens stay in that file and the client secret, if any, in an environment variable.
type MCPOAuth struct {
	// ClientID is the client registered with the authorization server.
	ClientID string `json:"client_id" mapstructure:"client_id" yaml:"client_id"`
	// Scopes are requested at login.
	Scopes []string `json:"scopes,omitempty" mapstructure:"scopes" yaml:"scopes"`
	// AuthorizationServer is the issuer URL of the authorization server; empty: the one
	// the MCP server's protected-resource metadata names.
	AuthorizationServer string `json:"authorization_server,omitempty" mapstructure:"authorization_server" yaml:"authorization_server"`
	// ClientSecretEnv names the environment variable holding the client secret of a
	// confidential client; empty for a public client.
	ClientSecretEnv string `json:"client_secret_env,omitempty" mapstructure:"client_secret_env" yaml:"client_secret_env"`
}

// MCPToolSeparator joins a server's name and its tool's name into the name the model sees.
const MCPToolSeparator = "__"

// MCPTool is one tool of one server.
type MCPTool struct {
	Server string `json:"server"`
	// Name is the tool's name on its server.
	Name string `json:"name"`
	// QualifiedName is the name offered to the model and used in permissions (mcp_allow,
	// approvals): <server>__<tool>.
	QualifiedName string          `json:"qualified_name"`
	Description   string          `json:"description,omitempty"`
	InputSchema   json.RawMessage `json:"input_schema"`
}

// ListMCPToolsRequest lists the tools of an agent's MCP servers for a run.
type ListMCPToolsRequest struct {
	RunID   string          `json:"run_id"`
	Servers []MCPServerSpec `json:"servers"`
}

// ListMCPToolsResult holds the tools of every server that answered, and an error message
// for each that did not (it offers no tools; the run goes on).
type ListMCPToolsResult struct {
	Tools  []MCPTool         `json:"tools"`
	Errors map[string]string `json:"errors,omitempty"`
}

// CallMCPToolRequest calls one tool on one server for a run.
type CallMCPToolRequest struct {
	RunID  string          `json:"run_id"`
	CallID string          `json:"call_id"`
	Server MCPServerSpec   `json:"server"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	// StoreOver: a result over this many bytes is stored as a blob (RunToolResult.ContentRef)
	// and only a preview returned; 0 keeps every result inline (runs recorded before).
	StoreOver int `json:"store_over,omitempty"`
	// Note, when set, starts the result before it is stored (as RunToolRequest.Note), so
	// the model reads it even when the result travels by reference: "A human edited this
	// call's arguments...". The result says it did so (RunToolResult.Noted).
	Note string `json:"note,omitempty"`
	// Hooks names the tool hooks the agent selects, as RunToolRequest.Hooks.
	Hooks []string `json:"hooks,omitempty"`
}

// CloseMCPRequest closes the run's MCP clients (stdio servers are stopped and reaped).
type CloseMCPRequest struct {
	RunID string `json:"run_id"`
}
