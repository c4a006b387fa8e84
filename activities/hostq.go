package activities

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox"
)

// Per-host task queues (see workflows/hostq.go). Every worker polls the shared task queue
// and its own host queue "<task_queue>@host-<id>"; the hosts of a pool (--pool NAME) also
// poll the pool's claim queue "<task_queue>@pool-<name>". A run's first sandbox use claims
// a host: ClaimSandboxHost, on the shared queue (on the pool's, when its agent names one),
// answers with the host queue of the worker that took it, and every later sandbox activity of the run goes there, so the run's files stay
// on one machine whatever tier its sandbox is. When that host stops answering the run
// claims another and RestoreSandboxOnHost rebuilds the workspace there from the run's last
// snapshot (SnapshotSandbox, taken at every suspend and every sandbox.park_every).

// hostIDFile holds a worker's host id under sandbox.root, so a worker restarted on the same
// machine serves the same host queue and finds its runs' directories again.
const hostIDFile = ".nexo-host-id"

// HostID returns the host id of a worker whose sandbox root is root: the one recorded in
// root/.nexo-host-id (made on first use), held with an exclusive lock while the worker
// runs. A second worker process started on the same root while the first runs gets a fresh
// id of its own (not recorded), so two processes never share a host queue (a virtual
// sandbox lives in one process's memory). release gives the lock back.
func HostID(root string) (id string, release func(), err error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", nil, fmt.Errorf("host id: create sandbox root %s: %w", root, err)
	}
	p := filepath.Join(root, hostIDFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("host id: open %s: %w", p, err)
	}
	if !lockFile(f) {
		f.Close()
		return newHostID(), func() {}, nil // another live worker owns this root's id
	}
	release = func() { unlockFile(f); f.Close() }
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		release()
		return "", nil, fmt.Errorf("host id: read %s: %w", p, err)
	}
	id = strings.TrimSpace(string(b))
	if validHostID(id) {
		return id, release, nil
	}
	id = newHostID()
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(id+"\n"), 0)
		if err != nil {
			release()
			return "", nil, fmt.Errorf("host id: write %s: %w", p, err)
		}
	}
	return id, release, nil
}

func newHostID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func validHostID(id string) bool {
	if len(id) == 0 || len(id) > 32 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r == '-') {
			return false
		}
	}
	return true
}

// SetHost tells the activities the host queue this worker polls (platform wiring); without
// it ClaimSandboxHost refuses, so a worker that polls no host queue never claims a run.
func (a *Host) SetHost(h api.SandboxHost) { a.host = &h }

