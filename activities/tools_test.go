package activities_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	e.write(t, "notes/hello.txt", "hello\nworld\n")

	res := e.tool(t, agents.ToolReadFile, map[string]any{"path": "notes/hello.txt"})
	wantOK(t, res)
	if res.Content != "hello\nworld\n" {
		t.Errorf("content = %q, want %q", res.Content, "hello\nworld\n")
	}
	if res.Path != "notes/hello.txt" {
		t.Errorf("path = %q, want %q", res.Path, "notes/hello.txt")
	}
	if res.Stamp == nil || res.Stamp.Size != 12 || res.Stamp.ModUnix == 0 {
		t.Errorf("stamp = %+v, want size 12 and a modification time", res.Stamp)
	}

	t.Run("absolute path inside the workspace", func(t *testing.T) {
		res := e.tool(t, agents.ToolReadFile, map[string]any{"path": filepath.Join(e.ws, "notes/hello.txt")})
		wantOK(t, res)
		if res.Content != "hello\nworld\n" {
			t.Errorf("content = %q, want %q", res.Content, "hello\nworld\n")
		}
	})
	t.Run("missing file is a result, not a Go error", func(t *testing.T) {
		res := e.tool(t, agents.ToolReadFile, map[string]any{"path": "nope.txt"})
		wantErrorResult(t, res, "no such file", "nope.txt")
		if res.Stamp != nil {
			t.Errorf("stamp = %+v for a missing file, want none", res.Stamp)
		}
	})
	t.Run("directory", func(t *testing.T) {
		wantErrorResult(t, e.tool(t, agents.ToolReadFile, map[string]any{"path": "notes"}), "directory")
	})
}

func TestReadFileCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	const cap = activities.ReadCap
	tests := []struct {
		name     string
		content  string
		wantShow string // the part shown before the truncation note
	}{
		{"ascii", strings.Repeat("a", 300_000), strings.Repeat("a", cap)},
		{"2-byte char across the cap", strings.Repeat("a", cap-1) + "é" + strings.Repeat("b", 1000), strings.Repeat("a", cap-1)},
		{"3-byte char across the cap", strings.Repeat("a", cap-2) + "€" + strings.Repeat("b", 1000), strings.Repeat("a", cap-2)},
		{"4-byte char ending at the cap", strings.Repeat("a", cap-4) + "😀" + "tail", strings.Repeat("a", cap-4) + "😀"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fmt.Sprintf("big%d.txt", i)
			e.write(t, p, tt.content)
			res := e.tool(t, agents.ToolReadFile, map[string]any{"path": p})
			wantOK(t, res)
			if !utf8.ValidString(res.Content) {
				t.Errorf("content is not valid UTF-8: a character was split")
			}
			if !strings.HasPrefix(res.Content, tt.wantShow) {
				t.Fatalf("content does not start with the first %d bytes of the file", len(tt.wantShow))
			}
			note := res.Content[len(tt.wantShow):]
			if !strings.HasPrefix(note, "\n[truncated") || !strings.Contains(note, fmt.Sprint(len(tt.content))) {
				t.Errorf("after the %d shown bytes: %q, want a truncation note naming the size %d", len(tt.wantShow), clip(note), len(tt.content))
			}
			if res.Stamp == nil || res.Stamp.Size != int64(len(tt.content)) {
				t.Errorf("stamp = %+v, want the whole file's size %d", res.Stamp, len(tt.content))
			}
		})
	}
	t.Run("exactly the cap is not truncated", func(t *testing.T) {
		e.write(t, "exact.txt", strings.Repeat("x", cap))
		res := e.tool(t, agents.ToolReadFile, map[string]any{"path": "exact.txt"})
		wantOK(t, res)
		if len(res.Content) != cap || strings.Contains(res.Content, "truncated") {
			t.Errorf("len(content) = %d, want %d without a note", len(res.Content), cap)
		}
	})
}

func TestReadFileBinaryAndHuge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	e.write(t, "image.png", "\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\xfd")

	t.Run("binary file is described, not shown", func(t *testing.T) {
		res := e.tool(t, agents.ToolReadFile, map[string]any{"path": "image.png"})
		wantOK(t, res)
		if !strings.Contains(res.Content, "binary") || strings.Contains(res.Content, "\xff") || strings.Contains(res.Content, "PNG") {
			t.Errorf("content = %q, want a note that the file is binary and none of its bytes", res.Content)
		}
	})
	t.Run("file over 16 MiB is refused", func(t *testing.T) {
		p := filepath.Join(e.ws, "huge.log")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(16<<20 + 1); err != nil { // sparse: no 16 MiB written
			t.Fatal(err)
		}
		f.Close()
		res := e.tool(t, agents.ToolReadFile, map[string]any{"path": "huge.log"})
		wantErrorResult(t, res, "too large")
		if len(res.Content) > 1000 {
			t.Errorf("len(content) = %d, want only the refusal", len(res.Content))
		}
	})
}

