package config

import (
	"path/filepath"
	"testing"
)

// TestExampleConfigsLoad keeps the example configs the README and docs/ run valid.
func TestExampleConfigsLoad(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no example configs found")
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			if _, err := Load(LoadOptions{File: f, Env: []string{}}); err != nil {
				t.Errorf("example %s does not load: %v", f, err)
			}
		})
	}
}
