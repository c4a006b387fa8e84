package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/internal/cli"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/replay"
)

// checkReplayCommand is the name of the deploy gate subcommand every worker built on the
// platform offers: `<worker> check-replay [flags]`.
const checkReplayCommand = "check-replay"

// checkReplay is the deploy gate of this binary: the histories of the server's open runs
// (or recorded histories with --histories) replayed against exactly the workflows this
// platform registers (the shipped ones and the user's), as `starter check-replay` does for
// the shipped set. A divergence is exit 1, a command-line mistake exit 2.
func (c Command) checkReplay(ctx context.Context, argv []string, stdout, stderr io.Writer) error {
	name := c.Name + " " + checkReplayCommand
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config.BindFlags(fs)
	replay.BindFlags(fs)
	if err := fs.Parse(argv); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: %s [--query Q] [--limit N] [--closed] [--histories PATH...] [--json]\n\n"+
				"Replays the open runs on the server (or recorded histories) against this binary's workflows;\n"+
				"exits 1 if any diverges.\n\nFlags:\n", name)
			fmt.Fprint(stdout, fs.FlagUsages())
			return err
		}
		return &usageError{cli.FlagError(fs, err)}
	}
	if err := replay.ValidateFlags(fs, fs.Args()); err != nil {
		return &usageError{errors.New(strings.TrimPrefix(err.Error(), replay.ErrUsage.Error()+": "))}
	}
	cfg, err := config.Load(config.LoadOptions{Flags: fs})
	if err != nil {
		return err
	}
	p, err := New(cfg, append(append([]Option{}, c.Options...), WithDevServer(nil))...)
	if err != nil {
		return err
	}
	if !replay.WantsServer(fs) {
		return replay.RunFlags(ctx, fs, fs.Args(), nil, p.RegisterWorkflows, stdout)
	}
	// The replayer reads offloaded payloads from the store the workers write, as the
	// client that fetched the histories does.
	store, err := artifacts.OpenWith(ctx, cfg.Artifacts.URL, artifacts.Options{CacheBytes: cfg.Artifacts.CacheBytes})
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tc, conn, err := connect.DialSettings(ctx, cfg, store, logger, p.opts.lookupEnv)
	if err != nil {
		return err
	}
	cfg.Temporal.Address, cfg.Temporal.Namespace = conn.Address, conn.Namespace // the profile may supply them
	defer tc.Close()
	return replay.RunFlags(ctx, fs, fs.Args(), tc, p.RegisterWorkflows, stdout,
		replay.WithTaskQueue(cfg.Temporal.TaskQueue),
		replay.WithStorage(payloads.ExternalStorage(store, cfg.Payloads.OffloadThreshold)))
}
