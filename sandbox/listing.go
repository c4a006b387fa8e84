package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Entry types of a workspace listing (the same words as api.Manifest entries).
const (
	EntryFile = "file"
	EntryDir  = "dir"
	EntryLink = "link"
)

// WorkspaceEntry is one directory, regular file or symbolic link of a workspace, with what
// tells a changed file from one that is not: size, modification time and Change, a
// tier-specific stamp that moves whenever the file is written (inode and ctime on a host
// directory). Special files (FIFOs, sockets, devices) are never listed.
type WorkspaceEntry struct {
	Path        string // workspace-relative, "/"-separated, clean
	Type        string
	Mode        fs.FileMode // permission bits
	Size        int64
	ModUnixNano int64
	// Change identifies the file's inode; ChangeUnixNano is its status-change time.
	Change         string
	ChangeUnixNano int64
	Link           string
}

// Lister is a workspace that can be listed and read file by file: what an incremental
// snapshot needs to hash only what changed. The host-directory tiers (Local) have it.
type Lister interface {
	// ListWorkspace lists every entry under the workspace, sorted by path, never following
	// a symbolic link.
	ListWorkspace(ctx context.Context) ([]WorkspaceEntry, error)
	// OpenWorkspaceFile opens a regular file the listing named. A path that is no longer a
	// regular file inside the workspace is an error.
	OpenWorkspaceFile(ctx context.Context, rel string) (io.ReadCloser, error)
}

var _ Lister = (*Local)(nil)

// ListWorkspace walks the workspace directory (see Lister).
func (l *Local) ListWorkspace(ctx context.Context) ([]WorkspaceEntry, error) {
	if err := l.check(ctx); err != nil {
		return nil, fmt.Errorf("list workspace %s: %w", QuotePath(l.root), err)
	}
	var out []WorkspaceEntry
	err := filepath.WalkDir(l.realRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(l.realRoot, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking: not in this snapshot
			}
			return err
		}
		e := WorkspaceEntry{Path: filepath.ToSlash(rel), Mode: fi.Mode().Perm(), ModUnixNano: fi.ModTime().UnixNano()}
		switch {
		case d.IsDir():
			e.Type = EntryDir
		case d.Type().IsRegular():
			if err := l.singleLink(fi); err != nil {
				return fmt.Errorf("%s: %w", QuotePath(e.Path), err)
			}
			e.Type, e.Size = EntryFile, fi.Size()
			e.Change, e.ChangeUnixNano = changeStamp(fi)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			e.Type, e.Link = EntryLink, target
		default:
			return nil
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list workspace %s: %w", QuotePath(l.root), err)
	}
	return out, nil // WalkDir visits in lexical order
}

// OpenWorkspaceFile opens rel for reading without following a symbolic link at its end.
func (l *Local) OpenWorkspaceFile(ctx context.Context, rel string) (io.ReadCloser, error) {
	if err := l.check(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), err)
	}
	clean := path.Clean(rel)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), ErrEscape)
	}
	f, err := openNoFollow(filepath.Join(l.realRoot, filepath.FromSlash(clean)))
	if err != nil {
		return nil, fileError("open", rel, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), ErrNotRegular)
	}
	if err := l.singleLink(fi); err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), err)
	}
	return f, nil
}

var _ Lister = (*Virtual)(nil)

// ListWorkspace lists the virtual workspace's files and the directories they imply (see
// Lister). A file's Change is its write generation: every Write and restore gives the file
// a new one, so a snapshot hashes exactly the files written since the last.
func (v *Virtual) ListWorkspace(ctx context.Context) ([]WorkspaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list virtual workspace: %w", err)
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, fmt.Errorf("list virtual workspace: %w", ErrClosed)
	}
	out := make([]WorkspaceEntry, 0, len(v.files))
	dirs := map[string]bool{}
	for rel, f := range v.files {
		mod := f.mod.UnixNano()
		out = append(out, WorkspaceEntry{Path: rel, Type: EntryFile, Mode: 0o644, Size: int64(len(f.data)),
			ModUnixNano: mod, Change: "gen-" + strconv.FormatUint(f.gen, 10), ChangeUnixNano: mod})
		for dir := parentOf(rel); dir != "." && !dirs[dir]; dir = parentOf(dir) {
			dirs[dir] = true
			out = append(out, WorkspaceEntry{Path: dir, Type: EntryDir, Mode: 0o755})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// OpenWorkspaceFile returns the file's bytes (see Lister); they are never changed in place.
func (v *Virtual) OpenWorkspaceFile(ctx context.Context, rel string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), err)
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), ErrClosed)
	}
	f, ok := v.files[path.Clean(rel)]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", QuotePath(rel), ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(f.data)), nil
}

// OpenLimiter is a Lister whose files cost a round trip each to open (a container's): past
// OpenLimit changed files, a snapshot reads the whole workspace archive instead, one
// stream instead of thousands of calls.
type OpenLimiter interface {
	OpenLimit() int
}

// ShellLister is a sandbox whose command round trip can carry the workspace's listing,
// taken right after the command ends, so the snapshot after a shell call costs no round
// trip of its own (the Docker tier's command server: one round trip is milliseconds
// there, a good part of a first call).
type ShellLister interface {
	// ShellAndList is Shell, plus ListWorkspace's listing taken once the command and
	// what it left in its process group are gone; nil entries when it could not be
	// taken that way (the caller lists with ListWorkspace).
	ShellAndList(ctx context.Context, command string, timeout time.Duration) (ShellResult, []WorkspaceEntry, error)
}
