package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

func agentCmd() *command {
	return &command{
		name: "agent", args: `<name> "prompt"`,
		summary: "Run a configured agent on a prompt (an AgentRun run); same as run AgentRun --input '{\"agent\":...,\"prompt\":...}'.",
		flags: func(fs *pflag.FlagSet) {
			fs.Int("max-turns", 0, "stop after this many model calls (default: the agent's max_turns)")
			fs.String("id", "", "run id (default: a new UUIDv7)")
			fs.Bool("wait", false, "follow the run until it is done, failed or waiting for an approval")
			fs.Bool("json", false, "print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) < 2 {
				return usagef(`want an agent name and a prompt, got %d argument(s)`, len(args))
			}
			in := api.AgentRunInput{Agent: args[0], Prompt: strings.Join(args[1:], " ")}
			in.MaxTurns, _ = fs.GetInt("max-turns")
			if in.MaxTurns < 0 {
				return usagef("--max-turns %d is negative", in.MaxTurns)
			}
			payload, err := json.Marshal(in)
			if err != nil {
				return err
			}
			return startRun(ctx, e, fs, runs.StartRequest{Workflow: api.WorkflowAgentRun, Payload: payload}, "agent "+in.Agent)
		},
	}
}