// escapeFixture lays out a secret file and directory beside the run's workspace and
// links to them from inside it.
func escapeFixture(t *testing.T, e *env) (secret, secretDir string) {
	t.Helper()
	secret = filepath.Join(e.root, "secret.txt")
	writeFile(t, secret, "SECRET")
	secretDir = filepath.Join(e.root, "private")
	writeFile(t, filepath.Join(secretDir, "key"), "SECRET")
	for link, target := range map[string]string{
		"link":         secret,
		"dirlink":      secretDir,
		"relative":     "../secret.txt",
		"dangling-out": filepath.Join(e.root, "not-yet.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(e.ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return secret, secretDir
}

func TestPathEscapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	secret, secretDir := escapeFixture(t, e)
	outsideNew := filepath.Join(t.TempDir(), "created.txt")

	for _, p := range []string{"../secret.txt", "a/../../secret.txt", "/etc/passwd", secret, "link", "relative", "dirlink/key"} {
		t.Run("read "+p, func(t *testing.T) {
			res := e.tool(t, agents.ToolReadFile, map[string]any{"path": p})
			wantErrorResult(t, res, "outside the workspace")
			if strings.Contains(res.Content, "SECRET") || strings.Contains(res.Content, "root:") {
				t.Errorf("content = %q, leaks the file outside", res.Content)
			}
		})
	}
	for _, p := range []string{"../secret.txt", secret, "link", "relative", "dirlink/key", "dangling-out", "../new.txt", outsideNew} {
		t.Run("write "+p, func(t *testing.T) {
			res := e.tool(t, agents.ToolWriteFile, map[string]any{"path": p, "content": "PWNED"})
			wantErrorResult(t, res, "outside the workspace")
		})
	}
	for p, want := range map[string]string{
		secret:                               "SECRET",
		filepath.Join(secretDir, "key"):      "SECRET",
		filepath.Join(e.root, "not-yet.txt"): "<missing>",
		filepath.Join(e.root, "new.txt"):     "<missing>",
		outsideNew:                           "<missing>",
	} {
		if got := fileContent(t, p); got != want {
			t.Errorf("%s = %q after the refused writes, want %q", p, got, want)
		}
	}
	t.Run("glob ../*", func(t *testing.T) {
		res := e.tool(t, agents.ToolGlob, map[string]any{"pattern": "../*"})
		wantErrorResult(t, res, "outside the workspace")
	})
	t.Run("glob does not list links out", func(t *testing.T) {
		res := e.tool(t, agents.ToolGlob, map[string]any{"pattern": "**/*"})
		for _, name := range []string{"link", "relative", "dirlink", "key"} {
			if slices.Contains(strings.Split(res.Content, "\n"), name) || strings.Contains(res.Content, "dirlink/") {
				t.Errorf("glob **/* = %q, lists %s, which leads outside", res.Content, name)
			}
		}
	})
}

func TestWriteFileReadBeforeWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	read := func(t *testing.T, p string) *api.FileStamp {
		t.Helper()
		res := e.tool(t, agents.ToolReadFile, map[string]any{"path": p})
		wantOK(t, res)
		if res.Stamp == nil {
			t.Fatalf("read_file %s returned no stamp", p)
		}
		return res.Stamp
	}
	write := func(t *testing.T, p, content string, seen *api.FileStamp) api.RunToolResult {
		t.Helper()
		return e.toolReq(t, api.RunToolRequest{Tool: agents.ToolWriteFile, Seen: seen,
			Args: argsJSON(t, map[string]any{"path": p, "content": content})})
	}

	t.Run("new file", func(t *testing.T) {
		res := write(t, "docs/new.md", "# New\n", nil)
		wantOK(t, res)
		if got := fileContent(t, filepath.Join(e.ws, "docs/new.md")); got != "# New\n" {
			t.Errorf("file = %q, want %q", got, "# New\n")
		}
		if !strings.Contains(res.Content, "wrote 6 bytes") || res.Path != "docs/new.md" {
			t.Errorf("result = %+v, want \"wrote 6 bytes\" and path docs/new.md", res)
		}
		fi, err := os.Stat(filepath.Join(e.ws, "docs/new.md"))
		if err != nil {
			t.Fatal(err)
		}
		want := api.FileStamp{Size: 6, ModUnix: fi.ModTime().UnixNano()}
		if res.Stamp == nil || *res.Stamp != want {
			t.Errorf("stamp = %+v, want %+v (the file as written)", res.Stamp, want)
		}
	})
	t.Run("overwrite without reading", func(t *testing.T) {
		p := e.write(t, "unread.txt", "original")
		res := write(t, "unread.txt", "clobbered", nil)
		wantErrorResult(t, res, "read")
		if got := fileContent(t, p); got != "original" {
			t.Errorf("file = %q, want it untouched (%q)", got, "original")
		}
	})
	t.Run("overwrite after reading", func(t *testing.T) {
		p := e.write(t, "seen.txt", "original")
		res := write(t, "seen.txt", "updated", read(t, "seen.txt"))
		wantOK(t, res)
		if got := fileContent(t, p); got != "updated" {
			t.Errorf("file = %q, want %q", got, "updated")
		}
	})
	t.Run("changed since read: other size", func(t *testing.T) {
		p := e.write(t, "moving.txt", "original")
		stamp := read(t, "moving.txt")
		writeFile(t, p, "changed by someone else")
		wantErrorResult(t, write(t, "moving.txt", "mine", stamp), "stale")
		if got := fileContent(t, p); got != "changed by someone else" {
			t.Errorf("file = %q, want the external change kept", got)
		}
	})
	t.Run("changed since read: same size, new mtime", func(t *testing.T) {
		p := e.write(t, "same.txt", "aaaa")
		stamp := read(t, "same.txt")
		writeFile(t, p, "bbbb")
		later := time.Unix(0, stamp.ModUnix).Add(time.Second)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
		wantErrorResult(t, write(t, "same.txt", "mine", stamp), "stale")
		if got := fileContent(t, p); got != "bbbb" {
			t.Errorf("file = %q, want the external change kept", got)
		}
	})
	t.Run("second write with the first write's stamp", func(t *testing.T) {
		p := e.write(t, "twice.txt", "v0")
		first := write(t, "twice.txt", "v1 longer", read(t, "twice.txt"))
		wantOK(t, first)
		second := write(t, "twice.txt", "v2", first.Stamp)
		wantOK(t, second)
		if got := fileContent(t, p); got != "v2" {
			t.Errorf("file = %q, want %q", got, "v2")
		}
		// The first stamp is now stale.
		wantErrorResult(t, write(t, "twice.txt", "v3", first.Stamp), "stale")
	})
	t.Run("deleted after read: written as new", func(t *testing.T) {
		p := e.write(t, "gone.txt", "x")
		stamp := read(t, "gone.txt")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		wantOK(t, write(t, "gone.txt", "back", stamp))
		if got := fileContent(t, p); got != "back" {
			t.Errorf("file = %q, want %q", got, "back")
		}
	})
	t.Run("over a directory", func(t *testing.T) {
		if err := os.MkdirAll(filepath.Join(e.ws, "adir"), 0o755); err != nil {
			t.Fatal(err)
		}
		wantErrorResult(t, write(t, "adir", "x", nil), "directory")
	})
}

