package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// scheduleCreateFlags are the flags only `schedule create` takes.
var scheduleCreateFlags = []string{"workflow", "input", "agent", "prompt", "every", "cron", "no-check"}

func scheduleCmd() *command {
	return &command{
		name: "schedule", args: "create <name> (--workflow <type> [--input JSON] | --agent <name> --prompt TEXT) (--every DURATION | --cron SPEC) | list | pause <name> | unpause <name> | delete <name>",
		summary: "Start runs of a workflow on a schedule (a Temporal Schedule): every interval or at cron times; a start due while the previous run is open is skipped.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("workflow", "", "create: the workflow type its runs are of")
			fs.String("input", "", "create: each run's payload as JSON, @file, or @- for standard input")
			fs.String("agent", "", "create: runs of this configured agent (AgentRun runs, as `starter agent`), with --prompt; instead of --workflow and --input")
			fs.String("prompt", "", "create: the prompt each run of --agent gets")
			fs.Duration("every", 0, "create: start a run at this interval (e.g. 1h, 30s; at least 1s)")
			fs.String("cron", "", `create: start a run at these times, a cron spec in UTC (e.g. "0 2 * * *": 02:00 every day)`)
			fs.Bool("no-check", false, "create: do not ask the workers' registry whether the workflow type and the input's fields are known (as run --no-check)")
			fs.String("note", "", "pause, unpause: why (list shows it)")
			fs.Bool("json", false, "print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: create, list, pause, unpause or delete")
			}
			sub, args := args[0], args[1:]
			if sub != "create" {
				for _, f := range scheduleCreateFlags {
					if fs.Changed(f) {
						return usagef("--%s is for schedule create, not schedule %s", f, sub)
					}
				}
			}
			if fs.Changed("note") && sub != "pause" && sub != "unpause" {
				return usagef("--note is for schedule pause and unpause, not schedule %s", sub)
			}
			name := func() (string, error) {
				if len(args) != 1 {
					return "", usagef("schedule %s wants a schedule name, got %d argument(s)", sub, len(args))
				}
				if err := api.ValidateScheduleName(args[0]); err != nil {
					return "", usagef("%v", err)
				}
				return args[0], nil
			}
			asJSON, _ := fs.GetBool("json")
			switch sub {
			case "create":
				n, err := name()
				if err != nil {
					return err
				}
				return scheduleCreate(ctx, e, fs, n, asJSON)
			case "list":
				if len(args) != 0 {
					return usagef("schedule list takes no arguments, got %q", args)
				}
				return scheduleList(ctx, e, asJSON)
			case "pause", "unpause", "delete":
				n, err := name()
				if err != nil {
					return err
				}
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				note, _ := fs.GetString("note")
				switch sub {
				case "pause":
					err = rc.PauseSchedule(ctx, n, note)
				case "unpause":
					err = rc.UnpauseSchedule(ctx, n, note)
				default:
					err = rc.DeleteSchedule(ctx, n)
				}
				if err != nil {
					return err
				}
				done := map[string]string{"pause": "paused", "unpause": "unpaused", "delete": "deleted"}[sub]
				if asJSON {
					return e.printJSON(map[string]string{"name": n, "status": done})
				}
				fmt.Fprintf(e.stdout, "schedule %s %s\n", n, done)
				return nil
			}
			return unknownSubcommand("schedule subcommand", sub, "create", "list", "pause", "unpause", "delete")
		},
	}
}

func scheduleCreate(ctx context.Context, e *env, fs *pflag.FlagSet, name string, asJSON bool) error {
	req := runs.ScheduleRequest{Name: name}
	req.Workflow, _ = fs.GetString("workflow")
	req.Every, _ = fs.GetDuration("every")
	req.Cron, _ = fs.GetString("cron")
	req.Unchecked, _ = fs.GetBool("no-check")
	agent, _ := fs.GetString("agent")
	prompt, _ := fs.GetString("prompt")
	switch {
	case fs.Changed("agent") && (fs.Changed("workflow") || fs.Changed("input")):
		return usagef("schedule create %s: --agent is instead of --workflow and --input (its runs are AgentRun runs of the agent)", name)
	case fs.Changed("agent") != fs.Changed("prompt"):
		return usagef("schedule create %s: --agent and --prompt go together", name)
	case fs.Changed("agent") && (agent == "" || strings.TrimSpace(prompt) == ""):
		return usagef("schedule create %s: --agent and --prompt must not be empty", name)
	case req.Workflow == "" && !fs.Changed("agent"):
		return usagef("schedule create %s wants --workflow <type> (the workflow its runs are of) or --agent <name> --prompt TEXT", name)
	case fs.Changed("every") == fs.Changed("cron"):
		return usagef("schedule create %s wants exactly one of --every DURATION or --cron SPEC", name)
	case fs.Changed("every") && req.Every < api.MinScheduleEvery:
		return usagef("--every %v: want an interval of at least %v", req.Every, api.MinScheduleEvery)
	case fs.Changed("every") && req.Every%time.Second != 0:
		return usagef("--every %v: want a whole number of seconds", req.Every)
	case fs.Changed("cron") && strings.TrimSpace(req.Cron) == "":
		return usagef(`--cron is empty: want a cron spec, e.g. "0 2 * * *"`)
	}
	if fs.Changed("agent") {
		payload, err := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: prompt})
		if err != nil {
			return err
		}
		req.Workflow, req.Payload = api.WorkflowAgentRun, payload
	} else {
		in, _ := fs.GetString("input")
		payload, err := readInput(in)
		if err != nil {
			return err
		}
		req.Payload = payload
	}
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	s, err := rc.CreateSchedule(ctx, req)
	var se *runs.ScheduleSpecError
	if errors.As(err, &se) {
		return usagef("%v", err) // --cron is wrong, as a bad --every is
	}
	if err != nil {
		return inputMistake(err) // the exit codes of run: an unknown field 2, an unknown type or agent 1
	}
	if asJSON {
		return e.printJSON(s)
	}
	fmt.Fprintf(e.stdout, "schedule %s created: %s run %s, next at %s\n", s.Name, s.Workflow, s.Spec, timeOr(s.NextRun, "-"))
	return nil
}

func scheduleList(ctx context.Context, e *env, asJSON bool) error {
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	list, err := rc.ListSchedules(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stdout, "no schedules (starter schedule create <name> --workflow <type> --every 1h makes one)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWORKFLOW\tSPEC\tNEXT RUN\tLAST RUN\tSTATUS\tPAUSED")
	for _, s := range list {
		last, status := "-", "-"
		if s.LastRun != nil {
			last, status = s.LastRun.ID, string(s.LastRun.Status)
		}
		paused := "no"
		if s.Paused {
			paused = "yes"
			if s.Note != "" {
				paused += " (" + s.Note + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Workflow, s.Spec, timeOr(s.NextRun, "-"), last, status, paused)
	}
	return tw.Flush()
}

// timeOr formats t in RFC 3339, or none when t is nil.
func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Format(time.RFC3339)
}
