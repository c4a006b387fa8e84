package activities

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// workspaceArchive is the store name of a parked run's workspace. It is not a run
// artifact: the record never lists it.
const workspaceArchive = "__workspace.tar"

// workspacer is what parking needs of a sandbox (the Docker tier has it).
type workspacer interface {
	ArchiveWorkspace(ctx context.Context) (io.ReadCloser, error)
	RestoreWorkspace(ctx context.Context, archive io.Reader) error
}

// ParkSandbox archives the whole workspace of a run that waits for a human to the
// artifact store and removes its container, so a run suspended for days holds no
// container. It returns the archive's size. The archive streams from the container to
// the store (never whole in memory), and since the store is shared, whichever worker
// later gets the run restores it.
func (a *Host) ParkSandbox(ctx context.Context, req api.ReleaseSandboxRequest) (int64, error) {
	if req.Sandbox.Type != api.SandboxDocker {
		return 0, nil // nothing to park: local and virtual sandboxes hold no container (SnapshotSandbox copies them)
	}
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return 0, classify(fmt.Errorf("park sandbox: %w", err))
	}
	ws, ok := sb.(workspacer)
	if !ok {
		return 0, nil // nothing to park: local and virtual sandboxes hold no container
	}
	rc, err := ws.ArchiveWorkspace(ctx)
	if err != nil {
		return 0, fmt.Errorf("park sandbox of run %s: archive workspace: %w", req.RunID, err)
	}
	defer rc.Close()
	// The container is removed only once the whole archive is stored: a copy that fails
	// part-way leaves the container (and any earlier archive) as they were, to retry.
	n, err := a.store.PutFrom(ctx, req.RunID, workspaceArchive, rc)
	if err != nil {
		return 0, fmt.Errorf("park sandbox of run %s: %w", req.RunID, err)
	}
	a.sandboxes.Forget(req.RunID, req.Sandbox)
	if err := a.sandboxes.docker.Remove(ctx, req.RunID); err != nil {
		return 0, fmt.Errorf("park sandbox of run %s: %w", req.RunID, err)
	}
	return n, nil
}

// RestoreSandbox gives a parked run a fresh container with its workspace back, exactly as
// the agent left it.
func (a *Host) RestoreSandbox(ctx context.Context, req api.ReleaseSandboxRequest) (int64, error) {
	if req.Sandbox.Type != api.SandboxDocker {
		return 0, nil // runs recorded with worker sessions only restored docker sandboxes here
	}
	archive, err := a.store.GetReader(ctx, req.RunID, workspaceArchive)
	if errors.Is(err, artifacts.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("restore sandbox of run %s: %w", req.RunID, err)
	}
	defer archive.Close()
	a.sandboxes.Forget(req.RunID, req.Sandbox)
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return 0, classify(fmt.Errorf("restore sandbox: %w", err))
	}
	ws, ok := sb.(workspacer)
	if !ok {
		return 0, nil
	}
	body := &countingReader{r: archive}
	if err := ws.RestoreWorkspace(ctx, body); err != nil {
		return 0, fmt.Errorf("restore sandbox of run %s: %w", req.RunID, err)
	}
	return body.n, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

var (
	_ workspacer = (*docker.Sandbox)(nil)
	_ workspacer = (*sandbox.Local)(nil)
	_ workspacer = (*sandbox.Virtual)(nil)
)
