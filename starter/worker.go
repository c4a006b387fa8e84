package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/starter/scaffold"
)

// workerCmd scaffolds a user's own worker as a Go module outside this repository. It
// touches the file system (and, with --replace, runs go mod tidy), never Temporal.
func workerCmd() *command {
	return &command{
		name: "worker", args: "new <dir> --module <path> [--replace <nexo checkout>]", offline: true,
		summary: "Create a Go module of your own worker (platform.Main, a workflow, its replay test, a fixture recorder, a README).",
		flags: func(fs *pflag.FlagSet) {
			fs.String("module", "", "new: the module path of the worker (such as example.com/acme)")
			fs.String("replace", "", "new: a checkout of "+scaffold.NexoModule+" to build against (writes the replace line and runs go mod tidy)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: new <dir> --module <path>")
			}
			if args[0] != "new" {
				return unknownSubcommand("subcommand", args[0], "new")
			}
			if len(args) != 2 {
				return usagef("worker new takes one directory, got %q", args[1:])
			}
			mod, _ := fs.GetString("module")
			replace, _ := fs.GetString("replace")
			return newWorker(ctx, e, args[1], mod, replace)
		},
	}
}

func newWorker(ctx context.Context, e *env, dir, mod, replace string) error {
	if !e.fs.Changed("module") {
		return usagef("--module is required: the module path of your worker (such as example.com/acme)")
	}
	if e.fs.Changed("replace") && strings.TrimSpace(replace) == "" {
		return usagef("--replace is empty: give the root of your checkout of %s", scaffold.NexoModule)
	}
	written, err := scaffold.Create(dir, scaffold.Options{Module: mod, Replace: replace})
	if errors.Is(err, scaffold.ErrBadModule) || errors.Is(err, scaffold.ErrBadReplace) || errors.Is(err, scaffold.ErrDirNotEmpty) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "created module %s in %s:\n", mod, dir)
	for _, f := range written {
		fmt.Fprintf(e.stdout, "  %s\n", f)
	}
	if replace == "" {
		fmt.Fprintf(e.stdout, "next: %s is not published yet, so point go.mod at your checkout of it and fill in go.sum:\n", scaffold.NexoModule)
		fmt.Fprintf(e.stdout, "  cd %s && go mod edit -replace %s=/path/to/nexo && go mod tidy\n", dir, scaffold.NexoModule)
		fmt.Fprintln(e.stdout, "then see its README.md: go test ./..., go run . --dev --config nexo.yaml")
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(e.stdout, "next: go.sum is not filled in (no go command on PATH): cd %s && go mod tidy\n", dir)
		return nil
	}
	// go.sum: the module's dependencies (Nexo's, through the replace) are resolved by the
	// go command itself, from the module cache or GOPROXY, as `go mod tidy` by hand would.
	fmt.Fprintf(e.stderr, "running go mod tidy in %s …\n", dir)
	cmd := exec.CommandContext(ctx, goBin, "mod", "tidy")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %v\n%s\nthe module is written; fix the above and run go mod tidy there", dir, err, strings.TrimSpace(out.String()))
	}
	abs, _ := filepath.Abs(dir)
	fmt.Fprintf(e.stdout, "go.mod replaces %s with %s; go.sum filled in by go mod tidy\n", scaffold.NexoModule, mustAbs(replace))
	fmt.Fprintf(e.stdout, "next: cd %s && go test ./... && go run . --dev --config nexo.yaml (see README.md)\n", abs)
	return nil
}

func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
