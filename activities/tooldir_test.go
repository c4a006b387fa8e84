package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// A call with a Dir (a session prompt's --dir) runs shell there and answers glob relative
// to it; a Dir that is not a directory of the workspace fails the command, naming it.
func TestRunToolInDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	if err := os.MkdirAll(filepath.Join(e.ws, "src", "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"src/api/a.go": "package api\n", "top.go": "package top\n"} {
		if err := os.WriteFile(filepath.Join(e.ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(tool, args, dir string) api.RunToolResult {
		t.Helper()
		res, err := e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, CallID: "c", Tool: tool,
			Args: argsJSON(t, args), Dir: dir})
		if err != nil {
			t.Fatalf("%s %s in %q: %v", tool, args, dir, err)
		}
		return res
	}
	if res := run(agents.ToolShell, `{"command":"pwd; ls"}`, "src/api"); res.IsError ||
		!strings.Contains(res.Content, filepath.Join("src", "api")) || !strings.Contains(res.Content, "a.go") {
		t.Errorf("shell in src/api printed %q, want that directory and its a.go", res.Content)
	}
	if res := run(agents.ToolShell, `{"command":"ls"}`, ""); !strings.Contains(res.Content, "top.go") {
		t.Errorf("shell without a dir printed %q, want the workspace", res.Content)
	}
	// The workflow joined the pattern with the dir; the answer is relative to it.
	if res := run(agents.ToolGlob, `{"pattern":"src/api/*.go"}`, "src/api"); strings.TrimSpace(res.Content) != "a.go" {
		t.Errorf("glob in src/api answered %q, want a.go", res.Content)
	}
	if res := run(agents.ToolShell, `{"command":"echo never"}`, "nope"); !strings.Contains(res.Content, "working directory nope is not a directory of the workspace") ||
		strings.Contains(res.Content, "never") {
		t.Errorf("shell in a missing dir = %+v, want a failure naming it and the command not run", res)
	}
}
