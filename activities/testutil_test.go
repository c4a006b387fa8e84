package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// testRun is the run id the tool tests act for.
const testRun = "run-1"

// env is a worker's activities over real local sandboxes: per-run workspaces under root,
// the run's workspace at ws, and a directory store.
type env struct {
	a     *activities.Activities
	sbs   *activities.Sandboxes
	store *artifacts.Bucket
	dir   string // the store's directory
	root  string // the Sandboxes root: the parent of every per-run workspace
	ws    string // testRun's workspace (created by the first call that needs it)
}

// newEnv returns activities built from d, with Sandboxes and Store filled in when unset.
func newEnv(t *testing.T, d activities.Deps) *env {
	t.Helper()
	root := t.TempDir()
	sbs, err := activities.NewSandboxes(root)
	if err != nil {
		t.Fatalf("NewSandboxes(%s): %v", root, err)
	}
	dir := t.TempDir()
	store, err := artifacts.OpenWith(context.Background(), "file://"+dir, artifacts.Options{CacheBytes: artifacts.DefaultCacheBytes})
	if err != nil {
		t.Fatalf("open the artifact store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if d.Sandboxes == nil {
		d.Sandboxes = sbs
	}
	if d.Store == nil {
		d.Store = store
	}
	e := &env{a: activities.New(d), sbs: d.Sandboxes, store: store, dir: dir, root: root, ws: filepath.Join(root, testRun)}
	t.Cleanup(func() { _ = e.sbs.Release(context.Background(), testRun, api.SandboxSpec{}) })
	// Open the run's sandbox now, so its workspace exists for fixtures.
	if _, err := e.sbs.Get(testRun, api.SandboxSpec{}); err != nil {
		t.Fatalf("open the sandbox of %s: %v", testRun, err)
	}
	return e
}

// otherWorker returns the activities of a second worker of the same deployment: its own
// handle on the same store (nothing cached), the same sandboxes.
func (e *env) otherWorker(t *testing.T, d activities.Deps) *activities.Activities {
	t.Helper()
	st, err := artifacts.Open("file://" + e.dir)
	if err != nil {
		t.Fatalf("open the artifact store again: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	d.Store, d.Sandboxes = st, e.sbs
	return activities.New(d)
}

// argsJSON marshals a tool's arguments; a string is taken as raw JSON text.
func argsJSON(t *testing.T, args any) json.RawMessage {
	t.Helper()
	if s, ok := args.(string); ok {
		return json.RawMessage(s)
	}
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("marshal %v: %v", args, err)
	}
	return b
}

// tool runs one tool for testRun in its per-run local sandbox; a Go error fails the test.
func (e *env) tool(t *testing.T, name string, args any) api.RunToolResult {
	t.Helper()
	return e.toolReq(t, api.RunToolRequest{Tool: name, Args: argsJSON(t, args)})
}

// toolReq runs req (RunID defaults to testRun); a Go error fails the test.
func (e *env) toolReq(t *testing.T, req api.RunToolRequest) api.RunToolResult {
	t.Helper()
	if req.RunID == "" {
		req.RunID = testRun
	}
	res, err := e.a.Tools.RunTool(context.Background(), req)
	if err != nil {
		t.Fatalf("RunTool(%s %s): unexpected Go error %v (a tool failure must be a result)", req.Tool, req.Args, err)
	}
	return res
}

// write puts a file into the run's workspace (or anywhere, for an absolute path).
func (e *env) write(t *testing.T, p, content string) string {
	t.Helper()
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.ws, p)
	}
	writeFile(t, p, content)
	return p
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileContent returns the file's content, or "<missing>" when it does not exist.
func fileContent(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantErrorResult fails unless res is an error result whose content mentions every part.
func wantErrorResult(t *testing.T, res api.RunToolResult, parts ...string) {
	t.Helper()
	if !res.IsError {
		t.Errorf("IsError = false, want an error result; content:\n%s", clip(res.Content))
	}
	for _, p := range parts {
		if !strings.Contains(res.Content, p) {
			t.Errorf("content = %q, want it to mention %q", clip(res.Content), p)
		}
	}
}

// wantOK fails unless res is a success result.
func wantOK(t *testing.T, res api.RunToolResult) {
	t.Helper()
	if res.IsError {
		t.Fatalf("IsError = true, want success; content:\n%s", clip(res.Content))
	}
}

// wantAppError fails unless err is a Temporal application error with the given
// retryability (and type, when typ is not empty), and returns it.
func wantAppError(t *testing.T, err error, nonRetryable bool, typ string) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("err = %v (%T), want a *temporal.ApplicationError", err, err)
	}
	if appErr.NonRetryable() != nonRetryable {
		t.Errorf("NonRetryable() = %v, want %v (err %v)", appErr.NonRetryable(), nonRetryable, err)
	}
	if typ != "" && appErr.Type() != typ {
		t.Errorf("Type() = %q, want %q (err %v)", appErr.Type(), typ, err)
	}
	return appErr
}

// clip shortens long content for a failure message.
func clip(s string) string {
	const max = 600
	if len(s) > max {
		return s[:max/2] + "…" + s[len(s)-max/2:]
	}
	return s
}
