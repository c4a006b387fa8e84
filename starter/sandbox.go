package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// sandboxCmd builds the Docker sandbox's default image, and reads a run's workspace at any
// of its tool calls from the snapshots in the artifact store (no worker needed).
func sandboxCmd() *command {
	return &command{
		name: "sandbox", args: "build-image [--tag T] | files <run> [--at CALL] | cat <run> <path> [--at CALL] | diff <run> --from CALL [--to CALL]",
		summary: "Build the Docker sandbox image; list, print and diff a run's workspace files at any tool call.",
		subs:    []*command{buildImageCmd()},
		flags: func(fs *pflag.FlagSet) {
			fs.String("at", "", "files, cat: the workspace as this tool call found it (before it ran); default: now, or as the run ended")
			fs.String("from", "", "diff: the workspace as this tool call found it")
			fs.String("to", "", "diff: the workspace as this tool call found it (default: now, or as the run ended)")
			fs.Bool("json", false, "files, diff: print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: build-image, files, cat or diff")
			}
			switch args[0] {
			case "build-image":
				// Reached only when a flag came first (starter sandbox --json build-image):
				// its own flags belong after it.
				return usagef("build-image comes first: starter sandbox build-image [--tag T]")
			case "files":
				return sandboxFiles(ctx, e, fs, args[1:])
			case "cat":
				return sandboxCat(ctx, e, fs, args[1:])
			case "diff":
				return sandboxDiff(ctx, e, fs, args[1:])
			}
			return unknownSubcommand("sandbox subcommand", args[0], "build-image", "files", "cat", "diff")
		},
	}
}

// buildImageCmd is `sandbox build-image`: it talks to the Docker engine only, so it is
// offline (no config, no Temporal flags).
func buildImageCmd() *command {
	return &command{
		name: "sandbox build-image", offline: true,
		summary: "Build the Docker sandbox image (FROM scratch, a static busybox) on the local Docker engine (DOCKER_HOST or the local socket).",
		flags: func(fs *pflag.FlagSet) {
			fs.String("tag", docker.DefaultImage, "tag of the image to build")
		},
		run: buildImage,
	}
}

func buildImage(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	if len(args) != 0 {
		return usagef("build-image takes no arguments, got %q", args)
	}
	tag, _ := fs.GetString("tag")
	if tag == "" {
		return usagef("--tag is empty")
	}
	// The engine is the one the docker CLI would use: DOCKER_HOST or the local socket.
	cli, err := docker.NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	fmt.Fprintf(e.stderr, "building %s (FROM scratch, static busybox, user nexo uid 1000, /workspace)...\n", tag)
	if err := docker.BuildImage(ctx, cli, tag); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "built image %s\n", tag)
	if tag != docker.DefaultImage {
		fmt.Fprintf(e.stdout, "use it with sandbox: {type: docker, image: %s}\n", tag)
	}
	return nil
}

// workspaceAt reads the workspace of run id as call at found it ("" for now).
func (e *env) workspaceAt(ctx context.Context, id, at string) (runs.Workspace, error) {
	rec, err := e.record(ctx, id)
	if err != nil {
		return runs.Workspace{}, err
	}
	st, err := e.artifactStore(ctx)
	if err != nil {
		return runs.Workspace{}, err
	}
	return runs.ReadWorkspace(ctx, st, rec, at)
}

// workspaceError makes a bad path a usage error (exit 2); others stay failures.
func workspaceError(err error) error {
	var bp *runs.BadPathError
	if errors.As(err, &bp) {
		return usagef("%v", err)
	}
	return err
}

func sandboxFiles(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	if err := needArgs(args, 1, "a run id"); err != nil {
		return err
	}
	at, _ := fs.GetString("at")
	w, err := e.workspaceAt(ctx, args[0], at)
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return e.printJSON(map[string]any{"run": w.RunID, "at": w.At, "snapshot": w.Ref, "files": w.Files()})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tSHA256")
	for _, f := range w.Files() {
		switch f.Type {
		case "dir":
			fmt.Fprintf(tw, "%s/\t-\t-\n", f.Path)
		case "link":
			fmt.Fprintf(tw, "%s -> %s\t-\t-\n", f.Path, f.Link)
		default:
			fmt.Fprintf(tw, "%s\t%d\t%s\n", f.Path, f.Size, f.SHA256)
		}
	}
	return tw.Flush()
}

func sandboxCat(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	if err := needArgs(args, 2, "a run id and a path"); err != nil {
		return err
	}
	at, _ := fs.GetString("at")
	w, err := e.workspaceAt(ctx, args[0], at)
	if err != nil {
		return err
	}
	st, err := e.artifactStore(ctx)
	if err != nil {
		return err
	}
	b, err := w.ReadFile(ctx, st, args[1])
	if err != nil {
		return workspaceError(err)
	}
	_, err = e.stdout.Write(b)
	return err
}

func sandboxDiff(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	if err := needArgs(args, 1, "a run id"); err != nil {
		return err
	}
	from, _ := fs.GetString("from")
	to, _ := fs.GetString("to")
	if from == "" {
		return usagef("diff needs --from CALL (the call ids are in `starter logs %s`)", args[0])
	}
	a, err := e.workspaceAt(ctx, args[0], from)
	if err != nil {
		return err
	}
	b, err := e.workspaceAt(ctx, args[0], to)
	if err != nil {
		return err
	}
	st, err := e.artifactStore(ctx)
	if err != nil {
		return err
	}
	changes, err := runs.Diff(ctx, st, a, b)
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return e.printJSON(map[string]any{"run": a.RunID, "from": from, "to": to, "changes": changes})
	}
	if len(changes) == 0 {
		fmt.Fprintln(e.stderr, "no changes")
		return nil
	}
	for _, c := range changes {
		fmt.Fprintf(e.stdout, "%s %s\n", c.Change, c.Path)
		switch {
		case c.Diff != "":
			fmt.Fprint(e.stdout, c.Diff)
		case c.Binary:
			fmt.Fprintln(e.stdout, "  (binary or large file: not shown)")
		}
	}
	return nil
}
