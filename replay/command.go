package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/workflows"
)

// ErrUsage is returned (wrapped) for a command line RunCommand cannot take.
var ErrUsage = errors.New("usage")

// BindFlags adds the flags of the check-replay command to fs: --query, --limit, --closed,
// --histories. The starter and RunCommand share them.
func BindFlags(fs *pflag.FlagSet) {
	fs.String("query", "", `visibility query selecting the runs (default: the open runs of the task queue, ExecutionStatus="Running")`)
	fs.Int("limit", DefaultLimit, "replay at most this many runs, newest first")
	fs.Bool("closed", false, "also replay recently closed runs (newest first, up to --limit)")
	fs.StringSlice("histories", nil, "replay these recorded JSON histories (files or directories of *.json) instead of runs on the server; no server needed")
	fs.Bool("json", false, `print {"query", "results": [{"workflow_id", "run_id", "workflow_type", "file", "ok", "error", "not_this_binary"}], "truncated"} instead of lines`)
}

// Report is what check-replay prints with --json.
type Report struct {
	// Query is the visibility query that selected the runs ("" for files).
	Query   string   `json:"query,omitempty"`
	Results []Result `json:"results"`
	// Truncated is true when more runs matched than --limit.
	Truncated bool `json:"truncated"`
}

// WantsServer reports whether the command line parsed into fs replays runs from a server
// (no --histories), so a caller dials Temporal only then.
func WantsServer(fs *pflag.FlagSet) bool { return !fs.Changed("histories") }

// ValidateFlags checks a parsed check-replay command line (fs, positional args) without
// running it, so a caller can refuse a mistake before it dials a server; the error wraps
// ErrUsage.
func ValidateFlags(fs *pflag.FlagSet, args []string) error {
	if limit, _ := fs.GetInt("limit"); limit < 1 {
		return fmt.Errorf("%w: --limit must be at least 1, got %d", ErrUsage, limit)
	}
	if !WantsServer(fs) {
		if fs.Changed("query") || fs.Changed("closed") || fs.Changed("limit") {
			return fmt.Errorf("%w: --histories replays files; --query, --closed and --limit select runs on a server", ErrUsage)
		}
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("%w: check-replay takes no arguments, got %q (history files go after --histories)", ErrUsage, args)
	}
	return nil
}

// RunFlags runs the check-replay command whose flags (BindFlags) fs has parsed: with
// --histories it replays the files (args are further paths), else the runs the flags select
// from c's namespace. It prints one line per run and a summary to stdout and returns an
// error wrapping ErrDiverged when any run fails to replay.
func RunFlags(ctx context.Context, fs *pflag.FlagSet, args []string, c client.Client, register func(workflows.Registry), stdout io.Writer, opts ...Option) error {
	if err := ValidateFlags(fs, args); err != nil {
		return err
	}
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	o.Query, _ = fs.GetString("query")
	o.Limit, _ = fs.GetInt("limit")
	o.Closed, _ = fs.GetBool("closed")
	asJSON, _ := fs.GetBool("json")
	var rep Report
	if !WantsServer(fs) {
		paths, _ := fs.GetStringSlice("histories")
		results, err := Files(append(paths, args...), register, o)
		if err != nil {
			return err
		}
		rep.Results = results
	} else {
		results, truncated, err := check(ctx, c, register, o)
		if err != nil {
			return err
		}
		rep = Report{Query: o.query(), Results: results, Truncated: truncated}
	}
	if asJSON {
		if rep.Results == nil {
			rep.Results = []Result{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		return failures(rep.Results)
	}
	if len(rep.Results) == 0 {
		fmt.Fprintf(stdout, "no runs match %s\n", rep.Query)
		return nil
	}
	err := Print(stdout, rep.Results)
	if rep.Truncated {
		fmt.Fprintf(stdout, "stopped at --limit %d: more runs match %s\n", o.limit(), rep.Query)
	}
	return err
}

// RunCommand is the check-replay command for any binary that holds workflows (the starter,
// a custom worker): it parses argv (--query Q --limit N --closed --histories PATH...) and
// runs it as RunFlags does. c may be nil when only --histories files are replayed. Pass
// WithStorage (the workers' External Storage) so offloaded payloads of live runs replay,
// and WithTaskQueue to narrow the default query to one task queue.
func RunCommand(ctx context.Context, argv []string, c client.Client, register func(workflows.Registry), stdout io.Writer, opts ...Option) error {
	fs := pflag.NewFlagSet("check-replay", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindFlags(fs)
	if err := fs.Parse(argv); err != nil {
		return fmt.Errorf("%w: check-replay: %v", ErrUsage, err)
	}
	return RunFlags(ctx, fs, fs.Args(), c, register, stdout, opts...)
}