// Register registers the host's activities: what the
// shared task queue serves for runs recorded before host queues, plus the claim, the
// stored records and RestoreSandbox (the workflow sends it wherever the run lands).
func (a *Host) Register(r Registry) {
	a.RegisterSandbox(r)
	for name, fn := range map[string]any{
		api.ActivityRestoreSandbox:   a.RestoreSandbox,
		api.ActivityClaimSandboxHost: a.ClaimSandboxHost,
		api.ActivityStoreRecord:      a.StoreRecord,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// RegisterSandbox registers the host activities a run sends to its
// host queue (workflows/hostq.go): files, artifacts, snapshots and restores.
func (a *Host) RegisterSandbox(r Registry) {
	for name, fn := range map[string]any{
		api.ActivityWriteArtifact:        a.WriteArtifact,
		api.ActivityStageFiles:           a.StageFiles,
		api.ActivityReleaseSandbox:       a.ReleaseSandbox,
		api.ActivityParkSandbox:          a.ParkSandbox,
		api.ActivitySnapshotSandbox:      a.SnapshotSandbox,
		api.ActivityRestoreSandboxOnHost: a.RestoreSandboxOnHost,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// RegisterClaim registers ClaimSandboxHost alone: what a pool's claim queue
// (api.PoolQueueName) is polled for, by every host of the pool.
func (a *Host) RegisterClaim(r Registry) {
	r.RegisterActivityWithOptions(a.ClaimSandboxHost, activity.RegisterOptions{Name: api.ActivityClaimSandboxHost})
}

// ClaimSandboxHost answers with this worker's host queue. On a run's first claim it also
// blanks any snapshot an earlier run with the same id left.
func (a *Host) ClaimSandboxHost(ctx context.Context, req api.ClaimHostRequest) (api.SandboxHost, error) {
	if a.host == nil {
		return api.SandboxHost{}, errors.New("claim sandbox host: this worker polls no host queue")
	}
	if !usableRunID(req.RunID) {
		return api.SandboxHost{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("claim sandbox host: %q is not a usable run id", req.RunID), api.ErrTypeBadInput, nil)
	}
	if req.Fresh {
		if err := a.store.Put(ctx, req.RunID, workspaceArchive, emptyArchive()); err != nil {
			return api.SandboxHost{}, fmt.Errorf("claim sandbox host for run %s: blank old snapshot: %w", req.RunID, err)
		}
	}
	return *a.host, nil
}

func emptyArchive() []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.Close()
	return b.Bytes()
}

// SnapshotSandbox archives the run's workspace to the artifact store (streamed, never
// whole in memory for local and docker) and leaves the sandbox as it is. A local sandbox
// on a directory the user named (sandbox.dir) is not the run's to copy: nothing is stored.
func (a *Host) SnapshotSandbox(ctx context.Context, req api.ReleaseSandboxRequest) (api.SnapshotResult, error) {
	if req.Manifest == api.ManifestRequested {
		if !snapshotEligible(req.Sandbox) {
			return api.SnapshotResult{}, nil
		}
		sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
		if err != nil {
			return api.SnapshotResult{}, classify(fmt.Errorf("snapshot sandbox: %w", err))
		}
		ref, err := a.snapshotWorkspace(ctx, req.RunID, req.Sandbox, sb)
		if err != nil {
			return api.SnapshotResult{}, classifyArchive(fmt.Errorf("snapshot sandbox of run %s: %w", req.RunID, err))
		}
		return api.SnapshotResult{Bytes: ref.Bytes, Ref: &ref}, nil
	}
	if req.Sandbox.Dir != "" {
		return api.SnapshotResult{}, nil
	}
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return api.SnapshotResult{}, classify(fmt.Errorf("snapshot sandbox: %w", err))
	}
	ws, ok := sb.(workspacer)
	if !ok {
		return api.SnapshotResult{}, nil
	}
	rc, err := ws.ArchiveWorkspace(ctx)
	if err != nil {
		return api.SnapshotResult{}, classifyArchive(fmt.Errorf("snapshot sandbox of run %s: %w", req.RunID, err))
	}
	defer rc.Close()
	n, err := a.store.PutFrom(ctx, req.RunID, workspaceArchive, rc)
	if err != nil {
		return api.SnapshotResult{}, classifyArchive(fmt.Errorf("snapshot sandbox of run %s: %w", req.RunID, err))
	}
	return api.SnapshotResult{Bytes: n}, nil
}

func classifyArchive(err error) error {
	if errors.Is(err, sandbox.ErrArchiveTooLarge) {
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeTooLarge, err)
	}
	return err
}

// RestoreSandboxOnHost makes the run's sandbox on this host anew (a stale directory or
// container of the run here is cleared first) and extracts the run's last snapshot into
// it, if it has one.
func (a *Host) RestoreSandboxOnHost(ctx context.Context, req api.ReleaseSandboxRequest) (api.RestoreOnHostResult, error) {
	if req.Sandbox.Dir != "" {
		return api.RestoreOnHostResult{}, nil
	}
	sb, err := a.sandboxes.OpenFresh(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return api.RestoreOnHostResult{}, classify(fmt.Errorf("restore sandbox: %w", err))
	}
	if req.Manifest != "" {
		ws, ok := sb.(workspacer)
		if !ok {
			return api.RestoreOnHostResult{}, nil
		}
		res, n, err := a.restoreManifest(ctx, ws, req.Manifest, req.Sandbox.Type == api.SandboxDocker)
		if err != nil {
			return api.RestoreOnHostResult{}, nonRetryableSnapshot(classifyArchive(fmt.Errorf("restore sandbox of run %s: %w", req.RunID, err)))
		}
		return api.RestoreOnHostResult{Found: true, Bytes: n, RestoreManifestResult: res}, nil
	}
	archive, err := a.store.GetReader(ctx, req.RunID, workspaceArchive)
	if errors.Is(err, artifacts.ErrNotFound) {
		return api.RestoreOnHostResult{}, nil
	}
	if err != nil {
		return api.RestoreOnHostResult{}, fmt.Errorf("restore sandbox of run %s: %w", req.RunID, err)
	}
	defer archive.Close()
	ws, ok := sb.(workspacer)
	if !ok {
		return api.RestoreOnHostResult{}, nil
	}
	body := &countingReader{r: archive}
	if err := ws.RestoreWorkspace(ctx, body); err != nil {
		return api.RestoreOnHostResult{}, classifyArchive(fmt.Errorf("restore sandbox of run %s: %w", req.RunID, err))
	}
	return api.RestoreOnHostResult{Found: true, Bytes: body.n}, nil
}

// restoreVirtual fills a virtual sandbox made after a worker restart (its files were in
// the old process's memory) from the run's last snapshot, if there is one.
func (a *Host) restoreVirtual(ctx context.Context, runID string, v *sandbox.Virtual) error {
	archive, err := a.store.GetReader(ctx, runID, workspaceArchive)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore virtual sandbox of run %s: %w", runID, err)
	}
	defer archive.Close()
	if err := v.RestoreWorkspace(ctx, archive); err != nil {
		return fmt.Errorf("restore virtual sandbox of run %s: %w", runID, err)
	}
	return nil
}