func TestGlob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	for _, p := range []string{"a.go", "b.go", "sub/c.go", "sub/deep/d.go", "readme.md"} {
		e.write(t, p, "x")
	}
	tests := []struct {
		pattern string
		want    string
	}{
		{"*.go", "a.go\nb.go"},
		{"**/*.go", "a.go\nb.go\nsub/c.go\nsub/deep/d.go"},
		{"sub/*", "sub/c.go"},
		{"*.{go,md}", "a.go\nb.go\nreadme.md"},
		{"*.rs", "no files match *.rs"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			res := e.tool(t, agents.ToolGlob, map[string]any{"pattern": tt.pattern})
			wantOK(t, res)
			if res.Content != tt.want {
				t.Errorf("glob %s = %q, want %q", tt.pattern, res.Content, tt.want)
			}
		})
	}
	t.Run("more than 1000 matches", func(t *testing.T) {
		for i := range 1003 {
			e.write(t, fmt.Sprintf("many/f%04d.txt", i), "")
		}
		res := e.tool(t, agents.ToolGlob, map[string]any{"pattern": "many/*.txt"})
		wantOK(t, res)
		lines := strings.Split(res.Content, "\n")
		if len(lines) != 1001 || lines[999] != "many/f0999.txt" || !strings.Contains(lines[1000], "3 more") {
			t.Errorf("glob gave %d lines ending %q, want 1000 paths and a note of 3 more", len(lines), lines[len(lines)-1])
		}
	})
	t.Run("bad pattern", func(t *testing.T) {
		wantErrorResult(t, e.tool(t, agents.ToolGlob, map[string]any{"pattern": "[a-"}), "glob")
	})
}

