// Command hookworker is a custom worker for the e2e tests of tool hooks
// (TestToolHooksThroughCustomWorker): the whole platform plus two hooks. guard refuses a
// write_file under secrets/ (by its arguments); stamp decorates every read_file result.
// docs/agents.md#tool-hooks shows it.
package main

import (
	"context"
	"encoding/json"
	"path"
	"strings"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

func main() {
	platform.Main(dev.Server(),
		platform.ToolHook("guard", platform.Hook{Before: guard}), // refuses a write_file under secrets/
		platform.ToolHook("stamp", platform.Hook{After: stamp}),  // decorates every read_file result
	)
}

func guard(_ context.Context, call platform.HookCall) (platform.HookDecision, error) {
	// call.Tool, call.Server (MCP tools), call.Args (a JSON object), call.RunID, call.CallID
	if call.Tool == agents.ToolWriteFile && strings.HasPrefix(pathOf(call.Args), "secrets/") {
		return platform.HookDecision{Deny: "files under secrets/ are written by people, not agents"}, nil
	}
	return platform.HookDecision{}, nil // or HookDecision{Args: rewritten} to change the arguments
}

// pathOf is the workspace-relative path a file tool's arguments name ("" when none).
func pathOf(args json.RawMessage) string {
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return ""
	}
	return strings.TrimPrefix(path.Clean(strings.TrimPrefix(a.Path, "/workspace/")), "./")
}

func stamp(_ context.Context, call platform.HookCall, out platform.HookOutput) (platform.HookOutput, error) {
	if call.Tool == agents.ToolReadFile && !out.IsError {
		out.Content += "\n[read through the stamp hook]"
	}
	return out, nil
}
