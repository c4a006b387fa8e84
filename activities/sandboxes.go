package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
)

// ErrSandboxUnavailable: the spec names a sandbox this worker cannot provide.
var ErrSandboxUnavailable = errors.New("sandbox type not available")

// Sandboxes turns a run's SandboxSpec into a live sandbox on this worker and keeps it for
// the run's later activities. A local sandbox without a Dir is a directory under Root
// owned by the run (removed on Release); one with a Dir belongs to the user and is never
// removed. Virtual sandboxes live in this process's memory: they do not survive a worker
// restart, which is why they are not the default for workflows.
type Sandboxes struct {
	root string

	mu   sync.Mutex
	live map[string]sandbox.Sandbox
}

// NewSandboxes returns the worker's sandbox registry with per-run workspaces under root.
func NewSandboxes(root string) (*Sandboxes, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolve workspace root %q: %w", root, err)
	}
	return &Sandboxes{root: abs, live: map[string]sandbox.Sandbox{}}, nil
}

func liveKey(runID string, spec api.SandboxSpec) string {
	return runID + "\x00" + spec.Type + "\x00" + spec.Dir
}

// Get returns the run's sandbox, creating it on first use.
func (s *Sandboxes) Get(runID string, spec api.SandboxSpec) (sandbox.Sandbox, error) {
	if runID == "" || strings.ContainsAny(runID, "/\\\x00") || runID == "." || runID == ".." {
		return nil, fmt.Errorf("sandbox for run %q: not a usable run id", runID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := liveKey(runID, spec)
	if sb, ok := s.live[key]; ok {
		return sb, nil
	}
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
		sb, err = sandbox.NewLocal(dir, sandbox.LocalOptions{})
	case api.SandboxVirtual:
		sb = sandbox.NewVirtual()
	default:
		return nil, fmt.Errorf("sandbox type %q for run %s: %w (this worker provides local and virtual)", spec.Type, runID, ErrSandboxUnavailable)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s sandbox for run %s: %w", spec.Type, runID, err)
	}
	s.live[key] = sb
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
	s.mu.Unlock()
	var errs []error
	if sb != nil {
		if err := sb.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close sandbox of run %s: %w", runID, err))
		}
	}
	if (spec.Type == "" || spec.Type == api.SandboxLocal) && spec.Dir == "" && runID != "" &&
		!strings.ContainsAny(runID, "/\\\x00") && runID != "." && runID != ".." {
		if err := os.RemoveAll(filepath.Join(s.root, runID)); err != nil {
			errs = append(errs, fmt.Errorf("remove workspace of run %s: %w", runID, err))
		}
	}
	return errors.Join(errs...)
}
