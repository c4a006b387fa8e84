// Command bench measures the embedded dev server (package devserver) against the official
// `temporal server start-dev`, with the same raw-SDK workloads against each in the same run:
//
//	GOTOOLCHAIN=go1.27.3 go run ./bench devserver [--rounds 5] [--only ours|start-dev]
//
// Both servers run as child processes of the bench on free loopback ports with a SQLite file in
// a temporary directory, so their resident memory is comparable: ours is the bench binary
// re-executed as `bench serve-ours`, which hosts devserver.Start and nothing else. The bench
// process holds the clients and one worker per server (each on its own task queue).
//
// Rounds interleave the servers (ours first in even rounds, start-dev first in odd ones), so a
// change in the machine's load during the run falls on both. Warm-up runs are not measured.
// The report is a Markdown table on stdout; progress goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  bench devserver [flags]   compare the embedded dev server with temporal server start-dev
                            (bench devserver --help lists the flags; --only ours needs no CLI)
  bench chaos [flags]       runs in flight while workers are SIGKILLed at random; counts runs
                            lost or stuck, checkpoints and tool side effects repeated, and
                            what is left behind (--server embedded|cluster, --runs, --kills)
  bench scale [flags]       agent runs per second with 1, 2 and 3 workers on the cluster, and
                            each worker's share of the activities
  bench tracing [flags]     what exporting traces costs an agent run: wall time and worker
                            CPU per run with tracing off vs on (OTLP/HTTP), embedded server
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return // the flag set printed the usage
	}
	if errors.Is(err, errUsage) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// errUsage means the command line named no known command.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "devserver":
		return runDevserver(ctx, args[1:])
	case "chaos":
		return runChaos(ctx, args[1:])
	case "scale":
		return runScale(ctx, args[1:])
	case "tracing":
		return runTracing(ctx, args[1:])
	case serveOursCommand:
		return serveOurs(ctx, args[1:])
	default:
		return errUsage
	}
}
