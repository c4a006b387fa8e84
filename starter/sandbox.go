package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// sandboxCmd manages the Docker sandbox: today, building its default image.
func sandboxCmd() *command {
	return &command{
		name: "sandbox", args: "build-image [--tag T]",
		summary: "Build the Docker sandbox image from the host's static busybox (no registry needed).",
		flags: func(fs *pflag.FlagSet) {
			fs.String("tag", docker.DefaultImage, "tag of the image to build")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) != 1 || args[0] != "build-image" {
				return usagef("want the subcommand build-image, got %q", args)
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
		},
	}
}
