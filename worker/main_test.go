package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestUsageErrors: a mistyped flag names the one meant, exits 2 and prints the one usage
// line; none of these starts anything.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"--dve"}, "worker: unknown flag --dve (did you mean --dev?)\n"},
		{[]string{"--verison"}, "worker: unknown flag --verison (did you mean --version?)\n"},
		{[]string{"--dev", "extra"}, `worker: worker takes no arguments, got ["extra"]` + "\n"},
		{[]string{"--sandbox-host", "--pool", "GPU box"}, `worker: --pool: pool name "GPU box" may hold only lowercase letters, digits, - and _ (starting with a letter or digit)` + "\n"},
		{[]string{"--sandbox-host", "--dev"}, "worker: --sandbox-host and --dev: a sandbox host runs no Temporal server and no workflows; start `worker --dev` elsewhere and point the host at it (--address)\n"},
		{[]string{"--sandbox-hots"}, "worker: unknown flag --sandbox-hots (did you mean --sandbox-host?)\n"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.argv, &stdout, &stderr)
		code := exitCode(err, &stderr)
		want := tc.want + usageLine + "\n"
		if code != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("worker %s: exit %d stdout %q stderr\n%s\nwant exit 2, stderr\n%s", strings.Join(tc.argv, " "), code, stdout.String(), stderr.String(), want)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"--version"}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "worker ") || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("worker --version: exit %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	err = run(context.Background(), []string{"--help"}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 0 || !strings.Contains(stdout.String(), "--dev") ||
		!strings.Contains(stdout.String(), "--sandbox-host") || !strings.Contains(stdout.String(), "--pool string") {
		t.Errorf("worker --help: exit %d stdout %q", code, stdout.String())
	}
	if code := exitCode(errors.New("dial temporal: refused"), &stderr); code != 1 {
		t.Errorf("a failure exits %d, want 1", code)
	}
}