// shellSection returns the text of a shell result's section ("stdout" or "stderr").
func shellSection(content, name string) string {
	_, after, ok := strings.Cut(content, "--- "+name+" ---\n")
	if !ok {
		return ""
	}
	if i := strings.Index(after, "\n--- "); i >= 0 {
		after = after[:i]
	}
	return after
}

func TestShell(t *testing.T) {
	e := newEnv(t, activities.Deps{})
	e.write(t, "data.txt", "from the workspace")
	tests := []struct {
		name       string
		cmd        string
		wantErr    bool
		wantFirst  string
		wantStdout string
		wantStderr string
	}{
		{"success", "echo hi", false, "exit code 0", "hi", ""},
		{"stdout and stderr, non-zero exit", "echo out; echo err >&2; exit 3", true, "exit code 3", "out", "err"},
		{"only stderr", "echo oops >&2; false", true, "exit code 1", "", "oops"},
		{"runs in the workspace", "cat data.txt", false, "exit code 0", "from the workspace", ""},
		{"cleared environment", "echo \"[$NEXO_TEST_SECRET]\"", false, "exit code 0", "[]", ""},
		{"missing command", "definitely-not-a-command-xyz", true, "exit code 127", "", "not found"},
	}
	t.Setenv("NEXO_TEST_SECRET", "leaked")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.tool(t, agents.ToolShell, map[string]any{"command": tt.cmd})
			if res.IsError != tt.wantErr {
				t.Errorf("IsError = %v, want %v; content:\n%s", res.IsError, tt.wantErr, res.Content)
			}
			if first, _, _ := strings.Cut(res.Content, "\n"); first != tt.wantFirst {
				t.Errorf("first line = %q, want %q", first, tt.wantFirst)
			}
			if got := shellSection(res.Content, "stdout"); !strings.Contains(got, tt.wantStdout) || (tt.wantStdout == "") != (got == "") {
				t.Errorf("stdout section = %q, want %q", got, tt.wantStdout)
			}
			if got := shellSection(res.Content, "stderr"); !strings.Contains(got, tt.wantStderr) || (tt.wantStderr == "") != (got == "") {
				t.Errorf("stderr section = %q, want %q", got, tt.wantStderr)
			}
		})
	}
}

func TestShellTruncation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	t.Run("1000 coloured lines", func(t *testing.T) {
		cmd := `i=1; while [ $i -le 1000 ]; do printf '\033[1;31mline %d\033[0m of the build log\n' $i; i=$((i+1)); done; exit 2`
		res := e.tool(t, agents.ToolShell, map[string]any{"command": cmd})
		wantErrorResult(t, res, "exit code 2", "truncated")
		out := shellSection(res.Content, "stdout")
		if strings.ContainsRune(res.Content, 0x1b) {
			t.Errorf("content still holds ANSI escapes: %q", clip(res.Content))
		}
		if len(res.Content) >= 20_000 {
			t.Errorf("len(content) = %d, want < 20000", len(res.Content))
		}
		if !strings.Contains(out, "line 1000 of the build log") || strings.Contains(out, "line 1 of") || strings.Contains(out, "line 700 of") {
			t.Errorf("stdout = %q, want the last lines kept and the first dropped", clip(out))
		}
		if n := strings.Count(out, "\n") + 1; n > activities.ShellLines+1 {
			t.Errorf("stdout has %d lines, want at most %d plus the marker", n, activities.ShellLines)
		}
	})
	t.Run("short output unchanged", func(t *testing.T) {
		res := e.tool(t, agents.ToolShell, map[string]any{"command": `printf 'a\nb\nc\n'`})
		wantOK(t, res)
		if got := shellSection(res.Content, "stdout"); got != "a\nb\nc" {
			t.Errorf("stdout = %q, want %q", got, "a\nb\nc")
		}
	})
}

func TestShellTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cap     time.Duration
		args    map[string]any
		wantMsg string
	}{
		{"timeout_seconds", 0, map[string]any{"command": "sleep 5", "timeout_seconds": 1}, "killed after 1s"},
		{"worker cap over timeout_seconds", time.Second, map[string]any{"command": "sleep 5", "timeout_seconds": 60}, "killed after 1s"},
		{"worker cap over the default", time.Second, map[string]any{"command": "sleep 5"}, "killed after 1s"},
		{"worker cap over a huge timeout_seconds", time.Second, map[string]any{"command": "sleep 5", "timeout_seconds": 1e10}, "killed after 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, activities.Deps{ShellTimeout: tt.cap})
			start := time.Now()
			res := e.tool(t, agents.ToolShell, tt.args)
			wantErrorResult(t, res, tt.wantMsg)
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("the call took %v, want the command killed after about 1s", d)
			}
		})
	}
	t.Run("background job killed with the command", func(t *testing.T) {
		e := newEnv(t, activities.Deps{})
		start := time.Now()
		res := e.tool(t, agents.ToolShell, map[string]any{"command": "sleep 30 & echo started", "timeout_seconds": 5})
		wantOK(t, res)
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("the call took %v, want it to return once sh exits", d)
		}
	})
}

