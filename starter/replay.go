package main

import (
	"context"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/replay"
	"github.com/nexo-temporal/nexo/workflows"
)

// checkReplayCmd is the deploy gate: the histories of the server's open runs (or recorded
// ones) replayed against the workflows compiled into this starter, which are the ones the
// worker of the same build registers (shippedWorkflows).
func checkReplayCmd() *command {
	return &command{
		name: "check-replay", args: "[--histories PATH...]",
		summary: "Replay open runs (or recorded histories) against this build's workflows; exit 1 if any diverges.",
		flags:   replay.BindFlags,
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			// Before dialing: a mistake in the command line needs no server.
			if err := replay.ValidateFlags(fs, args); err != nil {
				return usagef("%s", strings.TrimPrefix(err.Error(), replay.ErrUsage.Error()+": "))
			}
			var opts []replay.Option
			if replay.WantsServer(fs) {
				// Dials with External Storage over artifacts.url, which the replayer shares.
				if _, err := e.runs(ctx); err != nil {
					return err
				}
				cfg, _ := e.config()
				opts = append(opts, replay.WithTaskQueue(cfg.Temporal.TaskQueue),
					replay.WithStorage(payloads.ExternalStorage(e.store, cfg.Payloads.OffloadThreshold)))
			}
			return replay.RunFlags(ctx, fs, args, e.tc, shippedWorkflows, e.stdout, opts...)
		},
	}
}

// shippedWorkflows registers what the shipped worker registers (worker/main.go): the
// platform's workflows and the Quickstart's demos.
func shippedWorkflows(r workflows.Registry) {
	workflows.RegisterAll(r)
	demo.Register(r)
}
