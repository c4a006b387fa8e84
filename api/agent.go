package api

import "encoding/json"

// Agent workflow and activity names.
const (
	// WorkflowAgentRun is the generic workflow that runs one agent on one prompt.
	WorkflowAgentRun = "AgentRun"

	ActivityResolveAgent     = "ResolveAgent"
	ActivityCompleteChat     = "CompleteChat"
	ActivityRunTool          = "RunTool"
	ActivityCollectOutputs   = "CollectOutputs"
	ActivityRestoreArtifacts = "RestoreArtifacts"
)

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ChatMessage is one message of an agent's thread, kept in workflow state.
type ChatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a call the model asked for. Arguments is the model's JSON text, verbatim.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolDef is a tool as offered to the model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// CompleteChatRequest asks the model for the next message.
type CompleteChatRequest struct {
	// Model overrides the worker's configured model when set.
	Model string `json:"model,omitempty"`
	// System is the agent's instructions. The worker builds the system message for every
	// request from it, the sandbox's own instructions and Skills, in that order, so the
	// stored thread never holds (or duplicates) it.
	System string `json:"system,omitempty"`
	// Skills are the recorded texts of the agent's skills (LoadedSkill.Prompt), appended
	// to the system message after the sandbox's instructions.
	Skills  []string    `json:"skills,omitempty"`
	RunID   string      `json:"run_id"`
	Sandbox SandboxSpec `json:"sandbox"`
	// Messages is the thread without the system message.
	Messages []ChatMessage `json:"messages"`
	// StreamTo, when set, asks for a streamed completion whose text is signalled
	// (SignalStream) to that workflow as it arrives, tagged with StreamCall.
	StreamTo   string    `json:"stream_to,omitempty"`
	StreamCall string    `json:"stream_call,omitempty"`
	Tools      []ToolDef `json:"tools,omitempty"`
}

// Usage is the token accounting of one model call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// CompleteChatResult is the model's reply.
type CompleteChatResult struct {
	Message      ChatMessage `json:"message"`
	Model        string      `json:"model"`
	Usage        Usage       `json:"usage"`
	FinishReason string      `json:"finish_reason,omitempty"`
}

// FileStamp identifies a version of a file, for the read-before-write guard.
type FileStamp struct {
	Size    int64 `json:"size"`
	ModUnix int64 `json:"mod_unix_nano"`
}

// RunToolRequest asks the RunTool activity to run one built-in tool in the run's sandbox.
type RunToolRequest struct {
	RunID   string          `json:"run_id"`
	Sandbox SandboxSpec     `json:"sandbox"`
	CallID  string          `json:"call_id"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	// FetchAllow is the agent's fetch allow-list (hosts; subdomains included).
	FetchAllow []string `json:"fetch_allow,omitempty"`
	// Seen is the stamp of the file as the agent last read it (write_file only); nil
	// when it never read it.
	Seen *FileStamp `json:"seen,omitempty"`
}

// RunToolResult is what the model sees (Content), whether it is an error result, and for
// file tools the stamp of the file afterwards.
type RunToolResult struct {
	Content string     `json:"content"`
	IsError bool       `json:"is_error,omitempty"`
	Path    string     `json:"path,omitempty"`
	Stamp   *FileStamp `json:"stamp,omitempty"`
}

// CollectOutputsRequest asks which sandbox files match an agent's `produces` patterns.
type CollectOutputsRequest struct {
	RunID    string      `json:"run_id"`
	Sandbox  SandboxSpec `json:"sandbox"`
	Patterns []string    `json:"patterns"`
}

// RestoreArtifactsRequest writes recorded artifacts back into the run's sandbox.
type RestoreArtifactsRequest struct {
	RunID   string      `json:"run_id"`
	Sandbox SandboxSpec `json:"sandbox"`
	// Names of artifacts to restore; FromRun is the run that recorded them.
	Names   []string `json:"names"`
	FromRun string   `json:"from_run"`
	// Into is the workspace-relative directory (default ".").
	Into string `json:"into,omitempty"`
}

// AgentRunInput is the payload of the AgentRun workflow.
type AgentRunInput struct {
	Agent    string `json:"agent"`
	Prompt   string `json:"prompt"`
	MaxTurns int    `json:"max_turns,omitempty"`
}

// AgentResult is what an agent run returns.
type AgentResult struct {
	Agent   string `json:"agent"`
	Content string `json:"content"`
	Turns   int    `json:"turns"`
	Usage   Usage  `json:"usage"`
}
