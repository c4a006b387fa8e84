// Command starter is the command-line client of Nexo on Temporal: it starts runs, shows
// their run records, lists and follows them, and sends resumes and approvals. It talks to
// Temporal only (through package runs), never to a database.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/internal/cli"
	"github.com/nexo-temporal/nexo/internal/suggest"
)

// command is one subcommand.
type command struct {
	name    string
	args    string // usage of positional arguments
	summary string
	flags   func(fs *pflag.FlagSet)
	run     func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error
	// offline: the command reads no config and dials no Temporal, so it has none of
	// their flags (which would only mislead in its --help).
	offline bool
	// subs are subcommands with flags of their own, named "<command> <sub>": when the
	// first argument names one, it runs instead (so `sandbox build-image --help`, which
	// dials nothing, lists only its own flags).
	subs []*command
}

// sub returns c's subcommand named by argv's first argument, if any.
func (c *command) sub(argv []string) *command {
	if len(argv) == 0 {
		return nil
	}
	for _, s := range c.subs {
		if s.name == c.name+" "+argv[0] {
			return s
		}
	}
	return nil
}

// usageError is a mistake in the command line: exit code 2 and the command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// unknownSubcommand is the usage error for a subcommand not in known: the one meant, if
// it is a plausible typo, else the list.
func unknownSubcommand(what, sub string, known ...string) error {
	if m := suggest.Nearest(sub, known); m != "" {
		return usagef("unknown %s %q (did you mean %q?)", what, sub, m)
	}
	return usagef("unknown %s %q (want %s or %s)", what, sub, strings.Join(known[:len(known)-1], ", "), known[len(known)-1])
}

func commands() []*command {
	return []*command{
		runCmd(), agentCmd(), sessionCmd(), showCmd(), listCmd(), logsCmd(), resumeCmd(), approveCmd(), denyCmd(), answerCmd(), approvalsCmd(),
		artifactsCmd(), artifactCmd(), cancelCmd(), rerunCmd(), forkCmd(), workflowsCmd(), doctorCmd(),
		sandboxCmd(), storeCmd(), skillCmd(), workerCmd(), mcpCmd(), scheduleCmd(), serveCmd(), checkReplayCmd(), usageCmd(), notificationsCmd(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code: 0 ok, 1 failed, 2 usage.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(argv) == 0 || argv[0] == "help" || argv[0] == "-h" || argv[0] == "--help" {
		if len(argv) > 1 {
			for _, c := range cmds {
				if c.name == argv[1] {
					if s := c.sub(argv[2:]); s != nil {
						c = s
					}
					fs := newFlagSet(c)
					fs.SetOutput(stdout)
					printUsage(stdout, c, fs)
					return 0
				}
			}
		}
		printOverview(stdout, cmds)
		if len(argv) == 0 {
			return 2
		}
		return 0
	}
	if argv[0] == "--version" {
		fmt.Fprintln(stdout, "starter", cli.Version())
		return 0
	}
	var cmd *command
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		names = append(names, c.name)
		if c.name == argv[0] {
			cmd = c
		}
	}
	if cmd == nil {
		msg := fmt.Sprintf("unknown command %q", argv[0])
		if name, ok := strings.CutPrefix(argv[0], "-"); ok {
			msg = fmt.Sprintf("unknown flag %s (a command comes first)", argv[0])
			if m := suggest.Nearest(strings.TrimPrefix(name, "-"), []string{"version", "help"}); m != "" {
				msg = fmt.Sprintf("unknown flag %s (did you mean --%s?)", argv[0], m)
			}
		} else if m := suggest.Nearest(argv[0], names); m != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", m)
		}
		fmt.Fprintf(stderr, "starter: %s\n%s\n", msg, overviewLine)
		return 2
	}
	if s := cmd.sub(argv[1:]); s != nil {
		cmd, argv = s, argv[1:]
	}
	fs := newFlagSet(cmd)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(argv[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(stdout)
			printUsage(stdout, cmd, fs)
			return 0
		}
		fmt.Fprintf(stderr, "starter %s: %v\n%s\n", cmd.name, cli.FlagError(fs, err), usageLine(cmd))
		return 2
	}
	e := &env{stdout: stdout, stderr: stderr, fs: fs}
	defer e.close()
	err := cmd.run(ctx, e, fs, fs.Args())
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "starter %s: %v\n%s\n", cmd.name, err, usageLine(cmd))
		return 2
	default:
		fmt.Fprintf(stderr, "starter %s: %v\n", cmd.name, err)
		return 1
	}
}

func newFlagSet(c *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SortFlags = false
	if c.flags != nil {
		c.flags(fs)
	}
	if !c.offline {
		bindCommonFlags(fs)
	}
	return fs
}

// overviewLine is what a usage error that names no command prints: the one usage line.
const overviewLine = "Usage: starter <command> [arguments] [flags]   (starter --help lists the commands)"

func printOverview(w io.Writer, cmds []*command) {
	fmt.Fprintln(w, "starter: start, inspect and approve Nexo runs on Temporal.")
	fmt.Fprintln(w, "\nUsage: starter <command> [arguments] [flags]\n\nCommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'starter <command> --help' for a command's arguments and flags.")
	fmt.Fprintln(w, "Run 'starter --version' for the version.")
}

// synopsis is a command's usage: `starter run <workflow> [flags]`.
func synopsis(c *command) string {
	s := "starter " + c.name
	if c.args != "" {
		s += " " + c.args
	}
	return s + " [flags]"
}

// usageLine is what a usage error prints after it: the command's own usage line only,
// not its whole help.
func usageLine(c *command) string {
	return fmt.Sprintf("Usage: %s   (starter %s --help lists the flags)", synopsis(c), c.name)
}

func printUsage(w io.Writer, c *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", synopsis(c), c.summary)
	fmt.Fprint(w, indent(fs.FlagUsages()))
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + strings.TrimLeft(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}
