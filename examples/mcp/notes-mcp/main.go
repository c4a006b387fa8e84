// Command notes-mcp is the README's example MCP server: it serves, over stdio, two
// read-only tools on the Markdown notes of one folder (--root):
//
//   - search {query}: the lines of every note that contain the query (case-insensitive),
//     as "note:line: text";
//   - read {note}: one note in full.
//
// Both only read, and only inside the root: a note name is a file name, never a path.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	root := flag.String("root", ".", "the folder of Markdown notes to serve")
	flag.Parse()
	if fi, err := os.Stat(*root); err != nil || !fi.IsDir() {
		fmt.Fprintf(os.Stderr, "notes-mcp: --root %s is not a folder\n", *root)
		os.Exit(2)
	}
	if err := server.ServeStdio(newServer(*root)); err != nil {
		fmt.Fprintln(os.Stderr, "notes-mcp:", err)
		os.Exit(1)
	}
}

func newServer(root string) *server.MCPServer {
	s := server.NewMCPServer("notes", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("search",
		mcp.WithDescription("Finds the lines of the team's notes that contain a text (case-insensitive)."),
		mcp.WithString("query", mcp.Required(), mcp.Description("the text to look for"))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			q := strings.ToLower(strings.TrimSpace(req.GetString("query", "")))
			if q == "" {
				return mcp.NewToolResultError("search: query is empty"), nil
			}
			notes, err := filepath.Glob(filepath.Join(root, "*.md"))
			if err != nil {
				return mcp.NewToolResultError("search: " + err.Error()), nil
			}
			sort.Strings(notes)
			var hits []string
			for _, n := range notes {
				b, err := os.ReadFile(n)
				if err != nil {
					return mcp.NewToolResultError(fmt.Sprintf("search: read %s: %v", filepath.Base(n), err)), nil
				}
				for i, line := range strings.Split(string(b), "\n") {
					if strings.Contains(strings.ToLower(line), q) {
						hits = append(hits, fmt.Sprintf("%s:%d: %s", filepath.Base(n), i+1, line))
					}
				}
			}
			if len(hits) == 0 {
				return mcp.NewToolResultText(fmt.Sprintf("no note mentions %q", q)), nil
			}
			return mcp.NewToolResultText(strings.Join(hits, "\n")), nil
		})
	s.AddTool(mcp.NewTool("read",
		mcp.WithDescription("Returns one note in full."),
		mcp.WithString("note", mcp.Required(), mcp.Description("the note's file name, e.g. backups.md"))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("note", "")
			if name == "" || name != filepath.Base(name) || !strings.HasSuffix(name, ".md") {
				return mcp.NewToolResultError(fmt.Sprintf("read: %q is not a note name (a file name ending in .md, no folders)", name)), nil
			}
			b, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				return mcp.NewToolResultError(fmt.Sprintf("read: no note %s (search finds the notes)", name)), nil
			}
			return mcp.NewToolResultText(string(b)), nil
		})
	return s
}