// A command cut short because the activity itself ended (cancelled, or its own timeout)
// is an activity error, not a "timed out" result the model would see.
func TestShellActivityCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := e.a.Tools.RunTool(ctx, api.RunToolRequest{RunID: testRun, Tool: agents.ToolShell,
		Args: argsJSON(t, map[string]any{"command": "sleep 5", "timeout_seconds": 30})})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RunTool = %+v, %v; want an error wrapping the context's", res, err)
	}
}

func TestShellOnVirtualSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	virtual := api.SandboxSpec{Type: api.SandboxVirtual}
	res := e.toolReq(t, api.RunToolRequest{Sandbox: virtual, Tool: agents.ToolShell, Args: argsJSON(t, map[string]any{"command": "ls"})})
	wantErrorResult(t, res, "no shell")

	// The file tools work there.
	wantOK(t, e.toolReq(t, api.RunToolRequest{Sandbox: virtual, Tool: agents.ToolWriteFile,
		Args: argsJSON(t, map[string]any{"path": "/workspace/v.txt", "content": "in memory"})}))
	res = e.toolReq(t, api.RunToolRequest{Sandbox: virtual, Tool: agents.ToolReadFile, Args: argsJSON(t, map[string]any{"path": "v.txt"})})
	wantOK(t, res)
	if res.Content != "in memory" {
		t.Errorf("read_file on the virtual sandbox = %q, want %q", res.Content, "in memory")
	}
	if got := fileContent(t, filepath.Join(e.ws, "v.txt")); got != "<missing>" {
		t.Errorf("the virtual write reached the local workspace: %q", got)
	}
}

func TestRunToolBadArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	tests := []struct {
		tool, args, want string
	}{
		{agents.ToolReadFile, `{}`, `"path"`},
		{agents.ToolReadFile, `{"path": 3}`, `"path"`},
		{agents.ToolReadFile, `{"path": ""}`, `"path"`},
		{agents.ToolReadFile, `null`, `"path"`},
		{agents.ToolWriteFile, `{"path": "a.txt"}`, `"content"`},
		{agents.ToolWriteFile, `{"path": "a.txt", "content": 5}`, `"content"`},
		{agents.ToolWriteFile, `{"content": "x"}`, `"path"`},
		{agents.ToolGlob, `{"pattern": true}`, `"pattern"`},
		{agents.ToolShell, `{"command": "   "}`, `"command"`},
		{agents.ToolShell, `{"command": ["ls", "-l"]}`, `"command"`},
		{agents.ToolFetch, `{"url": null}`, `"url"`},
		{agents.ToolReadFile, `["a.txt"]`, "not a JSON object"},
		{agents.ToolReadFile, `"a.txt"`, "not a JSON object"},
		{agents.ToolShell, `ls -l`, "not a JSON object"},
		{agents.ToolShell, ``, "not a JSON object"},
		{agents.ToolWriteFile, `{"path": "a.txt", "content": "x"`, "not a JSON object"},
		{"rm_rf", `{}`, `unknown tool "rm_rf"`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			wantErrorResult(t, e.tool(t, tt.tool, tt.args), tt.want)
		})
	}
	if got := fileContent(t, filepath.Join(e.ws, "a.txt")); got != "<missing>" {
		t.Errorf("a malformed write_file wrote a.txt: %q", got)
	}
}

func TestRunToolSandboxErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	t.Run("unavailable sandbox type is non-retryable", func(t *testing.T) {
		_, err := e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, Sandbox: api.SandboxSpec{Type: "firecracker"},
			Tool: agents.ToolReadFile, Args: argsJSON(t, map[string]any{"path": "x"})})
		appErr := wantAppError(t, err, true, api.ErrTypeBadInput)
		if !strings.Contains(appErr.Error(), "firecracker") {
			t.Errorf("err = %v, want it to name the sandbox type", err)
		}
	})
	t.Run("closed sandbox is a retryable Go error", func(t *testing.T) {
		sb, err := e.sbs.Get("run-closed", api.SandboxSpec{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err = e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: "run-closed", Tool: agents.ToolReadFile,
			Args: argsJSON(t, map[string]any{"path": "x"})})
		var appErr *temporal.ApplicationError
		if err == nil || (errors.As(err, &appErr) && appErr.NonRetryable()) {
			t.Errorf("err = %v, want a retryable error", err)
		}
	})
}

