package agents

import (
	"embed"
	"encoding/json"
	"strings"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// Built-in tool names. They are stable: models and approval records refer to them.
const (
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolGlob      = "glob"
	ToolShell     = "shell"
	ToolFetch     = "fetch"
	ToolWebSearch = "web_search"
	// ToolUpdatePlan records the agent's plan (see plan.go); offered with `plan: true`.
	ToolUpdatePlan = "update_plan"
)

// Tool is a built-in tool's contract.
type Tool struct {
	Name       string
	Capability permissions.Capability
	// Description is what the model reads (tools/<name>.md).
	Description string
	// Parameters is the JSON schema of the arguments.
	Parameters json.RawMessage
}

// Def is the tool as offered to the model.
func (t Tool) Def() api.ToolDef {
	return api.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
}

//go:embed tools/*.md
var descriptions embed.FS

func describe(name string) string {
	b, err := descriptions.ReadFile("tools/" + name + ".md")
	if err != nil {
		panic("agents: missing description tools/" + name + ".md") // caught by tests
	}
	return strings.TrimSpace(string(b))
}

// Builtins lists every built-in tool in a stable order.
var Builtins = []Tool{
	{ToolReadFile, permissions.CapRead, describe(ToolReadFile), json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string","description":"workspace-relative path"}},"required":["path"],"additionalProperties":false}`)},
	{ToolWriteFile, permissions.CapWrite, describe(ToolWriteFile), json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string","description":"workspace-relative path"},"content":{"type":"string","description":"the whole new content of the file"}},"required":["path","content"],"additionalProperties":false}`)},
	{ToolGlob, permissions.CapGlob, describe(ToolGlob), json.RawMessage(
		`{"type":"object","properties":{"pattern":{"type":"string","description":"glob pattern, e.g. **/*.go"}},"required":["pattern"],"additionalProperties":false}`)},
	{ToolShell, permissions.CapShell, describe(ToolShell), json.RawMessage(
		`{"type":"object","properties":{"command":{"type":"string","description":"a POSIX sh command line"},"timeout_seconds":{"type":"integer","minimum":1,"maximum":600,"description":"kill the command after this long (default 60)"}},"required":["command"],"additionalProperties":false}`)},
	{ToolFetch, permissions.CapFetch, describe(ToolFetch), json.RawMessage(
		`{"type":"object","properties":{"url":{"type":"string","description":"an http or https URL on an allowed host"}},"required":["url"],"additionalProperties":false}`)},
	{ToolWebSearch, permissions.CapSearch, describe(ToolWebSearch), json.RawMessage(
		`{"type":"object","properties":{"query":{"type":"string","description":"what to search the web for"}},"required":["query"],"additionalProperties":false}`)},
	updatePlanTool,
}

// Lookup returns the built-in tool called name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Builtins {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Offered lists the tools the agent may be offered: a tool its permissions can never
// allow is not offered (the model would only waste turns on refusals), shell is not
// offered in a sandbox without one, and fetch only with a fetch allow-list.
func Offered(s Spec) []Tool {
	var out []Tool
	for _, t := range Builtins {
		if permissions.NeverAllows(s.Permissions, t.Capability) {
			continue
		}
		if t.Name == ToolShell && s.Sandbox.Type == api.SandboxVirtual {
			continue
		}
		if t.Name == ToolFetch && len(s.FetchAllow) == 0 {
			continue
		}
		if t.Name == ToolWebSearch && !s.WebSearch {
			continue
		}
		if t.Name == ToolUpdatePlan && !s.Plan {
			continue
		}
		out = append(out, t)
	}
	return out
}

// Detail is what a permission rule and an approval record see of a call: the path, the
// pattern, the command, the URL, a delegate's prompt or an A2A tool's message.
func Detail(tool string, args map[string]any) string {
	key := map[string]string{ToolReadFile: "path", ToolWriteFile: "path", ToolGlob: "pattern", ToolShell: "command", ToolFetch: "url", ToolWebSearch: "query"}[tool]
	if strings.HasPrefix(tool, DelegatePrefix) {
		key = "prompt" // a delegate tool (DelegateTool)
	}
	if strings.HasPrefix(tool, A2APrefix) {
		key = "message" // an A2A tool (A2ATool)
	}
	s, _ := args[key].(string)
	return s
}
