package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoopCommandFromTheConfigFolder: a harness's ./ command is found beside the config
// file, wherever the worker starts; other words stay as written.
func TestLoopCommandFromTheConfigFolder(t *testing.T) {
	cfg, err := loadTyped(t, "  - name: harnessed\n    loop: {type: harness, command: [./bin/h, --fast, ./x], timeout: 2m}\n"+
		"  - name: onpath\n    loop: {type: harness, command: [my-harness]}\n", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Agents[0].Loop
	if l == nil || !filepath.IsAbs(l.Command[0]) || !strings.HasSuffix(l.Command[0], filepath.Join("conf", "bin", "h")) ||
		l.Command[1] != "--fast" || l.Command[2] != "./x" || l.StepTimeout().String() != "2m0s" {
		t.Errorf("loop = %+v", l)
	}
	if got := cfg.Agents[1].Loop.Command[0]; got != "my-harness" {
		t.Errorf("a bare name became %q", got)
	}
}

func TestLoopRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct{ agent, want string }{
		{"  - name: h\n    loop: {type: harness}\n", "agents[h].loop.command: is empty"},
		{"  - name: h\n    loop: {type: shell, command: [x]}\n", `loop.type: "shell" is not one of harness, go`},
		{"  - name: h\n    sandbox: {type: virtual}\n    loop: {type: harness, command: [./h]}\n", "virtual sandbox runs no processes"},
	} {
		if _, err := loadTyped(t, tc.agent, map[string]string{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.agent, err, tc.want)
		}
	}
}

// TestHarnessProtocolExampleLoads: the loop: example of docs/harness-protocol.md loads
// as written, with no llm: section (a harness calls no model), its ./ command resolved
// beside the config file.
func TestHarnessProtocolExampleLoads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "harness-protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, blk := range strings.Split(string(b), "```yaml\n")[1:] {
		blk, _, _ = strings.Cut(blk, "```")
		if strings.Contains(blk, "type: harness") {
			example = blk
			break
		}
	}
	if example == "" {
		t.Fatal("docs/harness-protocol.md has no ```yaml block with type: harness")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Agents[0].Loop
	real, _ := filepath.EvalSymlinks(dir)
	if l == nil || (l.Command[0] != filepath.Join(dir, "bin", "harness-loop") && l.Command[0] != filepath.Join(real, "bin", "harness-loop")) ||
		l.Command[1] != "--verbose" || l.StepTimeout().String() != "1m0s" {
		t.Errorf("loop = %+v", l)
	}
}
