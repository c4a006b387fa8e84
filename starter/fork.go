package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/runs"
)

// forkCmd starts a new run from an agent run's thread and workspace at one of its calls.
func forkCmd() *command {
	return &command{
		name: "fork", args: "<run-id> --at <call-id>",
		summary: "Time travel with the files: a new run of the same agent from the thread and workspace a tool call found.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("at", "", "the tool call to fork at (its id, as in `starter logs`): the new run starts before the model asked for it")
			fs.String("id", "", "the new run's id (default: a new UUIDv7)")
			fs.String("prompt", "", "a user message appended before the model is asked again")
			fs.String("args", "", "re-issue the call with these arguments (a JSON object) instead of asking the model again")
			fs.Bool("wait", false, "follow the new run until it is done, failed or suspended")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			at, _ := fs.GetString("at")
			if at == "" {
				return usagef("fork needs --at <call-id> (the call ids are in `starter logs %s`)", args[0])
			}
			req := runs.ForkRequest{Run: args[0], At: at}
			req.ID, _ = fs.GetString("id")
			req.Prompt, _ = fs.GetString("prompt")
			if a, _ := fs.GetString("args"); a != "" {
				if !json.Valid([]byte(a)) {
					return usagef("--args is not valid JSON: %.80s", a)
				}
				req.Args = json.RawMessage(a)
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			st, err := e.artifactStore(ctx)
			if err != nil {
				return err
			}
			id, err := rc.Fork(ctx, st, req)
			if err != nil {
				return inputMistake(err)
			}
			fmt.Fprintln(e.stdout, id)
			if wait, _ := fs.GetBool("wait"); wait {
				return waitRun(ctx, e, rc, id, 0, false, false)
			}
			return nil
		},
	}
}
