//go:build unix

package activities_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// within fails the test if op does not return within 5s: on a FIFO, a plain open blocks
// until a writer comes, which for a tool means forever.
func within(t *testing.T, what string, op func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { op(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s on a FIFO still blocked after 5s", what)
	}
}

// A FIFO in the workspace (made by mkfifo, or by the agent's own shell) is refused by
// every file tool with a result the model can read, and by artifact collection with a
// non-retryable error: nothing blocks on it.
func TestFileToolsRefuseFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	e.write(t, "keep.txt", "x")
	if err := syscall.Mkfifo(filepath.Join(e.ws, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	var res api.RunToolResult
	within(t, "read_file", func() { res = e.tool(t, agents.ToolReadFile, map[string]any{"path": "pipe"}) })
	wantErrorResult(t, res, "read_file pipe", "not a regular file", "named pipe")
	within(t, "write_file", func() {
		res = e.tool(t, agents.ToolWriteFile, map[string]any{"path": "pipe", "content": "x"})
	})
	wantErrorResult(t, res, "write_file pipe", "not a regular file")
	res = e.tool(t, agents.ToolGlob, map[string]any{"pattern": "*"})
	if res.Content != "keep.txt" {
		t.Errorf("glob * = %q, want only keep.txt (a FIFO is not a file to list)", res.Content)
	}
	var err error
	within(t, "WriteArtifact", func() {
		_, err = e.a.Host.WriteArtifact(context.Background(), api.WriteArtifactRequest{RunID: testRun, Name: "out", Path: "pipe"})
	})
	wantAppError(t, err, true, api.ErrTypeBadInput)
}
