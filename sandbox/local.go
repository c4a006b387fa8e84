package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of the Local tier.
const (
	// DefaultShellTimeout applies when Shell is called with a timeout <= 0 (Nexo's 30 s).
	DefaultShellTimeout = 30 * time.Second
	// DefaultMaxOutput caps what Shell keeps of stdout, and separately of stderr: 1 MiB, the
	// tail. The shell tool truncates further (TruncateOutput) before the model sees it; this
	// cap only keeps a runaway command from exhausting the worker's memory.
	DefaultMaxOutput = 1 << 20
)

// shellPath is the default PATH of a command: the environment is cleared, not inherited.
const shellPath = "/usr/local/bin:/usr/bin:/bin"

// LocalOptions configures a Local sandbox. The zero value is usable.
type LocalOptions struct {
	// Env adds variables to the cleared environment commands run with; an entry overrides
	// the defaults (PATH, HOME, LANG). Nothing of the worker's own environment (API keys,
	// tokens) reaches a command unless it is listed here.
	Env map[string]string
	// MaxOutput caps, in bytes, what Shell keeps of stdout and of stderr each; the tail is
	// kept and a "[truncated N bytes]" line marks the cut. <= 0 means DefaultMaxOutput.
	MaxOutput int
	// Wrap, when set, turns the argv of each command (/bin/sh -c CMD) into the argv Shell
	// starts instead, such as a bwrap invocation that runs it sealed (sandbox/bwrap), and
	// the files that process inherits as descriptors 3, 4, … (Shell closes them once it
	// started, or failed to). The process is started and bounded like the shell itself:
	// in the workspace directory, with the cleared environment, in a guarded process
	// group killed at the timeout, with capped output. An error fails the call.
	Wrap func(argv []string) ([]string, []*os.File, error)
	// WrapExec, when set, is Wrap for Exec: it also gets the host files the program
	// needs to read (ExecOptions.ReadOnly), to bind them into a sealed process. Unset,
	// Exec uses Wrap.
	WrapExec func(argv, readOnly []string) ([]string, []*os.File, error)
	// WrapDiesWithWorker says the process Wrap makes kills itself and everything it
	// started when the worker dies, even by SIGKILL (bubblewrap with --die-with-parent and
	// its own pid namespace: the kernel kills the namespace with its first process), and
	// that nothing it started outlives it. Such a process leads its own process group and
	// Shell starts no guard process beside it (see guardScript): one process less per
	// command. The group is still killed at the timeout.
	WrapDiesWithWorker bool
	// RefuseHardLinks makes reads, listings, snapshots and archives refuse a regular file
	// with more than one hard link (ErrHardLink, naming the file). Set it for a directory
	// the user gave (sandbox.dir): anyone who can write there can plant a hard link to a
	// file outside it (a key, a config), which the path guard cannot tell from a file of
	// the workspace, since both names are the same inode. A per-run directory the worker
	// made needs it less: only the run's own commands write there.
	RefuseHardLinks bool
}

// Local is a workspace in a host directory. Every path a tool gives it goes through the
// guard (Resolve): nothing is read, written, stat'ed or globbed outside the directory,
// whether by "..", an absolute path or a symbolic link. Commands run with sh in the
// directory with a cleared environment, in their own process group, and are killed — with
// everything they started — when they time out or their context ends.
//
// The shell itself is not confined: a command can reach the whole host. Use the Docker tier
// for code the operator does not trust. Local never deletes its directory: whoever created
// the directory (the worker, for a per-run one) removes it. Safe for concurrent use.
type Local struct {
	root      string // absolute, as given
	realRoot  string // physical (symlinks resolved)
	env       []string
	maxOutput int
	wrap      func([]string) ([]string, []*os.File, error)
	wrapExec  func(argv, readOnly []string) ([]string, []*os.File, error)
	selfGuard bool // WrapDiesWithWorker
	noLinks   bool // RefuseHardLinks

	closed atomic.Bool
	mu     sync.Mutex       // guards groups and orders Close against Shell starting
	groups map[int]struct{} // process groups of running commands, killed on Close
}

var (
	_ Sandbox = (*Local)(nil)
	_ Execer  = (*Local)(nil)
)

