// Package docker is the Docker tier of the sandbox: one hardened container per run, reached
// through the Docker Engine API. Files move through the archive API (tar, binary-safe),
// commands through the exec API, and every path is guarded to the workspace inside the
// container, symbolic links included.
//
// Ownership: a run owns its container. Activities of the run call Manager.Ensure, which
// finds the run's container (by label) or creates it, so a retried activity reuses what an
// earlier attempt made; the handle an activity gets is cheap and borrowed (Close releases
// the handle, not the container). The run removes the container when it ends
// (Manager.Remove or Sandbox.Remove), and Reap removes what a killed worker left behind.
// While a run is suspended for long, ArchiveWorkspace and RestoreWorkspace move its whole
// workspace to the artifact store and back into a fresh container.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/client"
)

// Labels every container (and its workspace volume) of this platform carries. The run id
// is the authority for finding a run's container; the name is derived from it only to make
// a create race collide.
const (
	// LabelManaged marks what the platform created and Reap may remove ("true").
	LabelManaged = "nexo.managed"
	// LabelRun holds the run (workflow) id that owns the container.
	LabelRun = "nexo.run"
	// LabelWorker holds the id of the worker that created the container.
	LabelWorker = "nexo.worker"
	// LabelScope holds the deployment the container belongs to (the Temporal address and
	// namespace): a reaper only removes containers of its own scope, so two platforms on
	// one Docker host (or a test suite beside a dev worker) never reap each other's.
	LabelScope = "nexo.scope"
	// LabelWorkdir holds the workspace directory inside the container, so a handle to an
	// existing container needs no options to find its workspace.
	LabelWorkdir = "nexo.workdir"
	// LabelUser holds the user commands run as ("" for root), for the owner of the files
	// Write creates.
	LabelUser = "nexo.user"
)

// Sentinel errors of the Docker tier. The tier also returns the sandbox package's
// (sandbox.ErrEscape, ErrNotFound, ErrClosed), wrapped with the operation and path.
var (
	// ErrImageNotFound: the sandbox image is not on the Docker host. No registry may be
	// reachable, so a retry will not help: classify it as non-retryable. The error
	// (an *ImageNotFoundError) names the image and how to get it.
	ErrImageNotFound = errors.New("sandbox image not found")
	// ErrContainerGone: the run's container was removed (by the reaper, an operator, or
	// Remove) under a live handle. Call Manager.Ensure again for a fresh one.
	ErrContainerGone = errors.New("sandbox container is gone")
	// ErrInvalidOptions: Options failed validation; the message names the field.
	ErrInvalidOptions = errors.New("invalid docker sandbox options")
)

// ImageNotFoundError says which image is missing and what to do about it.
type ImageNotFoundError struct {
	Image string
}

func (e *ImageNotFoundError) Error() string {
	if e.Image == DefaultImage {
		return fmt.Sprintf("sandbox image %s not found on the Docker host: build it with "+
			"`starter sandbox build-image` (no registry is needed)", e.Image)
	}
	return fmt.Sprintf("sandbox image %s not found on the Docker host: pull or load it "+
		"(docker pull / docker load), or use the default image %s, which "+
		"`starter sandbox build-image` builds locally", e.Image, DefaultImage)
}

// Is makes errors.Is(err, ErrImageNotFound) hold.
func (e *ImageNotFoundError) Is(target error) bool { return target == ErrImageNotFound }

// BindSourceError: the host path of a bind does not exist. Docker would create it (empty,
// owned by root) for a legacy bind; this tier refuses instead. Retrying cannot help, so it
// is an invalid option (errors.Is ErrInvalidOptions).
type BindSourceError struct {
	Field string // "ro_binds" or "rw_binds"
	Bind  string // as configured, "host:container"
	Host  string // the missing host path
}

func (e *BindSourceError) Error() string {
	return fmt.Sprintf("%s %q: host path %s does not exist on the Docker host; create it, or fix or remove the bind",
		e.Field, e.Bind, e.Host)
}

// Is makes errors.Is(err, ErrInvalidOptions) hold.
func (e *BindSourceError) Is(target error) bool { return target == ErrInvalidOptions }

// Client is the part of the Docker Engine API client (*client.Client from
// github.com/moby/moby/client) this package uses, so tests can substitute a fake.
// Implementations must be safe for concurrent use.
type Client interface {
	// Containers: Ensure, Remove, Reap.
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerInspect(ctx context.Context, containerID string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, containerID string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerRemove(ctx context.Context, containerID string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	// Warm pools: a run claims a pooled container by renaming it.
	ContainerRename(ctx context.Context, containerID string, options client.ContainerRenameOptions) (client.ContainerRenameResult, error)

	// Files: Read, Write, Stat, the path guard, ArchiveWorkspace, RestoreWorkspace.
	ContainerStatPath(ctx context.Context, containerID string, options client.ContainerStatPathOptions) (client.ContainerStatPathResult, error)
	CopyFromContainer(ctx context.Context, containerID string, options client.CopyFromContainerOptions) (client.CopyFromContainerResult, error)
	CopyToContainer(ctx context.Context, containerID string, options client.CopyToContainerOptions) (client.CopyToContainerResult, error)

	// Commands: Shell, Glob.
	ExecCreate(ctx context.Context, containerID string, options client.ExecCreateOptions) (client.ExecCreateResult, error)
	ExecAttach(ctx context.Context, execID string, options client.ExecAttachOptions) (client.ExecAttachResult, error)
	ExecInspect(ctx context.Context, execID string, options client.ExecInspectOptions) (client.ExecInspectResult, error)

	// Images: Ensure (is the image there, which user does it run as), BuildImage.
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)

	// The engine's runtimes: Check (Options.Runtime).
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)

	// Workspace volumes left behind: Reap.
	VolumeList(ctx context.Context, options client.VolumeListOptions) (client.VolumeListResult, error)
	VolumeRemove(ctx context.Context, volumeID string, options client.VolumeRemoveOptions) (client.VolumeRemoveResult, error)
}

var _ Client = (*client.Client)(nil)

// NewClient connects to the Docker engine named by the environment (DOCKER_HOST, or the
// local socket), negotiating the API version with it, and checks that it answers.
func NewClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("connect to docker: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("connect to docker at %s: %w", cli.DaemonHost(), err)
	}
	return cli, nil
}
