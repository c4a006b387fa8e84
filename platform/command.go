package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/internal/cli"
	"github.com/nexo-temporal/nexo/internal/secrets"
	"github.com/nexo-temporal/nexo/telemetry"
)

// Main is a worker binary's whole main: it runs Command{Name: the program's name,
// Options: options} with the process's arguments until SIGINT or SIGTERM, and exits with
// its exit code.
func Main(options ...Option) {
	Command{Name: filepath.Base(os.Args[0]), Options: options}.Main()
}

// Command is the command line of a worker binary: flags, config file (--config,
// NEXO_CONFIG, ./nexo.yaml), NEXO_* environment, --dev and --version, exactly as the
// shipped `worker` reads them.
type Command struct {
	// Name is the program's name in messages ("worker: ...") and --version.
	Name string
	// Options build the platform. --dev needs WithDevServer among them (dev.Server()); without
	// --dev it is not started.
	Options []Option
}

// Main runs the command with the process's arguments until SIGINT or SIGTERM and exits
// with its exit code.
func (c Command) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := c.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(c.ExitCode(err, os.Stderr))
}

// ExitCode reports err on stderr and returns the exit code: 0 ok (or --help), 1 failed,
// 2 usage.
func (c Command) ExitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n%s\n", c.Name, err, c.UsageLine())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
	return 1
}

// UsageLine is what a usage error prints after it: the one usage line, not the whole help.
func (c Command) UsageLine() string {
	return fmt.Sprintf("Usage: %s [--dev] [flags] | %s --sandbox-host [--pool NAME] [flags] | %s check-replay [flags]   (--help lists the flags)", c.Name, c.Name, c.Name)
}

// usageError is a mistake in the command line: exit code 2 and the usage line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// Run parses argv (or runs the check-replay subcommand when argv starts with it), loads the config, takes the configured secrets out of the environment
// and runs the platform until ctx ends. --help prints the flags and returns pflag.ErrHelp.
func (c Command) Run(ctx context.Context, argv []string, stdout, stderr io.Writer) error {
	if len(argv) > 0 && argv[0] == checkReplayCommand {
		return c.checkReplay(ctx, argv[1:], stdout, stderr)
	}
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // ExitCode prints the error and the usage line, not the whole help
	dev := fs.Bool("dev", false, "start an embedded Temporal server (SQLite under .nexo/, Web UI), run the worker against it, and serve the HTTP API and web page on gateway.addr")
	showVersion := fs.Bool("version", false, "print the version and exit")
	sandboxHost := fs.Bool("sandbox-host", false, "serve sandboxes only: poll this host's queue with the sandbox activities (no workflows, no model or MCP calls, no listening port); with --pool, claim the runs of agents whose sandbox names the pool")
	pool := fs.String("pool", "", "make this worker's host one of the sandbox hosts of pool NAME: runs of agents with sandbox {pool: NAME} claim it (lowercase letters, digits, - and _)")
	config.BindFlags(fs)
	if err := fs.Parse(argv); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: %s [--dev] [flags]\n       %s --sandbox-host [--pool NAME] [flags]\n\nRuns Nexo's workflows and activities on a Temporal task queue; with --sandbox-host, only\nthe sandboxes of runs (see \"Sandbox hosts and pools\" in the README).\n\nFlags:\n", c.Name, c.Name)
			fmt.Fprint(stdout, fs.FlagUsages())
			return err
		}
		return &usageError{cli.FlagError(fs, err)}
	}
	if *showVersion {
		fmt.Fprintln(stdout, c.Name, cli.Version())
		return nil
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("%s takes no arguments, got %q", c.Name, fs.Args())}
	}
	if *pool != "" {
		if err := api.ValidatePoolName(*pool); err != nil {
			return &usageError{fmt.Errorf("--pool: %w", err)}
		}
	}
	if *sandboxHost && *dev {
		return &usageError{errors.New("--sandbox-host and --dev: a sandbox host runs no Temporal server and no workflows; start `worker --dev` elsewhere and point the host at it (--address)")}
	}
	opts := append([]Option{}, c.Options...)
	if *sandboxHost {
		opts = append(opts, SandboxHost())
	}
	if *pool != "" {
		opts = append(opts, Pool(*pool))
	}
	if *dev && !hasDevServer(opts) {
		return &usageError{errors.New("--dev needs the embedded Temporal server, which this binary is built without (add dev.Server() from github.com/nexo-temporal/nexo/platform/dev to its options)")}
	}
	if !*dev {
		opts = append(opts, WithDevServer(nil))
	}
	cfg, err := config.Load(config.LoadOptions{Flags: fs})
	if err != nil {
		return err
	}
	// Before anything starts: from here on the secrets live in memory only, so a command
	// the local sandbox runs cannot read them from this process's environment (this may
	// re-execute the worker in place; see internal/secrets).
	env, err := secrets.Take(slices.Concat(cfg.SecretEnvNames(), connect.ProfileSecretEnvNames, telemetry.SecretEnvNames))
	if err != nil {
		return err
	}
	p, err := New(cfg, append(opts, Output(stdout, stderr), LookupEnv(env.LookupEnv))...)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

func hasDevServer(opts []Option) bool {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o.startDev != nil
}
