package fakellm

import (
	"path/filepath"
	"testing"
)

func TestExampleScriptsParse(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*", "*.script.json"))
	if len(files) == 0 {
		t.Fatal("no example scripts found")
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(s.script) == 0 {
			t.Errorf("%s: empty script", f)
		}
	}
}
