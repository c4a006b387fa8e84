package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A second `worker --dev` on the database of a running one refuses at once, naming the
// process that holds it, instead of starting a second server that fights over the shard.
func TestSecondDevWorkerRefusesTheDatabase(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()

	q := newPlatform(t) // other ports; the same directory and database
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.worker, "--dev")
	cmd.Dir = p.dir
	cmd.Env = append(q.env(), "NEXO_DEV_DB_PATH=.nexo/temporal.db")
	q.releasePorts() // the second worker binds them before it finds the database taken
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second worker: %v, want exit 1\n%s", err, out)
	}
	want := fmt.Sprintf("database .nexo/temporal.db is in use by process %d", p.cmd.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Errorf("second worker said:\n%s\nwant it to say %q", out, want)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Temporal server:") || strings.HasPrefix(line, "Nexo worker ready") {
			t.Errorf("the second worker started a server: %q", line)
		}
	}
}
