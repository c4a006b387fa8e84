package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxPathLen is the longest path, in bytes, the guard accepts (Linux PATH_MAX). Longer
// paths are refused before they reach the file system.
const MaxPathLen = 4096

// maxSymlinkHops bounds how many symbolic links one resolution follows (Linux MAXSYMLINKS),
// so a link cycle is an error rather than a hang.
const maxSymlinkHops = 40

// Resolve maps p, a path as a tool received it, to the host path it names inside the
// workspace directory root, or fails with an error that wraps ErrEscape and names p.
//
// p is relative to root, or absolute and inside root. It is first cleaned lexically: a path
// that climbs above root ("..", "a/../../x"), an absolute path outside root, or a path with
// a NUL byte is refused. Then every existing component is resolved on the file system,
// following symbolic links (including a dangling link, whose target is where a write would
// land); the physical result must be root or lie under it. "" and "." name root itself.
//
// The returned path is physical: it contains no symbolic links up to its last existing
// component, and the missing tail (if any) is clean, so acting on it cannot be redirected
// by a link the guard did not see. The guard is not a defence against a concurrent process
// that swaps a directory for a link between the check and the use: in the Local tier the
// agent's own shell could do that, and the shell is not confined anyway (only the Docker
// tier confines it).
func Resolve(root, p string) (string, error) {
	abs, real, err := realRoot(root)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", QuotePath(p), err)
	}
	host, _, err := resolveIn(abs, real, p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", QuotePath(p), err)
	}
	return host, nil
}

// realRoot returns root made absolute, and its physical spelling (symlinks resolved).
// The file-system root itself is refused: a guard rooted at "/" guards nothing.
func realRoot(root string) (abs, real string, err error) {
	if root == "" {
		return "", "", errors.New("workspace root is empty")
	}
	abs, err = filepath.Abs(root)
	if err != nil {
		return "", "", fmt.Errorf("workspace root %s: %w", QuotePath(root), err)
	}
	real, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", fmt.Errorf("workspace root %s: %w", QuotePath(root), err)
	}
	if real == string(filepath.Separator) || abs == string(filepath.Separator) {
		return "", "", fmt.Errorf("workspace root %s is the file-system root", QuotePath(root))
	}
	return abs, real, nil
}

// resolveIn is Resolve with the root already resolved. It returns the physical host path
// and the clean workspace-relative (slash-separated) path. Errors carry no operation; the
// caller adds it.
func resolveIn(absRoot, realRoot, p string) (host, rel string, err error) {
	rel, err = relPath(p, absRoot, realRoot)
	if err != nil {
		return "", "", err
	}
	host, err = physical(realRoot, rel)
	if err != nil {
		return "", "", err
	}
	return host, rel, nil
}

// relPath cleans p lexically into a workspace-relative, slash-separated path ("." for the
// root). roots are the absolute spellings an absolute p may start with (the host
// directory, its physical form, or "/workspace" for the virtual tier). Nothing is read from
// the file system.
func relPath(p string, roots ...string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: it contains a NUL byte", ErrEscape)
	}
	if path.IsAbs(p) {
		c := path.Clean(p)
		for _, r := range roots {
			r = path.Clean(filepath.ToSlash(r))
			if r == "/" {
				continue // never treat the file-system root as a workspace
			}
			if c == r {
				return ".", nil
			}
			if strings.HasPrefix(c, r+"/") {
				return checkLen(c[len(r)+1:])
			}
		}
		return "", fmt.Errorf("%w: it is an absolute path outside the workspace", ErrEscape)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: it climbs above the workspace root", ErrEscape)
	}
	return checkLen(c)
}

func checkLen(rel string) (string, error) {
	if len(rel) > MaxPathLen {
		return "", fmt.Errorf("path is %d bytes long (at most %d)", len(rel), MaxPathLen)
	}
	return rel, nil
}

// physical walks rel component by component from realRoot, following symbolic links the
// way the kernel would, and returns where it lands. Once a component does not exist (or
// cannot be examined) the rest is joined lexically: nothing there can be a link yet. A
// dangling link is followed to its target, so writing through it cannot escape either.
func physical(realRoot, rel string) (string, error) {
	cur := realRoot
	todo := strings.Split(rel, "/")
	hops := 0
	for i := 0; i < len(todo); i++ {
		c := todo[i]
		switch c {
		case "", ".":
			continue
		case "..":
			// cur is physical (no links), so its parent is its lexical parent.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			cur = filepath.Join(append([]string{next}, todo[i+1:]...)...)
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", fmt.Errorf("too many levels of symbolic links at %s", QuotePath(next))
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("read symbolic link: %w", err)
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo[i+1:]...)
		i = -1
	}
	if !within(realRoot, cur) {
		return "", fmt.Errorf("%w: a symbolic link leads outside the workspace", ErrEscape)
	}
	return cur, nil
}

// within reports whether p is root or lies under it. Both are clean absolute paths.
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// QuotePath renders a path for an error message: quoted (so NUL bytes and spaces are
// visible) and shortened, so a hostile 4 KiB path does not flood the model's context.
func QuotePath(p string) string {
	const max = 200
	if len(p) > max {
		return fmt.Sprintf("%q…(%d bytes)", p[:max], len(p))
	}
	return fmt.Sprintf("%q", p)
}

// ShellQuote quotes s as one word for a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
