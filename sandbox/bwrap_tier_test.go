package sandbox_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/bwrap"
)

// The bubblewrap tier's file operations are Local's; running it through the tier matrix
// checks that the embedding keeps every one of them (and its guard) intact.
func init() {
	sandbox.ExtraTiers = append(sandbox.ExtraTiers, func(t *testing.T, dir string) (string, sandbox.Sandbox, bool) {
		if _, err := exec.LookPath("bwrap"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("bwrap is missing under CI (.ci/run installs bubblewrap): %v", err)
			}
			t.Logf("bubblewrap tier left out: %v", err)
			return "", nil, false
		}
		sb, err := bwrap.New(dir, bwrap.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return "bubblewrap", sb, true
	})
}
