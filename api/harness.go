package api

import (
	"encoding/json"
	"time"
)

// ActivityHarnessStep runs one step of an agent's pluggable loop (agents.Spec.Loop) in
// place of a model call: the same CompleteChatRequest in, the same CompleteChatResult out.
// It runs on the run's sandbox host, since a harness is a process in the run's sandbox.
const ActivityHarnessStep = "HarnessStep"

// Loop types (LoopSpec.Type).
const (
	// LoopHarness runs LoopSpec.Command, an external agent program, in the run's sandbox,
	// speaking the JSON-lines protocol of docs/harness-protocol.md.
	LoopHarness = "harness"
	// LoopGo runs the Go loop registered on the worker under LoopSpec.Name
	// (platform.WithLoop).
	LoopGo = "go"
)

// HarnessProtocol is the version of the harness protocol a start message names.
const HarnessProtocol = 1

// Bounds of a harness step.
const (
	// DefaultHarnessTimeout bounds one step when the loop sets no timeout.
	DefaultHarnessTimeout = 5 * time.Minute
	// MaxHarnessTimeout bounds LoopSpec.Timeout.
	MaxHarnessTimeout = time.Hour
	// MaxHarnessOutput caps what a harness may print on stdout in one step: past it the
	// process is killed and the step fails naming the cap.
	MaxHarnessOutput = 1 << 20
	// MaxHarnessLine quotes at most this much of a line the harness got wrong.
	MaxHarnessLine = 200
)

// LoopSpec is an agent's pluggable loop (`loop:` in the config): a step of it takes the
// place of each model call, so the permission gate, approvals, budgets, turn limit, events
// and durable tool calls apply to it unchanged.
type LoopSpec struct {
	// Type is LoopHarness or LoopGo.
	Type string `json:"type" mapstructure:"type" yaml:"type"`
	// Command is the harness's argv (type harness). A first word starting with ./ or ../
	// is resolved against the config file's folder when the config loads.
	Command []string `json:"command,omitempty" mapstructure:"command" yaml:"command"`
	// Name is the registered Go loop (type go).
	Name string `json:"name,omitempty" mapstructure:"name" yaml:"name"`
	// Timeout bounds one step (default DefaultHarnessTimeout, at most MaxHarnessTimeout):
	// a harness still running then is killed and the step fails.
	Timeout Duration `json:"timeout,omitempty" mapstructure:"timeout" yaml:"timeout"`
}

// StepTimeout is Timeout or the default.
func (l LoopSpec) StepTimeout() time.Duration {
	if l.Timeout > 0 {
		return time.Duration(l.Timeout)
	}
	return DefaultHarnessTimeout
}

// Describe names the loop in errors: `harness ./bin/h` or `go loop planner`.
func (l LoopSpec) Describe() string {
	if l.Type == LoopGo {
		return "go loop " + l.Name
	}
	if len(l.Command) > 0 {
		return "harness " + l.Command[0]
	}
	return "harness"
}

// LoopRequest is what a loop gets for one step: the protocol's start message, the
// first line a harness reads on stdin. A step is stateless: every one carries the whole
// transcript, so a loop continues from it as a chat API would.
type LoopRequest struct {
	// Type is "start".
	Type string `json:"type"`
	// Protocol is HarnessProtocol.
	Protocol int    `json:"protocol"`
	RunID    string `json:"run_id"`
	Agent    string `json:"agent"`
	// Step tags this step as the workflow does ("3", "2.4"): the tool uses it asks for
	// get the ids <Step>.<n>.
	Step string `json:"step"`
	// Instructions are the agent's system prompt: its instructions, the sandbox's own
	// and its skills.
	Instructions string `json:"instructions,omitempty"`
	// Prompt is the first user message of the transcript (also in Transcript).
	Prompt string `json:"prompt,omitempty"`
	// Tools are the tools the platform offers; a tool use naming another one comes back
	// as an error result.
	Tools []LoopTool `json:"tools"`
	// Transcript is the conversation so far, oldest first.
	Transcript []LoopEntry `json:"transcript"`
}

// LoopTool is a tool as offered to a loop.
type LoopTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Roles of a LoopEntry.
const (
	LoopRoleUser      = "user"
	LoopRoleAssistant = "assistant"
	LoopRoleTool      = "tool"
)

// LoopEntry is one message of a transcript: a user message (Text), the loop's own
// earlier output (Text and ToolUses), or a tool result (ToolUseID, Text, IsError).
type LoopEntry struct {
	Role      string        `json:"role"`
	Text      string        `json:"text,omitempty"`
	ToolUses  []LoopToolUse `json:"tool_uses,omitempty"`
	ToolUseID string        `json:"tool_use_id,omitempty"`
	IsError   bool          `json:"is_error,omitempty"`
}

// LoopToolUse is a tool call a loop asks for. Arguments is a JSON object.
type LoopToolUse struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// PlanStep is one step of a plan a loop reports, as the update_plan tool takes it.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"`
}

// LoopStep is what one step of a loop answers: its text, thinking, plan and usage, and
// either the tool uses it asks for or Final (the turn's answer is Text).
type LoopStep struct {
	Text     string        `json:"text,omitempty"`
	Thinking string        `json:"thinking,omitempty"`
	Plan     []PlanStep    `json:"plan,omitempty"`
	Usage    Usage         `json:"usage"`
	ToolUses []LoopToolUse `json:"tool_uses,omitempty"`
	Final    bool          `json:"final,omitempty"`
}
