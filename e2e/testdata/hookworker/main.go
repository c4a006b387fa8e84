// Command hookworker is a custom worker for the e2e tests of tool hooks: the whole
// platform plus two hooks. guard refuses a write_file under secrets/ (by its arguments);
// stamp decorates every read_file result.
package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

func main() {
	platform.Main(dev.Server(),
		platform.ToolHook("guard", platform.Hook{Before: guard}),
		platform.ToolHook("stamp", platform.Hook{After: stamp}),
	)
}

func guard(_ context.Context, call platform.HookCall) (platform.HookDecision, error) {
	if call.Tool != agents.ToolWriteFile {
		return platform.HookDecision{}, nil
	}
	var args struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return platform.HookDecision{}, err
	}
	if strings.HasPrefix(strings.TrimPrefix(args.Path, "./"), "secrets/") {
		return platform.HookDecision{Deny: "files under secrets/ are written by people, not agents"}, nil
	}
	return platform.HookDecision{}, nil
}

func stamp(_ context.Context, call platform.HookCall, out platform.HookOutput) (platform.HookOutput, error) {
	if call.Tool == agents.ToolReadFile && !out.IsError {
		out.Content += "\n[read through the stamp hook]"
	}
	return out, nil
}
