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
	sandboxegress "github.com/nexo-temporal/nexo/sandbox/egress"
)

// startBubblewrap probes bubblewrap once (bwrap runs `true` sealed as a command would)
// and enables the tier on sandboxes when it works. An agent whose sandbox is bubblewrap
// makes the worker refuse to start, naming the agent and why, when the probe fails or
// the agent's limits are not valid: a run must not find out at its first shell call.
// Without such an agent a failed probe only leaves the tier off.
//
// With bubblewrap enabled the worker also starts its egress proxy (sandbox/egress), for
// the sandboxes whose agent has sandbox.egress; an agent whose inject rule names a
// variable the worker does not have refuses the start, naming the field. The returned
// stop ends the proxy.
func startBubblewrap(ctx context.Context, sandboxes *activities.Sandboxes, specs []agents.Spec, stdout io.Writer, lookupEnv func(string) (string, bool)) (stop func(), err error) {
	var (
		errs   []error
		users  []string
		egress []string
	)
	for _, a := range specs {
		if a.Sandbox.Type != api.SandboxBubblewrap {
			continue
		}
		users = append(users, a.Name)
		if _, err := activities.BubblewrapOptions(a.Sandbox); err != nil {
			errs = append(errs, fmt.Errorf("agents[%s].sandbox.%w", a.Name, err))
		}
		if e := a.Sandbox.Egress; e != nil {
			egress = append(egress, a.Name)
			if err := sandboxegress.CheckSecrets("agents["+a.Name+"].sandbox.egress", *e, lookupEnv); err != nil {
				errs = append(errs, err)
			}
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
	stop = func() {}
	if err := errors.Join(errs...); err != nil {
		return stop, fmt.Errorf("check bubblewrap sandboxes: %w", err)
	}
	if bin == "" || err != nil {
		return stop, nil
	}
	fwd, ferr := sandboxegress.Executable()
	if ferr == nil {
		var proxy *sandboxegress.Proxy
		proxy, ferr = sandboxegress.New(sandboxegress.Options{LookupEnv: lookupEnv})
		if ferr == nil {
			sandboxes.WithEgress(proxy, fwd)
			stop = func() { _ = proxy.Close() }
			if len(egress) > 0 {
				fmt.Fprintln(stdout, "Egress proxy: enabled for "+strings.Join(egress, ", "))
			}
			return stop, nil
		}
	}
	if len(egress) > 0 {
		return stop, fmt.Errorf("agents[%s].sandbox.egress: start the egress proxy: %w", strings.Join(egress, ","), ferr)
	}
	fmt.Fprintln(stdout, "Egress proxy: unavailable ("+ferr.Error()+")")
	return stop, nil
}