// NewLocal returns a sandbox over dir, creating it (and its parents) if missing. dir must
// not be the file-system root; opts.Env names must be non-empty and contain no "=" or NUL.
func NewLocal(dir string, opts LocalOptions) (*Local, error) {
	if dir == "" {
		return nil, errors.New("new local sandbox: directory is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("new local sandbox in %s: %w", QuotePath(dir), err)
	}
	abs, real, err := realRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("new local sandbox: %w", err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("new local sandbox: %s is not a directory", QuotePath(dir))
	}
	env := map[string]string{"PATH": shellPath, "HOME": abs, "LANG": "C.UTF-8"}
	for k, v := range opts.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("new local sandbox: invalid environment variable %q", k)
		}
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	l := &Local{root: abs, realRoot: real, maxOutput: opts.MaxOutput, wrap: opts.Wrap, wrapExec: opts.WrapExec,
		selfGuard: opts.Wrap != nil && opts.WrapDiesWithWorker, noLinks: opts.RefuseHardLinks, groups: map[int]struct{}{}}
	for _, k := range keys {
		l.env = append(l.env, k+"="+env[k])
	}
	if l.maxOutput <= 0 {
		l.maxOutput = DefaultMaxOutput
	}
	return l, nil
}

// Dir returns the workspace directory (absolute, as given to NewLocal).
func (l *Local) Dir() string { return l.root }

// RealDir returns the workspace directory with symbolic links resolved: the directory
// commands run in.
func (l *Local) RealDir() string { return l.realRoot }

// Read returns the file's bytes.
func (l *Local) Read(ctx context.Context, p string) ([]byte, error) {
	host, _, err := l.resolve(ctx, "read", p)
	if err != nil {
		return nil, err
	}
	// Opened non-blocking and checked on the open file: a FIFO (mkfifo in the workspace)
	// would block a plain open until a writer came, and a read until it wrote, holding the
	// call and a worker goroutine past cancellation; a check before the open alone could be
	// raced by the shell.
	f, err := os.OpenFile(host, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError("read", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileError("read", p, err)
	}
	if err := regular(fi); err != nil {
		return nil, fmt.Errorf("read %s: %w", QuotePath(p), err)
	}
	if err := l.singleLink(fi); err != nil {
		return nil, fmt.Errorf("read %s: %w", QuotePath(p), err)
	}
	data := make([]byte, 0, fi.Size()+512)
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fileError("read", p, err)
	}
	return buf.Bytes(), nil
}

// regular fails unless fi is a regular file: the file tools read and write only those,
// never a directory, FIFO, socket or device.
func regular(fi fs.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return errors.New("is a directory")
	case m&fs.ModeNamedPipe != 0:
		return fmt.Errorf("%w (a named pipe)", ErrNotRegular)
	case m&fs.ModeSocket != 0:
		return fmt.Errorf("%w (a socket)", ErrNotRegular)
	case m&fs.ModeDevice != 0:
		return fmt.Errorf("%w (a device)", ErrNotRegular)
	}
	return fmt.Errorf("%w (%v)", ErrNotRegular, m.Type())
}

// singleLink fails with ErrHardLink when the sandbox refuses hard links and fi, a regular
// file, has more than one name. Checked on the open file (fstat), so a link made between a
// check and the open cannot slip through.
func (l *Local) singleLink(fi fs.FileInfo) error {
	if !l.noLinks || !fi.Mode().IsRegular() {
		return nil
	}
	if n := linkCount(fi); n > 1 {
		return fmt.Errorf("%w (%d names): its other names may lie outside the workspace, so it is refused in a sandbox.dir; copy the file in instead of linking it", ErrHardLink, n)
	}
	return nil
}

// Write replaces the file at p atomically (a temporary file in the same directory, then a
// rename), creating parent directories, and returns the workspace-relative path. A reader
// never sees a half-written file. An existing file keeps its permission bits; a new one is
// 0644. Writing through a symbolic link that stays inside the workspace writes its target.
func (l *Local) Write(ctx context.Context, p string, data []byte) (string, error) {
	host, rel, err := l.resolve(ctx, "write", p)
	if err != nil {
		return "", err
	}
	if rel == "." || host == l.realRoot {
		return "", fmt.Errorf("write %s: is the workspace root", QuotePath(p))
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(host); err == nil {
		if err := regular(fi); err != nil {
			return "", fmt.Errorf("write %s: %w", QuotePath(p), err)
		}
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write %s: create parent directories: %w", QuotePath(p), err)
	}
	tmp, err := os.CreateTemp(dir, ".nexo-write-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", QuotePath(p), err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", QuotePath(p), err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return "", fmt.Errorf("write %s: %w", QuotePath(p), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", QuotePath(p), err)
	}
	if err := os.Rename(tmp.Name(), host); err != nil {
		return "", fmt.Errorf("write %s: %w", QuotePath(p), err)
	}
	committed = true
	return rel, nil
}

