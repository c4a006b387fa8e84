package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// A user's own directory (sandbox.dir) outlives its runs, and several runs may act in it
// one after another: the README's scribe writes notes.md in one run and three haikus in
// the next. A run's `produces` are what that run made, so a file of the directory that no
// change touched since the run first opened it is not the run's artifact. This host marks
// the run's first use of the directory with a file of its own under the sandbox root,
// whose time (the kernel's clock, the one that stamps the directory's files) survives a
// worker restart; CollectOutputs keeps the files whose status changed at or after it.
// A run under way across the upgrade to this change is marked at its first sandbox use on
// an upgraded worker, so it lists what it changes from then on; with no mark at all (the
// sandbox root was wiped) every match is listed, as before.

// dirRunsDir is the folder under the sandbox root holding one mark per run using a user's
// directory on this host; the reaper skips dot folders.
const dirRunsDir = ".nexo-dir-runs"

// isUserDir says whether spec names a directory of the user's on this host.
func isUserDir(spec api.SandboxSpec) bool {
	return (spec.Type == "" || spec.Type == api.SandboxLocal || spec.Type == api.SandboxBubblewrap) && spec.Dir != ""
}

// markDirRun records the run's first use of its user directory here; a mark already there
// (an earlier open, before a restart) is kept.
func (s *Sandboxes) markDirRun(runID string) error {
	dir := filepath.Join(s.root, dirRunsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mark run %s's first use of its directory: %w", runID, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, runID), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark run %s's first use of its directory: %w", runID, err)
	}
	return f.Close()
}

// dirRunSince is when the run first used its user directory on this host; ok is false
// when the run has no mark here.
func (s *Sandboxes) dirRunSince(runID string) (since time.Time, ok bool) {
	fi, err := os.Stat(filepath.Join(s.root, dirRunsDir, runID))
	if err != nil {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// unmarkDirRun removes the run's mark (its sandbox is released, or the run closed).
func (s *Sandboxes) unmarkDirRun(runID string) error {
	err := os.Remove(filepath.Join(s.root, dirRunsDir, runID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove run %s's mark of its directory: %w", runID, err)
	}
	return nil
}

// changedSince keeps the paths (relative to root) whose file changed at or after since:
// written, created, renamed or had its mode changed, by the status-change time, which no
// tool can set back (a copy that keeps its modification time is still a change).
func changedSince(root string, paths []string, since time.Time) []string {
	var out []string
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || !statusChanged(fi).Before(since) {
			out = append(out, p) // a file that cannot be read here is left to WriteArtifact's error
		}
	}
	return out
}

// reapDirMarks removes the marks of runs that closed or moved to another host (a worker
// killed before the run's release left them).
func (s *Sandboxes) reapDirMarks(ctx context.Context, keep func(runID string) (bool, error), logger *slog.Logger) {
	entries, err := os.ReadDir(filepath.Join(s.root, dirRunsDir))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("reap directory marks: list", "error", err)
		}
		return
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return
		}
		if ok, err := keep(e.Name()); err != nil || ok {
			continue
		}
		if err := s.unmarkDirRun(e.Name()); err != nil {
			logger.Warn("reap directory marks", "run", e.Name(), "error", err)
		}
	}
}
