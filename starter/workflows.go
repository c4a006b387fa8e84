package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
)

func workflowsCmd() *command {
	return &command{
		name: "workflows", args: "", summary: "List the workflow types and agents the workers on the task queue offer (from its worker registry).",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("json", false, "print the registry's answer as JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			v, err := rc.Workflows(ctx)
			if err != nil {
				return err
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return e.printJSON(v)
			}
			if len(v.Workers) == 0 {
				fmt.Fprintln(e.stdout, "No live worker: none has announced itself within its TTL (worker.registry_ttl, 1m by default), and those that stopped said goodbye.")
				return nil
			}
			fmt.Fprintln(e.stdout, "Workflow types:")
			for _, w := range v.Workflows {
				fmt.Fprintf(e.stdout, "  %s\n", w)
			}
			if len(v.Agents) == 0 {
				fmt.Fprintln(e.stdout, "Agents: none configured")
			} else {
				fmt.Fprintln(e.stdout, "Agents:")
				for _, a := range v.Agents {
					fmt.Fprintf(e.stdout, "  %s\n", a)
				}
			}
			fmt.Fprintln(e.stdout, "Workers:")
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, w := range v.Workers {
				store := "store: not announced"
				if w.Store != nil {
					store = "store: " + w.Store.Label()
				}
				fmt.Fprintf(tw, "  %s\tlast announced %s\t%d workflow types\tagents: %s\t%s\n", w.Identity,
					w.SeenAt.UTC().Format(time.RFC3339), len(w.Workflows), orNone(strings.Join(w.Agents, ", ")), store)
			}
			return tw.Flush()
		},
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
