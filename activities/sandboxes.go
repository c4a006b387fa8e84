package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/bwrap"
	"github.com/nexo-temporal/nexo/sandbox/docker"
	"github.com/nexo-temporal/nexo/sandbox/egress"
)

// ErrSandboxUnavailable: the spec names a sandbox this worker cannot provide.
var ErrSandboxUnavailable = errors.New("sandbox type not available")

// Sandboxes turns a run's SandboxSpec into a live sandbox on this worker and keeps it for
// the run's later activities. A local sandbox without a Dir is a directory under Root
// owned by the run (removed on Release); one with a Dir belongs to the user and is never
// removed. Virtual sandboxes live in this process's memory: they do not survive a worker
// restart, which is why they are not the default for workflows.
type Sandboxes struct {
	root   string
	docker *docker.Manager
	// bwrap is the bwrap executable when bubblewrap sandboxes were probed and work here.
	bwrap string
	// egress is the worker's egress proxy and forwarder the executable sandboxes run as
	// its forwarder, when egress is enabled here.
	egress    *egress.Proxy
	forwarder string

	mu   sync.Mutex
	live map[string]sandbox.Sandbox
	// opening holds one lock per sandbox being created, so two first uses of the same
	// run's sandbox make it once while other runs' calls go on.
	opening map[string]*sync.Mutex
	// restoreVirtual, when set, fills a virtual sandbox made here from the run's last
	// snapshot: its files were in the memory of a worker process that ended (hostq.go).
	restoreVirtual func(ctx context.Context, runID string, v *sandbox.Virtual) error
	// restoreBase rebuilds a sandbox made anew here from a run's snapshot (snapshot.go).
	restoreBase func(ctx context.Context, sb sandbox.Sandbox, spec api.SandboxSpec, ref string) (api.RestoreManifestResult, error)
	// snaps is what this host knows of each run's last snapshot (snapshot.go), dropped
	// with the run's sandbox.
	snaps map[string]*snapState
}

// NewSandboxes returns the worker's sandbox registry with per-run workspaces under root.
func NewSandboxes(root string) (*Sandboxes, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolve workspace root %q: %w", root, err)
	}
	return &Sandboxes{root: abs, live: map[string]sandbox.Sandbox{}, opening: map[string]*sync.Mutex{}}, nil
}

func liveKey(runID string, spec api.SandboxSpec) string {
	return runID + "\x00" + spec.Type + "\x00" + spec.Dir
}

// WithDocker enables docker sandboxes on this worker.
func (s *Sandboxes) WithDocker(m *docker.Manager) *Sandboxes {
	s.docker = m
	return s
}

// WithBubblewrap enables bubblewrap sandboxes on this worker, run with the bwrap
// executable bin (which bwrap.Probe found working).
func (s *Sandboxes) WithBubblewrap(bin string) *Sandboxes {
	s.bwrap = bin
	return s
}

// WithEgress enables sandbox.egress on this worker's bubblewrap sandboxes: each gets a
// session of proxy, and runs forwarder (the worker's own executable) as its way out.
func (s *Sandboxes) WithEgress(proxy *egress.Proxy, forwarder string) *Sandboxes {
	s.egress, s.forwarder = proxy, forwarder
	return s
}

// DrainEgress returns what the commands of the run's sandbox asked of the egress proxy
// since the last drain (see egress.Session.Drain), waiting up to a second for requests
// still being answered. Nothing when the sandbox has no egress or no session here.
func (s *Sandboxes) DrainEgress(runID string, spec api.SandboxSpec) ([]api.EgressRecord, int) {
	if spec.Egress == nil || s.egress == nil {
		return nil, 0
	}
	sess := s.egress.Session(liveKey(runID, spec))
	if sess == nil {
		return nil, 0
	}
	return sess.Drain(time.Second)
}

// BubblewrapOptions turns a spec into the bubblewrap tier's options; a bad memory size is
// an error naming the field.
func BubblewrapOptions(spec api.SandboxSpec) (bwrap.Options, error) {
	opts := bwrap.Options{Env: spec.Env, Pids: spec.PidsLimit}
	if spec.Memory != "" {
		n, err := bwrap.ParseMemory(spec.Memory)
		if err != nil {
			return bwrap.Options{}, fmt.Errorf("memory: %w", err)
		}
		opts.Memory = n
	}
	return opts, nil
}

// ownsDir says whether the spec's workspace is a directory under the sandbox root that the
// run owns (made on first use, removed when the run ends): a local or bubblewrap sandbox
// without a Dir of the user's.
func ownsDir(spec api.SandboxSpec) bool {
	return (spec.Type == "" || spec.Type == api.SandboxLocal || spec.Type == api.SandboxBubblewrap) && spec.Dir == ""
}

