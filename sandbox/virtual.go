package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// VirtualRoot is the absolute spelling of the virtual workspace: "/workspace/x" and "x" name
// the same file, as they do in the Docker tier.
const VirtualRoot = "/workspace"

// Virtual is an in-memory workspace with no shell: the tier for agents that only read and
// write text, and for tests. Its files live in the worker's memory and are lost with it.
//
// Paths are guarded like the other tiers (nothing climbs above the root, absolute paths
// must lie under VirtualRoot), and it behaves like a file system where the difference would
// be visible: a file cannot also be a directory. Safe for concurrent use.
type Virtual struct {
	mu     sync.RWMutex
	files  map[string]virtualFile // key: clean workspace-relative path
	closed bool
	// writes counts the writes, so each file's gen tells one write from another (the
	// stamp an incremental snapshot compares, see ListWorkspace).
	writes uint64
}

type virtualFile struct {
	data []byte
	mod  time.Time
	gen  uint64
}

var _ Sandbox = (*Virtual)(nil)

// NewVirtual returns an empty in-memory workspace.
func NewVirtual() *Virtual {
	return &Virtual{files: map[string]virtualFile{}}
}

// Read returns a copy of the file's bytes.
func (v *Virtual) Read(ctx context.Context, p string) ([]byte, error) {
	rel, err := v.path(ctx, "read", p)
	if err != nil {
		return nil, err
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, fmt.Errorf("read %s: %w", QuotePath(p), ErrClosed)
	}
	f, ok := v.files[rel]
	if !ok {
		if v.isDirLocked(rel) {
			return nil, fmt.Errorf("read %s: is a directory", QuotePath(p))
		}
		return nil, fmt.Errorf("read %s: %w", QuotePath(p), ErrNotFound)
	}
	return append([]byte(nil), f.data...), nil
}

// Write stores a copy of data, replacing any file at p, and returns the workspace-relative
// path. Like a real file system it refuses to write over a directory, or below a file.
func (v *Virtual) Write(ctx context.Context, p string, data []byte) (string, error) {
	rel, err := v.path(ctx, "write", p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("write %s: is the workspace root", QuotePath(p))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return "", fmt.Errorf("write %s: %w", QuotePath(p), ErrClosed)
	}
	for dir := parentOf(rel); dir != "."; dir = parentOf(dir) {
		if _, ok := v.files[dir]; ok {
			return "", fmt.Errorf("write %s: %s is a file, not a directory", QuotePath(p), QuotePath(dir))
		}
	}
	if v.isDirLocked(rel) {
		return "", fmt.Errorf("write %s: is a directory", QuotePath(p))
	}
	v.writes++
	v.files[rel] = virtualFile{data: append([]byte(nil), data...), mod: time.Now(), gen: v.writes}
	return rel, nil
}

// Stat reports the file's size and the time it was last written.
func (v *Virtual) Stat(ctx context.Context, p string) (FileInfo, error) {
	rel, err := v.path(ctx, "stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return FileInfo{}, fmt.Errorf("stat %s: %w", QuotePath(p), ErrClosed)
	}
	f, ok := v.files[rel]
	if !ok {
		if v.isDirLocked(rel) {
			return FileInfo{}, fmt.Errorf("stat %s: is a directory", QuotePath(p))
		}
		return FileInfo{}, fmt.Errorf("stat %s: %w", QuotePath(p), ErrNotFound)
	}
	return FileInfo{Size: int64(len(f.data)), ModTime: f.mod}, nil
}

// Glob returns the sorted workspace-relative paths of the files matching pattern (see the
// glob syntax in glob.go: "*" stays within a segment, "**" spans segments, "{a,b}").
func (v *Virtual) Glob(ctx context.Context, pattern string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), err)
	}
	pats, err := compileGlob(pattern, VirtualRoot)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), err)
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), ErrClosed)
	}
	out := []string{}
	for name := range v.files {
		for _, g := range pats {
			if g.match(name) {
				out = append(out, name)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Shell always fails with ErrNoShell: an in-memory workspace cannot run commands.
func (v *Virtual) Shell(ctx context.Context, cmd string, timeout time.Duration) (ShellResult, error) {
	return ShellResult{}, fmt.Errorf("run shell: %w (virtual workspace)", ErrNoShell)
}

// Instructions tells the model it works in an in-memory workspace without a shell.
func (v *Virtual) Instructions() string {
	return "Your workspace is an in-memory file system, not a real machine. " +
		"Use the file tools with paths relative to the workspace (" + VirtualRoot + "/x is the same as x); " +
		"paths outside it are refused. There is no shell: commands cannot be run here."
}

// Close drops every file. Later calls fail with ErrClosed; closing twice is not an error.
func (v *Virtual) Close(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed = true
	v.files = nil
	return nil
}

// path checks ctx and cleans p into a workspace-relative key, naming op on failure.
func (v *Virtual) path(ctx context.Context, op, p string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s %s: %w", op, QuotePath(p), err)
	}
	rel, err := relPath(p, VirtualRoot)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", op, QuotePath(p), err)
	}
	return rel, nil
}

// isDirLocked reports whether some file lies under rel. The caller holds v.mu.
func (v *Virtual) isDirLocked(rel string) bool {
	if rel == "." {
		return true
	}
	prefix := rel + "/"
	for name := range v.files {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// parentOf is path.Dir for clean relative paths ("." for a top-level name).
func parentOf(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "."
	}
	return rel[:i]
}