func TestRunToolFetchDispatch(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "served")
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	t.Run("default fetcher refuses loopback", func(t *testing.T) {
		e := newEnv(t, activities.Deps{})
		res := e.toolReq(t, api.RunToolRequest{Tool: agents.ToolFetch, FetchAllow: []string{"127.0.0.1"},
			Args: argsJSON(t, map[string]any{"url": srv.URL})})
		wantErrorResult(t, res, "private/loopback")
		if n := hits.Load(); n != 0 {
			t.Errorf("server got %d requests, want none", n)
		}
	})
	t.Run("configured fetcher and the request's allow-list", func(t *testing.T) {
		e := newEnv(t, activities.Deps{Fetcher: loopbackFetcher(t, "docs.example.test")})
		url := fmt.Sprintf("http://docs.example.test:%d/page", port)
		res := e.toolReq(t, api.RunToolRequest{Tool: agents.ToolFetch, FetchAllow: []string{"example.test"},
			Args: argsJSON(t, map[string]any{"url": url})})
		wantOK(t, res)
		if !strings.Contains(res.Content, "served") {
			t.Errorf("content = %q, want the body", res.Content)
		}
		res = e.toolReq(t, api.RunToolRequest{Tool: agents.ToolFetch, Args: argsJSON(t, map[string]any{"url": url})})
		wantErrorResult(t, res, "allow-list")
		if n := hits.Load(); n != 1 {
			t.Errorf("server got %d requests, want 1", n)
		}
	})
}

func TestCollectOutputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	for _, p := range []string{"out/a.md", "out/b.md", "out/skip.txt", "report.txt", "sub/dir/x.md"} {
		e.write(t, p, "x")
	}
	writeFile(t, filepath.Join(e.root, "outside.md"), "x")
	tests := []struct {
		name     string
		patterns []string
		want     []string
	}{
		{"globs and plain paths, sorted and deduped",
			[]string{"report.txt", "out/*.md", "missing.txt", "**/*.md", "out/a.md"},
			[]string{"out/a.md", "out/b.md", "report.txt", "sub/dir/x.md"}},
		{"brace alternatives", []string{"out/*.{md,txt}"}, []string{"out/a.md", "out/b.md", "out/skip.txt"}},
		{"nothing matches", []string{"*.pdf", "missing.txt"}, nil},
		{"directory and escapes skipped", []string{"out", "../outside.md", "../*.md"}, nil},
		{"no patterns", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.a.Tools.CollectOutputs(context.Background(), api.CollectOutputsRequest{RunID: testRun, Patterns: tt.patterns})
			if err != nil {
				t.Fatalf("CollectOutputs(%q): %v", tt.patterns, err)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && !slices.Equal(got, tt.want)) {
				t.Errorf("CollectOutputs(%q) = %q, want %q", tt.patterns, got, tt.want)
			}
		})
	}
}

func TestRestoreArtifacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	ctx := context.Background()
	blob := "\x00\x01\xfe\xff binary"
	for name, body := range map[string]string{"report.md": "# Report\n", "data.bin": blob} {
		if err := e.store.Put(ctx, "run-old", name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.Put(ctx, testRun, "own.txt", []byte("mine")); err != nil {
		t.Fatal(err)
	}

	t.Run("from another run into a directory", func(t *testing.T) {
		got, err := e.a.Tools.RestoreArtifacts(ctx, api.RestoreArtifactsRequest{RunID: testRun, FromRun: "run-old",
			Names: []string{"report.md", "data.bin"}, Into: "restored"})
		if err != nil {
			t.Fatalf("RestoreArtifacts: %v", err)
		}
		if want := []string{"restored/report.md", "restored/data.bin"}; !slices.Equal(got, want) {
			t.Errorf("written = %q, want %q", got, want)
		}
		if c := fileContent(t, filepath.Join(e.ws, "restored/report.md")); c != "# Report\n" {
			t.Errorf("restored/report.md = %q, want %q", c, "# Report\n")
		}
		if c := fileContent(t, filepath.Join(e.ws, "restored/data.bin")); c != blob {
			t.Errorf("restored/data.bin = %q, want %q byte for byte", c, blob)
		}
		// The agent can read what was restored.
		if res := e.tool(t, agents.ToolReadFile, map[string]any{"path": "restored/report.md"}); res.Content != "# Report\n" {
			t.Errorf("read_file restored/report.md = %q", res.Content)
		}
	})
	t.Run("from the same run into the root", func(t *testing.T) {
		got, err := e.a.Tools.RestoreArtifacts(ctx, api.RestoreArtifactsRequest{RunID: testRun, Names: []string{"own.txt"}})
		if err != nil {
			t.Fatalf("RestoreArtifacts: %v", err)
		}
		if !slices.Equal(got, []string{"own.txt"}) || fileContent(t, filepath.Join(e.ws, "own.txt")) != "mine" {
			t.Errorf("written = %q, own.txt = %q; want [own.txt] holding %q", got, fileContent(t, filepath.Join(e.ws, "own.txt")), "mine")
		}
	})
	t.Run("missing artifact is non-retryable", func(t *testing.T) {
		got, err := e.a.Tools.RestoreArtifacts(ctx, api.RestoreArtifactsRequest{RunID: testRun, FromRun: "run-old",
			Names: []string{"report.md", "nope.md"}, Into: "partial"})
		appErr := wantAppError(t, err, true, api.ErrTypeNotFound)
		if !strings.Contains(appErr.Error(), "nope.md") {
			t.Errorf("err = %v, want it to name the artifact", err)
		}
		if !slices.Equal(got, []string{"partial/report.md"}) {
			t.Errorf("written = %q, want what was restored before the failure", got)
		}
	})
	t.Run("into outside the workspace is non-retryable", func(t *testing.T) {
		_, err := e.a.Tools.RestoreArtifacts(ctx, api.RestoreArtifactsRequest{RunID: testRun, FromRun: "run-old",
			Names: []string{"report.md"}, Into: "../elsewhere"})
		wantAppError(t, err, true, api.ErrTypeEscape)
		if got := fileContent(t, filepath.Join(e.root, "elsewhere/report.md")); got != "<missing>" {
			t.Errorf("restored outside the workspace: %q", got)
		}
	})
}

func TestResolveAgent(t *testing.T) {
	t.Parallel()
	specs := []agents.Spec{{Name: "beta", Model: "m-b"}, {Name: "alpha", Instructions: "Be brief."}}
	e := newEnv(t, activities.Deps{Agents: specs})
	got, err := e.a.Model.ResolveAgent(context.Background(), "alpha")
	if err != nil {
		t.Fatalf("ResolveAgent(alpha): %v", err)
	}
	if got.Name != "alpha" || got.Instructions != "Be brief." {
		t.Errorf("ResolveAgent(alpha) = %+v, want the configured alpha", got)
	}

	_, err = e.a.Model.ResolveAgent(context.Background(), "gamma")
	// Its own type: AgentRun asks another worker (workflows/agentavail.go).
	appErr := wantAppError(t, err, true, api.ErrTypeAgentUnavailable)
	if msg := appErr.Error(); !strings.Contains(msg, `"gamma"`) || !strings.Contains(msg, "alpha, beta") {
		t.Errorf("err = %q, want it to name gamma and list alpha, beta", msg)
	}
}

// TestResolveAgentBoundsMaxDepth: the worker's max_depth (worker.max_depth) is recorded
// as the max_depth of an agent that sets none, and cuts a deeper one: the smaller wins.
func TestResolveAgentBoundsMaxDepth(t *testing.T) {
	t.Parallel()
	specs := []agents.Spec{{Name: "unset"}, {Name: "shallow", MaxDepth: 1}, {Name: "deep", MaxDepth: 5}}
	for _, tc := range []struct {
		worker int
		want   map[string]int
	}{
		{0, map[string]int{"unset": agents.DefaultMaxDepth, "shallow": 1, "deep": agents.DefaultMaxDepth}},
		{2, map[string]int{"unset": 2, "shallow": 1, "deep": 2}},
		{8, map[string]int{"unset": 8, "shallow": 1, "deep": 5}},
	} {
		e := newEnv(t, activities.Deps{Agents: specs, MaxDepth: tc.worker})
		for name, want := range tc.want {
			got, err := e.a.Model.ResolveAgent(context.Background(), name)
			if err != nil {
				t.Fatalf("ResolveAgent(%s): %v", name, err)
			}
			if got.MaxDepth != want || got.Depth() != want {
				t.Errorf("worker max_depth %d: agent %s resolves with max_depth %d (Depth %d), want %d", tc.worker, name, got.MaxDepth, got.Depth(), want)
			}
		}
	}
}

// Through Temporal's activity environment: the api names are registered, a tool failure
// arrives as a result and a non-retryable error survives the trip.
func TestActivitiesRegistered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{Agents: []agents.Spec{{Name: "alpha"}}})
	e.write(t, "x.txt", "via temporal")
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))) // the failure below is expected
	tenv := suite.NewTestActivityEnvironment()
	e.a.Register(tenv)

	val, err := tenv.ExecuteActivity(api.ActivityRunTool, api.RunToolRequest{RunID: testRun, Tool: agents.ToolReadFile,
		Args: argsJSON(t, map[string]any{"path": "x.txt"})})
	if err != nil {
		t.Fatalf("ExecuteActivity(%s): %v", api.ActivityRunTool, err)
	}
	var res api.RunToolResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Content != "via temporal" || res.Stamp == nil {
		t.Errorf("result = %+v, want the file with a stamp", res)
	}

	_, err = tenv.ExecuteActivity(api.ActivityResolveAgent, "nobody")
	wantAppError(t, err, true, api.ErrTypeAgentUnavailable)
}