// Stat reports the size and modification time of the file at p (following a symbolic link
// that stays inside). A directory, FIFO, socket or device is an error: Stat is for
// regular files.
func (l *Local) Stat(ctx context.Context, p string) (FileInfo, error) {
	host, _, err := l.resolve(ctx, "stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	fi, err := os.Stat(host)
	if err != nil {
		return FileInfo{}, fileError("stat", p, err)
	}
	if err := regular(fi); err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", QuotePath(p), err)
	}
	return FileInfo{Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Glob returns the sorted workspace-relative paths of the files matching pattern: "*" stays
// within a path segment, "**" spans segments, "{a,b}" alternatives expand (full syntax in
// glob.go, shared with Virtual). Directories are not listed. The walk does not descend into symbolically linked directories, and a linked
// file is listed only when its target is a regular file inside the workspace, so no result
// leads outside. A pattern that climbs out, or whose literal directory prefix resolves
// outside, fails with ErrEscape. Unreadable directories are skipped.
func (l *Local) Glob(ctx context.Context, pattern string) ([]string, error) {
	if err := l.check(ctx); err != nil {
		return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), err)
	}
	pats, err := compileGlob(pattern, l.root, l.realRoot)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), err)
	}
	// Group the alternatives by the directory their walk starts from.
	byPrefix := map[string][]globPattern{}
	var prefixes []string
	for _, g := range pats {
		pre := g.literalPrefix()
		if _, ok := byPrefix[pre]; !ok {
			prefixes = append(prefixes, pre)
		}
		byPrefix[pre] = append(byPrefix[pre], g)
	}
	found := map[string]bool{}
	for _, pre := range prefixes {
		base, err := physical(l.realRoot, pre)
		if err != nil {
			return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), err)
		}
		if err := l.walk(ctx, base, pre, byPrefix[pre], found); err != nil {
			return nil, fmt.Errorf("glob %s: %w", QuotePath(pattern), err)
		}
	}
	out := make([]string, 0, len(found))
	for name := range found {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// walk lists the files under the physical directory base (workspace-relative prefix pre)
// that match one of pats into found.
func (l *Local) walk(ctx context.Context, base, pre string, pats []globPattern, found map[string]bool) error {
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if d != nil && d.IsDir() && p != base {
				return fs.SkipDir // unreadable directory: skip it, keep the rest
			}
			return nil
		}
		r, err := filepath.Rel(base, p)
		if err != nil {
			return nil
		}
		name := path.Join(pre, filepath.ToSlash(r))
		if d.IsDir() {
			if p == base {
				return nil
			}
			for _, g := range pats {
				if g.mayMatchUnder(name) {
					return nil
				}
			}
			return fs.SkipDir
		}
		matched := false
		for _, g := range pats {
			if g.match(name) {
				matched = true
				break
			}
		}
		if !matched {
			return nil
		}
		switch {
		case d.Type().IsRegular():
			found[name] = true
		case d.Type()&fs.ModeSymlink != 0:
			// Listed only if it stays inside and names a regular file.
			target, err := physical(l.realRoot, name)
			if err != nil {
				return nil
			}
			if fi, err := os.Stat(target); err == nil && fi.Mode().IsRegular() {
				found[name] = true
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Instructions describes the workspace directory and the limits of the shell.
func (l *Local) Instructions() string {
	return fmt.Sprintf("Your workspace is the directory %s on the host machine. "+
		"Use the file tools with paths relative to it (absolute paths must lie inside it); "+
		"paths that leave it, including through symbolic links, are refused. "+
		"Shell commands run with sh in that directory, with a minimal environment "+
		"(PATH=%s, HOME=%s, LANG=C.UTF-8); a command is killed, with anything it started, "+
		"when it times out or finishes, so do not leave servers running in the background; "+
		"only the end of long output is kept. The shell can reach the rest of the machine: "+
		"stay inside the workspace.", l.root, shellPath, l.root)
}

// Close kills the process groups of commands still running and refuses further calls
// with ErrClosed. The directory is left in place. Closing twice is not an error.
func (l *Local) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	for pgid := range l.groups {
		killGroup(pgid)
	}
	return nil
}

// check fails when ctx is done or the sandbox is closed.
func (l *Local) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// resolve checks state and guards p, naming op in errors.
func (l *Local) resolve(ctx context.Context, op, p string) (host, rel string, err error) {
	if err := l.check(ctx); err != nil {
		return "", "", fmt.Errorf("%s %s: %w", op, QuotePath(p), err)
	}
	host, rel, err = resolveIn(l.root, l.realRoot, p)
	if err != nil {
		return "", "", fmt.Errorf("%s %s: %w", op, QuotePath(p), err)
	}
	return host, rel, nil
}

// fileError maps a missing file (or a missing directory on the way, ENOTDIR) to
// ErrNotFound, naming the path as the caller spelled it.
func fileError(op, p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s %s: %w", op, QuotePath(p), ErrNotFound)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // drop the host path; the caller's spelling is enough
	}
	return fmt.Errorf("%s %s: %w", op, QuotePath(p), err)
}
