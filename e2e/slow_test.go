package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// slowTest skips t unless NEXO_SLOW=1 (or one of the variables named in also is 1): t
// measures rather than checks (a rate limit over a minute or more, a latency), so it stays
// out of the default `go test ./...` and .ci/run runs it in a line of its own,
// NEXO_SLOW=1 go test ./e2e -run '<the slow tests>'. slowTests names them for that line.
func slowTest(t *testing.T, also ...string) {
	t.Helper()
	if os.Getenv("NEXO_SLOW") == "1" {
		return
	}
	for _, env := range also {
		if os.Getenv(env) == "1" {
			return
		}
	}
	why := "measures rather than checks; NEXO_SLOW=1 runs it"
	if len(also) > 0 {
		why += " (or " + strings.Join(also, "=1, ") + "=1)"
	}
	t.Skip(why)
}

// slowTests are the tests that call slowTest; .ci/run's slow line runs exactly these
// (TestSlowTestsAreListed keeps the two in step).
var slowTests = []string{"TestFleetRateLimit", "TestFleetTokenLimit", "TestGatewaySSELatency"}

// TestSlowTestsAreListed: every test that calls slowTest is in slowTests and in .ci/run's
// NEXO_SLOW=1 line, so none is skipped everywhere.
func TestSlowTestsAreListed(t *testing.T) {
	t.Parallel()
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var slowLine string
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(line, "NEXO_SLOW=1 ") && strings.Contains(line, "go test") {
			slowLine = line
		}
	}
	if slowLine == "" {
		t.Fatal(".ci/run has no NEXO_SLOW=1 go test line")
	}
	calls := map[string]bool{}
	files, _ := os.ReadDir(".")
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		var current string
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "func Test"); ok {
				name, _, _ := strings.Cut(rest, "(")
				current = "Test" + name
			}
			if strings.HasPrefix(strings.TrimSpace(line), "slowTest(t") && current != "" {
				calls[current] = true
			}
		}
	}
	for name := range calls {
		if !slices.Contains(slowTests, name) {
			t.Errorf("%s calls slowTest but is not in slowTests", name)
		}
	}
	for _, name := range slowTests {
		if !calls[name] {
			t.Errorf("slowTests names %s, which does not call slowTest", name)
		}
		if !strings.Contains(slowLine, name) {
			t.Errorf(".ci/run's slow line does not run %s:\n%s", name, slowLine)
		}
	}
}