// TestCollectOutputsInAUserDir: a user's own directory keeps earlier runs' files, so a
// run's outputs there are the matching files it wrote or changed, not every match (issue
// 29, item 6: the README's three-haiku run listed the first run's notes.md as its own).
// The mark survives the sandbox being opened again (a worker restart) and goes with the
// run's release.
func TestCollectOutputsInAUserDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	ctx := context.Background()
	user := t.TempDir()
	writeFile(t, filepath.Join(user, "notes.md"), "an earlier run's")
	writeFile(t, filepath.Join(user, "kept.md"), "an earlier run's, changed by this one")
	waitClockTick(t, user)

	spec := api.SandboxSpec{Type: api.SandboxLocal, Dir: user}
	patterns := []string{"notes.md", "*.md"}
	collect := func(run string) []string {
		t.Helper()
		got, err := e.a.Tools.CollectOutputs(ctx, api.CollectOutputsRequest{RunID: run, Sandbox: spec, Patterns: patterns})
		if err != nil {
			t.Fatalf("CollectOutputs of %s: %v", run, err)
		}
		return got
	}
	sb, err := e.sbs.Open(ctx, "run-a", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.sbs.Release(ctx, "run-a", spec) })
	for _, p := range []string{"haiku1.md", "kept.md"} {
		if _, err := sb.Write(ctx, p, []byte("by run a")); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := collect("run-a"), []string{"haiku1.md", "kept.md"}; !slices.Equal(got, want) {
		t.Errorf("run a's outputs = %q, want %q (what it wrote, not the earlier notes.md)", got, want)
	}
	// Opened again (this worker restarted): the mark of the run's first use stays.
	e.sbs.Forget("run-a", spec)
	if got, want := collect("run-a"), []string{"haiku1.md", "kept.md"}; !slices.Equal(got, want) {
		t.Errorf("run a's outputs after its sandbox was opened again = %q, want %q", got, want)
	}

	// The next run in the same directory wrote nothing yet: no outputs; then a change of a
	// file's mode only is a change too.
	waitClockTick(t, user)
	if got := collect("run-b"); len(got) != 0 {
		t.Errorf("run b's outputs before it changed anything = %q, want none", got)
	}
	t.Cleanup(func() { _ = e.sbs.Release(ctx, "run-b", spec) })
	if err := os.Chmod(filepath.Join(user, "notes.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := collect("run-b"), []string{"notes.md"}; !slices.Equal(got, want) {
		t.Errorf("run b's outputs = %q, want %q", got, want)
	}

	// Released, run a leaves no mark: a later use of the id starts anew.
	if err := e.sbs.Release(ctx, "run-a", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".nexo-dir-runs", "run-a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run a's mark after its release: %v, want it gone", err)
	}
	if entries, err := os.ReadDir(user); err != nil || len(entries) != 3 {
		t.Errorf("the user's directory after the release holds %d entries (%v), want its 3 files untouched", len(entries), err)
	}
}

// waitClockTick waits until a file made in dir gets a later time than every file there:
// file times come from the kernel's coarse clock, so files written in the same tick as a
// run's first use count as that run's. Bounded; no fixed sleep.
func waitClockTick(t *testing.T, dir string) {
	t.Helper()
	var newest time.Time
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if fi, err := en.Info(); err == nil && fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
	}
	probe := filepath.Join(t.TempDir(), "tick")
	deadline := time.Now().Add(5 * time.Second)
	for {
		writeFile(t, probe, "")
		fi, err := os.Stat(probe)
		if err != nil {
			t.Fatal(err)
		}
		if fi.ModTime().After(newest) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the file clock did not pass %v in 5s", newest)
		}
		runtime.Gosched()
	}
}
