package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	nexoplatform "github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/platform/dev"
)

// These were the worker package's own tests; they live here so that package has no test
// binary of its own linking the Temporal server (a minute or more each on two cores), and
// they run the built worker as a user does.

// workerCommand is the shipped worker's command (worker/main.go).
var workerCommand = nexoplatform.Command{Name: "worker", Options: []nexoplatform.Option{dev.Server()}}

// runWorkerBin runs the worker binary with argv and returns its exit code and output.
func runWorkerBin(t *testing.T, argv ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bins.worker, argv...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run worker %s: %v", strings.Join(argv, " "), err)
	}
	return code, out.String(), errb.String()
}

// TestWorkerUsageErrors: a mistyped flag names the one meant, exits 2 and prints the one
// usage line; none of these starts anything.
func TestWorkerUsageErrors(t *testing.T) {
	t.Parallel()
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
		code, stdout, stderr := runWorkerBin(t, tc.argv...)
		want := tc.want + workerCommand.UsageLine() + "\n"
		if code != 2 || stderr != want || stdout != "" {
			t.Errorf("worker %s: exit %d stdout %q stderr\n%s\nwant exit 2, stderr\n%s", strings.Join(tc.argv, " "), code, stdout, stderr, want)
		}
	}
}

func TestWorkerVersionAndHelp(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runWorkerBin(t, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "worker ") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("worker --version: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runWorkerBin(t, "--help")
	if code != 0 || !strings.Contains(stdout, "--dev") || !strings.Contains(stdout, "--sandbox-host") || !strings.Contains(stdout, "--pool string") {
		t.Errorf("worker --help: exit %d stdout %q", code, stdout)
	}
	var errb bytes.Buffer
	if code := workerCommand.ExitCode(errors.New("dial temporal: refused"), &errb); code != 1 {
		t.Errorf("a failure exits %d, want 1", code)
	}
}
