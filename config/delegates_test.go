package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadDelegatesYAML loads y as the config file of a fresh directory.
func loadDelegatesYAML(t *testing.T, y string) (Config, error) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(LoadOptions{})
}

// TestLoadDelegates: an agent's delegates and max_depth load as written.
func TestLoadDelegates(t *testing.T) {
	cfg, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\nagents:\n"+
		"  - name: lead\n    permissions: {mode: approve}\n    delegates: [researcher]\n    max_depth: 2\n"+
		"  - name: researcher\n")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if a := cfg.Agents[0]; len(a.Delegates) != 1 || a.Delegates[0] != "researcher" || a.MaxDepth != 2 || a.Depth() != 2 {
		t.Errorf("lead = delegates %v, max_depth %d, want [researcher] and 2", a.Delegates, a.MaxDepth)
	}
	if d := cfg.Agents[1].Depth(); d != 3 {
		t.Errorf("researcher's depth = %d, want the default 3", d)
	}
}

// TestWorkerMaxDepth: worker.max_depth (file or NEXO_WORKER_MAX_DEPTH) bounds delegation
// for every agent: an agent may set a smaller max_depth, and one deeper than the worker's
// is refused at load, naming both, as is a worker bound out of range.
func TestWorkerMaxDepth(t *testing.T) {
	const agentsYAML = "llm: {base_url: http://x:1/v1}\nagents:\n  - name: lead\n    delegates: [helper]\n    max_depth: %d\n  - name: helper\n"
	cfg, err := loadDelegatesYAML(t, "worker: {max_depth: 6}\n"+fmt.Sprintf(agentsYAML, 2))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Worker.MaxDepth != 6 || cfg.Agents[0].MaxDepth != 2 {
		t.Errorf("worker.max_depth %d, lead's %d; want 6 and 2 as written", cfg.Worker.MaxDepth, cfg.Agents[0].MaxDepth)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"agent deeper than the worker's default", fmt.Sprintf(agentsYAML, 5),
			"agents[lead].max_depth 5: is deeper than worker.max_depth 3 allows (an agent may lower the worker's bound, not raise it): raise worker.max_depth or lower this"},
		{"worker zero", "worker: {max_depth: 0}\n" + fmt.Sprintf(agentsYAML, 1), "worker.max_depth 0: want 1 to 10 (default 3)"},
		{"worker too deep", "worker: {max_depth: 11}\n" + fmt.Sprintf(agentsYAML, 1), "worker.max_depth 11: want 1 to 10 (default 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadDelegatesYAML(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error %v, want one saying %q", err, tc.want)
			}
		})
	}
	t.Setenv("NEXO_WORKER_MAX_DEPTH", "4")
	cfg, err = loadDelegatesYAML(t, fmt.Sprintf(agentsYAML, 4))
	if err != nil || cfg.Worker.MaxDepth != 4 {
		t.Errorf("NEXO_WORKER_MAX_DEPTH=4: worker.max_depth %d (%v), want 4 and the agent's 4 accepted", cfg.Worker.MaxDepth, err)
	}
}

// TestDelegateErrorsNameThePath: an unknown delegate, an agent delegating to itself, a
// cycle (named by its path, once) and a bad max_depth are refused at load.
func TestDelegateErrorsNameThePath(t *testing.T) {
	for _, tc := range []struct {
		name, agents string
		want         []string
	}{
		{"unknown", "  - name: a\n    delegates: [ghost]\n",
			[]string{`agents[a].delegates[0] "ghost": is not an agent of this config (agents: a)`}},
		{"self", "  - name: a\n    delegates: [a]\n",
			[]string{`agents[a].delegates[0] "a": an agent cannot delegate to itself (cycle a -> a)`}},
		{"two", "  - name: a\n    delegates: [b]\n  - name: b\n    delegates: [a]\n",
			[]string{"delegate cycle a -> b -> a"}},
		{"three", "  - name: a\n    delegates: [b]\n  - name: b\n    delegates: [c]\n  - name: c\n    delegates: [a]\n",
			[]string{"agents[a].delegates", "delegate cycle a -> b -> c -> a"}},
		{"depth", "  - name: a\n    max_depth: 11\n", []string{"agents[a].max_depth 11: want 1 to 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\nagents:\n"+tc.agents)
			if err == nil {
				t.Fatal("Load accepted the config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "delegate cycle"); n > 1 {
				t.Errorf("the cycle is reported %d times, want once: %v", n, err)
			}
		})
	}
}

// TestDelegatesWithoutCycle: a diamond (a -> b, a -> c, b -> c) has no cycle.
func TestDelegatesWithoutCycle(t *testing.T) {
	if _, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\nagents:\n"+
		"  - name: a\n    delegates: [b, c]\n  - name: b\n    delegates: [c]\n  - name: c\n"); err != nil {
		t.Fatalf("Load: %v", err)
	}
}

// TestDocWorkerMaxDepth: the worker.max_depth example of docs/agents.md loads as the page
// says, and the refusal it quotes is the one config loading gives.
func TestDocWorkerMaxDepth(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, blk := range strings.Split(string(b), "```yaml\n")[1:] {
		blk, _, _ = strings.Cut(blk, "```")
		if strings.Contains(blk, "max_depth: 2 ") {
			example = strings.ReplaceAll("\n"+blk, "\n  ", "\n") // the block sits in a list item
		}
	}
	if example == "" {
		t.Fatal("docs/agents.md has no ```yaml block with worker max_depth: 2")
	}
	cfg, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\n"+example)
	if err != nil {
		t.Fatalf("Load the example of docs/agents.md: %v", err)
	}
	if cfg.Worker.MaxDepth != 2 || len(cfg.Agents) != 2 || cfg.Agents[0].MaxDepth != 1 || cfg.Agents[1].WithMaxDepth(cfg.Worker.MaxDepth).Depth() != 2 {
		t.Errorf("worker.max_depth %d, agents %+v; want 2, lead at 1 and researcher at the worker's 2", cfg.Worker.MaxDepth, cfg.Agents)
	}
	// The refusal the page quotes: lead at 5 under the default worker bound.
	deeper := strings.Replace(strings.Replace(example, "worker:\n  max_depth: 2", "", 1), "max_depth: 1 ", "max_depth: 5 ", 1)
	_, err = loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\n"+deeper)
	if err == nil {
		t.Fatal("Load accepted lead's max_depth 5 above the worker's 3")
	}
	msg := err.Error()[strings.Index(err.Error(), "agents[lead].max_depth"):]
	msg, _, _ = strings.Cut(msg, "\n")
	page := strings.Join(strings.Fields(string(b)), " ")
	if !strings.Contains(page, "`"+msg+"`") {
		t.Errorf("docs/agents.md does not quote the refusal as config loading words it: %q", msg)
	}
}