// OpenFresh opens the run's sandbox after clearing what this host held of it: a per-run
// directory is emptied (by the restore), a docker container removed, a virtual one
// dropped. A virtual sandbox made here starts empty (no snapshot is read into it).
func (s *Sandboxes) OpenFresh(ctx context.Context, runID string, spec api.SandboxSpec) (sandbox.Sandbox, error) {
	s.mu.Lock()
	key := liveKey(runID, spec)
	if sb := s.live[key]; sb != nil && spec.Type != api.SandboxVirtual {
		_ = sb.Close(ctx)
	}
	delete(s.live, key)
	delete(s.snaps, key)
	s.mu.Unlock()
	if spec.Type == api.SandboxDocker && s.docker != nil {
		if err := s.docker.Remove(ctx, runID); err != nil {
			return nil, err
		}
	}
	if ownsDir(spec) && usableRunID(runID) {
		if err := os.RemoveAll(filepath.Join(s.root, runID)); err != nil {
			return nil, fmt.Errorf("clear workspace of run %s: %w", runID, err)
		}
	}
	if spec.Type == api.SandboxVirtual {
		v := sandbox.NewVirtual()
		s.mu.Lock()
		s.live[key] = v
		s.mu.Unlock()
		return v, nil
	}
	return s.Open(ctx, runID, spec)
}

// ReapMoved removes what this worker holds of runs that closed or moved to another host:
// per-run directories under the sandbox root and virtual sandboxes in memory. keep answers
// for one run id whether it still belongs here (the worker asks Temporal). It returns the
// run ids it removed.
func (s *Sandboxes) ReapMoved(ctx context.Context, keep func(runID string) (bool, error), logger *slog.Logger) []string {
	var removed []string
	entries, err := os.ReadDir(s.root)
	if err != nil && !os.IsNotExist(err) {
		logger.Warn("reap workspaces: list sandbox root", "error", err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() || !usableRunID(e.Name()) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if ctx.Err() != nil {
			return removed
		}
		runID := e.Name()
		seen[runID] = true
		ok, err := keep(runID)
		if err != nil {
			logger.Debug("reap workspaces: ask run", "run", runID, "error", err)
			continue
		}
		if ok {
			continue
		}
		s.forgetRun(ctx, runID)
		if err := os.RemoveAll(filepath.Join(s.root, runID)); err != nil {
			logger.Warn("reap workspaces: remove", "run", runID, "error", err)
			continue
		}
		removed = append(removed, runID)
	}
	s.reapDirMarks(ctx, keep, logger)
	s.mu.Lock()
	var virtual []string
	for key, sb := range s.live {
		if _, ok := sb.(*sandbox.Virtual); ok {
			runID, _, _ := strings.Cut(key, "\x00")
			if !seen[runID] {
				virtual = append(virtual, runID)
			}
		}
	}
	s.mu.Unlock()
	for _, runID := range virtual {
		if ok, err := keep(runID); err == nil && !ok {
			s.forgetRun(ctx, runID)
			removed = append(removed, runID)
		}
	}
	if s.docker != nil {
		names, err := s.docker.ReapMoved(ctx, func(runID string) (bool, error) {
			ok, err := keep(runID)
			return !ok, err
		})
		if err != nil && ctx.Err() == nil {
			logger.Warn("reap containers of moved runs", "error", err)
		}
		for _, n := range names {
			removed = append(removed, "container "+n)
		}
	}
	return removed
}

// forgetRun closes and drops every cached sandbox of the run.
func (s *Sandboxes) forgetRun(ctx context.Context, runID string) {
	s.mu.Lock()
	var drop []sandbox.Sandbox
	for key, sb := range s.live {
		if strings.HasPrefix(key, runID+"\x00") {
			drop = append(drop, sb)
			delete(s.live, key)
		}
	}
	for key := range s.snaps {
		if strings.HasPrefix(key, runID+"\x00") {
			delete(s.snaps, key)
		}
	}
	s.mu.Unlock()
	for _, sb := range drop {
		_ = sb.Close(ctx)
	}
}
