package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/moby/moby/client"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Sandbox is a handle to a run's container. It implements sandbox.Sandbox: paths are
// relative to the workspace (Options.Workdir, an absolute path inside it is accepted),
// files move through the archive API and commands run through the exec API.
//
// A handle is cheap and borrowed: Close releases it (killing the commands it still runs)
// but leaves the container, which belongs to the run; Remove, or Manager.Remove, removes
// the container with its workspace. Safe for concurrent use.
type Sandbox struct {
	m     *Manager
	cli   Client
	id    string // container id
	name  string
	runID string
	set   settings   // workdir is the workspace root as the container spells it
	pool  *shellPool // the container's command servers, shared by its handles

	// MaxOutput caps, in bytes, what Shell keeps of stdout and of stderr each (the tail);
	// <= 0 means sandbox.DefaultMaxOutput.
	MaxOutput int

	closed atomic.Bool
	mu     sync.Mutex       // guards groups and orders Close against a command starting
	groups map[int]struct{} // process groups (in the container) of running commands

	ownerMu    sync.Mutex // guards the container user's ids, found on first Write
	ownerKnown bool
	uid, gid   int
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID returns the container's id.
func (s *Sandbox) ID() string { return s.id }

// Name returns the container's name.
func (s *Sandbox) Name() string { return s.name }

// Workdir returns the workspace directory inside the container.
func (s *Sandbox) Workdir() string { return s.set.workdir }

// Instructions tells the model where it works and what the container allows.
func (s *Sandbox) Instructions() string {
	var b strings.Builder
	b.WriteString("You work inside a Docker container")
	if s.set.image != "" {
		fmt.Fprintf(&b, " (image %s)", s.set.image)
	}
	fmt.Fprintf(&b, ". Your workspace is %s: use the file tools with paths relative to it "+
		"(absolute paths must lie inside it); paths that leave it, including through "+
		"symbolic links, are refused. ", s.set.workdir)
	switch s.set.network {
	case "none":
		b.WriteString("There is no network: downloads and package installs will fail. ")
	default:
		fmt.Fprintf(&b, "The container is on the Docker network %q. ", s.set.network)
	}
	if s.set.readonly {
		fmt.Fprintf(&b, "The root file system is read-only: only %s and /tmp are writable. ", s.set.workdir)
	}
	b.WriteString("Shell commands run with sh -c in the workspace and are killed, with " +
		"anything they started, when they time out or finish, so do not leave servers " +
		"running in the background; only the end of long output is kept.")
	return b.String()
}

// Close kills the commands this handle still runs and refuses further calls with
// sandbox.ErrClosed. The container stays: it belongs to the run (see Remove). Closing
// twice is not an error.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	groups := make([]int, 0, len(s.groups))
	for g := range s.groups {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	var errs []error
	for _, g := range groups {
		if err := s.killGroup(ctx, g); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sandbox %s: %w", s.name, err)
	}
	return nil
}

// Remove closes the handle and removes the container with its workspace volume. The
// workspace is lost: archive it first if the run may continue. Removing a container
// that is already gone is not an error.
func (s *Sandbox) Remove(ctx context.Context) error {
	_ = s.Close(ctx) // the container and its processes are about to go anyway
	s.m.dropPool(s.id)
	if err := removeContainer(ctx, s.cli, s.id); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", s.name, err)
	}
	return nil
}

// check fails when ctx is done or the handle is closed.
func (s *Sandbox) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return sandbox.ErrClosed
	}
	return nil
}

// apiError turns "no such container" into ErrContainerGone; other errors pass.
func (s *Sandbox) apiError(err error) error {
	if err != nil && cerrdefs.IsNotFound(err) && strings.Contains(err.Error(), "No such container") {
		return fmt.Errorf("%w: container %s (%s)", ErrContainerGone, s.name, shortID(s.id))
	}
	return err
}

// checkWorkdir makes sure the workspace is a real directory (not a symbolic link), so
// the workspace root as spelled is also its physical path.
func (s *Sandbox) checkWorkdir(ctx context.Context) error {
	res, err := s.cli.ContainerStatPath(ctx, s.id, client.ContainerStatPathOptions{Path: s.set.workdir})
	st := res.Stat
	if err != nil {
		return fmt.Errorf("check workspace %s: %w", s.set.workdir, s.apiError(err))
	}
	if !st.Mode.IsDir() {
		return fmt.Errorf("check workspace %s: not a directory (mode %v, link to %q)", s.set.workdir, st.Mode, st.LinkTarget)
	}
	return nil
}

// InstructionsFor is what Instructions says of a container made with opts, without
// needing the container: the system prompt is built before any tool runs, and building it
// must not create the run's container on whichever worker happens to call the model.
func InstructionsFor(opts Options) string {
	set, err := opts.withDefaults()
	if err != nil {
		return ""
	}
	return (&Sandbox{set: set}).Instructions()
}
