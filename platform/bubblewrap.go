package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/bwrap"
)

// startBubblewrap probes bubblewrap once (bwrap runs `true` sealed as a command would)
// and enables the tier on sandboxes when it works. An agent whose sandbox is bubblewrap
// makes the worker refuse to start, naming the agent and why, when the probe fails or
// the agent's limits are not valid: a run must not find out at its first shell call.
// Without such an agent a failed probe only leaves the tier off.
func startBubblewrap(ctx context.Context, sandboxes *activities.Sandboxes, specs []agents.Spec, stdout io.Writer) error {
	var (
		errs  []error
		users []string
	)
	for _, a := range specs {
		if a.Sandbox.Type != api.SandboxBubblewrap {
			continue
		}
		users = append(users, a.Name)
		if _, err := activities.BubblewrapOptions(a.Sandbox); err != nil {
			errs = append(errs, fmt.Errorf("agents[%s].sandbox.%w", a.Name, err))
		}
	}
	bin, err := bwrap.LookPath("")
	if err == nil {
		err = bwrap.Probe(ctx, bin)
	}
	switch {
	case err != nil && len(users) > 0:
		errs = append(errs, fmt.Errorf("agents[%s].sandbox: type bubblewrap: %w", strings.Join(users, ","), err))
	case err != nil:
		fmt.Fprintln(stdout, "Bubblewrap sandboxes: unavailable ("+err.Error()+")")
	default:
		sandboxes.WithBubblewrap(bin)
		fmt.Fprintln(stdout, "Bubblewrap sandboxes: enabled ("+bin+")")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("check bubblewrap sandboxes: %w", err)
	}
	return nil
}