// DockerOptions turns a spec into the Docker tier's options.
func DockerOptions(spec api.SandboxSpec) docker.Options {
	return docker.Options{Image: spec.Image, Workdir: spec.Workdir, Network: spec.Network, Memory: spec.Memory,
		CPUs: spec.CPUs, PidsLimit: spec.PidsLimit, User: spec.User, Env: spec.Env, ROBinds: spec.ROBinds,
		RWBinds: spec.RWBinds, ReadonlyRootfs: spec.ReadonlyRootfs, CapAdd: spec.CapAdd, Runtime: spec.Runtime}
}

// Get returns the run's sandbox, creating it on first use.
func (s *Sandboxes) Get(runID string, spec api.SandboxSpec) (sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return s.Open(ctx, runID, spec)
}

// Forget drops a cached sandbox whose container disappeared, so the next Open makes a
// fresh one.
func (s *Sandboxes) Forget(runID string, spec api.SandboxSpec) {
	s.mu.Lock()
	delete(s.live, liveKey(runID, spec))
	delete(s.snaps, liveKey(runID, spec))
	s.mu.Unlock()
}

// Open returns the run's sandbox, creating it on first use (a docker sandbox is created
// or found again by Ensure, which is idempotent).
func (s *Sandboxes) Open(ctx context.Context, runID string, spec api.SandboxSpec) (sandbox.Sandbox, error) {
	sb, _, err := s.OpenFrom(ctx, runID, spec, "")
	return sb, err
}

// OpenFrom is Open for a run whose last snapshot is base: a virtual sandbox or a per-run
// directory this host has to make anew is rebuilt from base before it is returned, and
// rebuilt says what that restore could not bring back (nil: nothing was rebuilt).
func (s *Sandboxes) OpenFrom(ctx context.Context, runID string, spec api.SandboxSpec, base string) (sb sandbox.Sandbox, rebuilt *api.RestoreManifestResult, err error) {
	if !usableRunID(runID) {
		return nil, nil, fmt.Errorf("sandbox for run %q: not a usable run id: %w", runID, ErrSandboxUnavailable)
	}
	key := liveKey(runID, spec)
	s.mu.Lock()
	if sb, ok := s.live[key]; ok {
		s.mu.Unlock()
		return sb, nil, nil
	}
	// Created under this run's own lock, not the registry's: making a container takes
	// seconds, and other runs' tool calls on this worker must not wait behind it.
	opening := s.opening[key]
	if opening == nil {
		opening = &sync.Mutex{}
		s.opening[key] = opening
	}
	s.mu.Unlock()
	opening.Lock()
	defer opening.Unlock()

	s.mu.Lock()
	sb, ok := s.live[key] // made while this call waited for the run's lock
	s.mu.Unlock()
	if ok {
		return sb, nil, nil
	}
	fresh := base != "" && s.restoreBase != nil && s.makesAnew(runID, spec)
	sb, err = s.create(ctx, runID, spec, fresh)
	if err != nil {
		return nil, nil, err
	}
	if fresh {
		res, err := s.restoreBase(ctx, sb, spec, base)
		if err != nil {
			_ = sb.Close(ctx)
			return nil, nil, fmt.Errorf("rebuild the %s sandbox of run %s from its snapshot: %w", specType(spec), runID, err)
		}
		rebuilt = &res
	}
	s.mu.Lock()
	s.live[key] = sb
	delete(s.opening, key) // later calls find it in live; a waiter still holds its lock
	s.mu.Unlock()
	return sb, rebuilt, nil
}

// makesAnew says whether opening the run's sandbox here makes it empty: a virtual sandbox
// not in this process, a per-run directory that does not exist.
func (s *Sandboxes) makesAnew(runID string, spec api.SandboxSpec) bool {
	switch spec.Type {
	case api.SandboxVirtual:
		return true
	case "", api.SandboxLocal, api.SandboxBubblewrap:
		if spec.Dir != "" {
			return false
		}
		_, err := os.Stat(filepath.Join(s.root, runID))
		return errors.Is(err, os.ErrNotExist)
	}
	return false
}

func specType(spec api.SandboxSpec) string {
	if spec.Type == "" {
		return api.SandboxLocal
	}
	return spec.Type
}

// usableRunID reports whether runID can name a workspace directory and a container.
func usableRunID(runID string) bool {
	return runID != "" && !strings.ContainsAny(runID, "/\\\x00") && runID != "." && runID != ".."
}

