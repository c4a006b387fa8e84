package config

import (
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
