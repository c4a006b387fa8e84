package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// call runs one tool of a server on root and returns its text and whether it is an error.
func call(t *testing.T, root, tool string, args map[string]any) (string, bool) {
	t.Helper()
	c, err := client.NewInProcessClient(newServer(root))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, ""), res.IsError
}

func TestSearchAndRead(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.md"), []byte("# A\nBackups at two.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "secret.txt"), []byte("backup password"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, isErr := call(t, root, "search", map[string]any{"query": "BACKUP"}); isErr || got != "a.md:2: Backups at two." {
		t.Errorf("search = %q (error %v), want the one line of the one note", got, isErr)
	}
	if got, _ := call(t, root, "search", map[string]any{"query": "nothing"}); !strings.Contains(got, "no note mentions") {
		t.Errorf("search for nothing = %q", got)
	}
	if got, isErr := call(t, root, "read", map[string]any{"note": "a.md"}); isErr || got != "# A\nBackups at two.\n" {
		t.Errorf("read a.md = %q (error %v)", got, isErr)
	}
	for _, bad := range []string{"../a.md", "secret.txt", "missing.md", ""} {
		if got, isErr := call(t, root, "read", map[string]any{"note": bad}); !isErr {
			t.Errorf("read %q = %q, want an error result", bad, got)
		}
	}
}