// create makes the sandbox spec describes for the run; rebuilding (the caller restores a
// snapshot into it) skips the legacy archive of a virtual sandbox.
func (s *Sandboxes) create(ctx context.Context, runID string, spec api.SandboxSpec, rebuilding bool) (sandbox.Sandbox, error) {
	var (
		sb  sandbox.Sandbox
		err error
	)
	switch spec.Type {
	case "", api.SandboxLocal:
		dir := spec.Dir
		if dir == "" {
			dir = filepath.Join(s.root, runID)
		}
		// A user's own directory may hold hard links planted to files outside it.
		sb, err = sandbox.NewLocal(dir, sandbox.LocalOptions{RefuseHardLinks: spec.Dir != ""})
	case api.SandboxBubblewrap:
		if s.bwrap == "" {
			return nil, fmt.Errorf("sandbox type bubblewrap for run %s: %w (bwrap did not run when this worker started; install bubblewrap and enable user namespaces)", runID, ErrSandboxUnavailable)
		}
		dir := spec.Dir
		if dir == "" {
			dir = filepath.Join(s.root, runID)
		}
		opts, oerr := BubblewrapOptions(spec)
		if oerr != nil {
			return nil, fmt.Errorf("sandbox type bubblewrap for run %s: %w", runID, oerr)
		}
		opts.Bwrap = s.bwrap
		opts.RefuseHardLinks = spec.Dir != ""
		if spec.Egress != nil {
			if s.egress == nil {
				return nil, fmt.Errorf("sandbox of run %s: egress: %w (this worker runs no egress proxy)", runID, ErrSandboxUnavailable)
			}
			sess, eerr := s.egress.Open(liveKey(runID, spec), *spec.Egress)
			if eerr != nil {
				return nil, fmt.Errorf("sandbox of run %s: %w: %w", runID, ErrSandboxUnavailable, eerr)
			}
			opts.Egress = &bwrap.Egress{Forwarder: s.forwarder, Socket: sess.Socket, Token: sess.Token, Bundle: s.egress.CABundle(),
				Allow: spec.Egress.Allow, Close: sess.Close}
		}
		sb, err = bwrap.New(dir, opts)
		if err != nil && opts.Egress != nil {
			_ = opts.Egress.Close()
		}
	case api.SandboxVirtual:
		v := sandbox.NewVirtual()
		if s.restoreVirtual != nil && !rebuilding {
			err = s.restoreVirtual(ctx, runID, v)
		}
		sb = v
	case api.SandboxDocker:
		if s.docker == nil {
			return nil, fmt.Errorf("sandbox type docker for run %s: %w (no Docker engine answered when this worker started; start one or set DOCKER_HOST)", runID, ErrSandboxUnavailable)
		}
		sb, err = s.docker.Ensure(ctx, runID, DockerOptions(spec))
	default:
		return nil, fmt.Errorf("sandbox type %q for run %s: %w (this worker provides local, virtual, bubblewrap and docker)", spec.Type, runID, ErrSandboxUnavailable)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s sandbox for run %s: %w", spec.Type, runID, err)
	}
	if isUserDir(spec) {
		if err := s.markDirRun(runID); err != nil {
			_ = sb.Close(ctx)
			return nil, fmt.Errorf("open %s sandbox for run %s: %w", specType(spec), runID, err)
		}
	}
	return sb, nil
}

// Release closes the run's sandbox and removes a workspace the run owns. Releasing a
// sandbox that was never opened (another worker, or a restart) still removes the owned
// workspace, so nothing is left behind.
func (s *Sandboxes) Release(ctx context.Context, runID string, spec api.SandboxSpec) error {
	s.mu.Lock()
	key := liveKey(runID, spec)
	sb := s.live[key]
	delete(s.live, key)
	delete(s.snaps, key)
	s.mu.Unlock()
	var errs []error
	if sb != nil {
		if err := sb.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close sandbox of run %s: %w", runID, err))
		}
	}
	if spec.Type == api.SandboxDocker && s.docker != nil {
		if err := s.docker.Remove(ctx, runID); err != nil {
			errs = append(errs, err)
		}
	}
	if ownsDir(spec) && usableRunID(runID) {
		if err := os.RemoveAll(filepath.Join(s.root, runID)); err != nil {
			errs = append(errs, fmt.Errorf("remove workspace of run %s: %w", runID, err))
		}
	}
	if isUserDir(spec) && usableRunID(runID) {
		if err := s.unmarkDirRun(runID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Instructions is the sandbox's own text for the system prompt. A docker sandbox's is
// derived from its options, so asking does not create its container here (on whichever
// worker calls the model).
func (s *Sandboxes) Instructions(ctx context.Context, runID string, spec api.SandboxSpec) string {
	switch {
	case spec.Type == api.SandboxDocker:
		return docker.InstructionsFor(DockerOptions(spec))
	case spec.Type == api.SandboxVirtual:
		// Nothing of the run's own: no virtual sandbox is made on a worker that only calls
		// the model (its files live on the run's host).
		return sandbox.NewVirtual().Instructions()
	case spec.Type == "" || spec.Type == api.SandboxLocal:
		dir := spec.Dir
		if dir == "" {
			dir = filepath.Join(s.root, runID)
		}
		return sandbox.LocalInstructions(dir)
	case spec.Type == api.SandboxBubblewrap:
		dir := spec.Dir
		if dir == "" {
			dir = filepath.Join(s.root, runID)
		}
		if spec.Egress != nil {
			return bwrap.InstructionsEgress(dir, spec.Egress.Allow)
		}
		return bwrap.InstructionsFor(dir)
	}
	sb, err := s.Open(ctx, runID, spec)
	if err != nil {
		return ""
	}
	return sb.Instructions()
}
