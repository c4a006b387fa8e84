package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeToolConcurrency: the parallel-tools example of docs/agents.md loads as it says, and a
// tool_concurrency out of range stops the worker naming the field.
func TestReadmeToolConcurrency(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, blk := range strings.Split(string(b), "```yaml\n")[1:] {
		blk, _, _ = strings.Cut(blk, "```")
		if strings.Contains(blk, "tool_concurrency: 8") {
			example = blk
		}
	}
	if example == "" {
		t.Fatal("docs/agents.md has no ```yaml block with tool_concurrency: 8")
	}
	load := func(y string) (Config, error) {
		dir := t.TempDir()
		t.Chdir(dir)
		if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte("llm: {base_url: http://x:1/v1}\n"+y), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(LoadOptions{Env: []string{}})
	}
	cfg, err := load(example)
	if err != nil {
		t.Fatalf("Load the example of docs/agents.md: %v", err)
	}
	if len(cfg.Agents) != 1 || cfg.Agents[0].ToolConcurrency != 8 || !cfg.Agents[0].Plan {
		t.Fatalf("agents = %+v, want researcher with tool_concurrency 8 and plan", cfg.Agents)
	}
	_, err = load(strings.Replace(example, "tool_concurrency: 8", "tool_concurrency: 64", 1))
	if err == nil || !strings.Contains(err.Error(), "agents[researcher].tool_concurrency: 64 is not between 1 and 32") {
		t.Errorf("tool_concurrency 64: err = %v, want it named", err)
	}
}
