package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"

	"github.com/moby/moby/client"
	"github.com/nexo-temporal/nexo/sandbox"
)

// maxSymlinkHops bounds how many symbolic links one resolution follows (Linux MAXSYMLINKS).
const maxSymlinkHops = 40

// target is where a workspace path leads inside the container, every symbolic link on the
// way resolved (by the Docker daemon, in the container's file system) and checked.
type target struct {
	rel    string              // the path as the caller gave it, cleaned, workspace-relative
	phys   string              // absolute container path: physical up to the last existing component
	stat   *container.PathStat // what is at phys (never a link); nil when nothing is
	parent string              // the deepest existing directory on the way (physical)
	tail   []string            // components from parent to phys (the last one is phys's name)
}

// resolve guards p: it must be workspace-relative, or absolute under the workspace, and
// every existing component is resolved in the container, following symbolic links (a
// dangling one to where a write would land); the physical result must lie in the
// workspace, else the error wraps sandbox.ErrEscape.
//
// The resolution and the later use are separate API calls, so a concurrent command could
// swap a directory for a link in between. That is no escalation: a run that has a shell
// can read and write everything the container can anyway, and without one nothing else
// creates links in the workspace.
func (s *Sandbox) resolve(ctx context.Context, op, p string) (target, error) {
	if err := s.check(ctx); err != nil {
		return target{}, fmt.Errorf("%s %s: %w", op, sandbox.QuotePath(p), err)
	}
	rel, err := relPath(p, s.set.workdir)
	if err != nil {
		return target{}, fmt.Errorf("%s %s: %w", op, sandbox.QuotePath(p), err)
	}
	t, err := s.walk(ctx, rel)
	if err != nil {
		return target{}, fmt.Errorf("%s %s: %w", op, sandbox.QuotePath(p), err)
	}
	return t, nil
}

// walk resolves the clean workspace-relative rel one component at a time with
// ContainerStatPath, which reports whether a component is a link and, if so, its target
// fully resolved in the container. A link restarts the walk from its target, so each
// component the result depends on has been seen.
func (s *Sandbox) walk(ctx context.Context, rel string) (target, error) {
	root := s.set.workdir
	todo := splitPath(rel)
	cur := root
	var last *container.PathStat
	hops := 0
	for i := 0; i < len(todo); i++ {
		next := path.Join(cur, todo[i])
		res, err := s.cli.ContainerStatPath(ctx, s.id, client.ContainerStatPathOptions{Path: next})
		st := res.Stat
		if err != nil {
			if cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "No such container") {
				return target{rel: rel, phys: path.Join(append([]string{next}, todo[i+1:]...)...),
					parent: cur, tail: todo[i:]}, nil
			}
			return target{}, fmt.Errorf("stat %s in the container: %w", next, s.apiError(err))
		}
		if st.Mode&os.ModeSymlink != 0 {
			hops++
			if hops > maxSymlinkHops {
				return target{}, fmt.Errorf("too many levels of symbolic links at %s", next)
			}
			dest := path.Clean(st.LinkTarget)
			if !path.IsAbs(dest) || !within(root, dest) {
				return target{}, fmt.Errorf("%w: a symbolic link leads outside the workspace", sandbox.ErrEscape)
			}
			todo = append(splitPath(strings.TrimPrefix(strings.TrimPrefix(dest, root), "/")), todo[i+1:]...)
			cur, last, i = root, nil, -1
			continue
		}
		if i < len(todo)-1 && !st.Mode.IsDir() {
			return target{}, fmt.Errorf("%s: %w (%s is not a directory)", next, sandbox.ErrNotFound, path.Join(todo[:i+1]...))
		}
		cur, last = next, &st
	}
	if cur == root {
		return target{rel: rel, phys: root, stat: &container.PathStat{Name: path.Base(root), Mode: os.ModeDir | 0o755},
			parent: root}, nil
	}
	return target{rel: rel, phys: cur, stat: last, parent: path.Dir(cur), tail: []string{path.Base(cur)}}, nil
}

// Read returns the file's bytes.
func (s *Sandbox) Read(ctx context.Context, p string) ([]byte, error) {
	t, err := s.resolve(ctx, "read", p)
	if err != nil {
		return nil, err
	}
	if t.stat == nil {
		return nil, fmt.Errorf("read %s: %w", sandbox.QuotePath(p), s.missing(ctx))
	}
	if err := t.regular(); err != nil {
		return nil, fmt.Errorf("read %s: %w", sandbox.QuotePath(p), err)
	}
	res, err := s.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: t.phys})
	rc := res.Content
	if err != nil {
		if cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "No such container") {
			return nil, fmt.Errorf("read %s: %w", sandbox.QuotePath(p), sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("read %s: %w", sandbox.QuotePath(p), s.apiError(err))
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("read %s: read archive: %w", sandbox.QuotePath(p), err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("read %s: changed while being read (now a %c entry)", sandbox.QuotePath(p), hdr.Typeflag)
	}
	data := make([]byte, 0, hdr.Size)
	buf := bytes.NewBuffer(data)
	if _, err := io.Copy(buf, tr); err != nil {
		return nil, fmt.Errorf("read %s: read archive: %w", sandbox.QuotePath(p), err)
	}
	return buf.Bytes(), nil
}

// Write creates or replaces the file at p with data through the archive API, creating
// missing parent directories (0755), and returns the workspace-relative path. Files and
// directories it creates belong to the container's user. An existing file keeps its
// permission bits (a new one is 0644); writing through a symbolic link that stays in the
// workspace writes its target.
func (s *Sandbox) Write(ctx context.Context, p string, data []byte) (string, error) {
	t, err := s.resolve(ctx, "write", p)
	if err != nil {
		return "", err
	}
	if t.phys == s.set.workdir {
		return "", fmt.Errorf("write %s: is the workspace root", sandbox.QuotePath(p))
	}
	mode := int64(0o644)
	if t.stat != nil {
		if t.stat.Mode.IsDir() {
			return "", fmt.Errorf("write %s: is a directory", sandbox.QuotePath(p))
		}
		if !t.stat.Mode.IsRegular() {
			return "", fmt.Errorf("write %s: is not a regular file (%v)", sandbox.QuotePath(p), t.stat.Mode.Type())
		}
		mode = int64(t.stat.Mode.Perm())
	}
	// What Write creates belongs to the container's user, so the agent's shell can change
	// it; an existing file is replaced and takes the same owner.
	uid, gid, err := s.owner(ctx)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", sandbox.QuotePath(p), err)
	}
	var buf bytes.Buffer
	buf.Grow(len(data) + 2048)
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for i := 1; i < len(t.tail); i++ {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path.Join(t.tail[:i]...) + "/",
			Mode: 0o755, Uid: uid, Gid: gid, ModTime: now, Format: tar.FormatPAX}); err != nil {
			return "", fmt.Errorf("write %s: %w", sandbox.QuotePath(p), err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(t.tail...),
		Mode: mode, Uid: uid, Gid: gid, Size: int64(len(data)), ModTime: now, Format: tar.FormatPAX}); err != nil {
		return "", fmt.Errorf("write %s: %w", sandbox.QuotePath(p), err)
	}
	if _, err := tw.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", sandbox.QuotePath(p), err)
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", sandbox.QuotePath(p), err)
	}
	_, err = s.cli.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{DestinationPath: t.parent, Content: &buf})
	if err != nil {
		return "", fmt.Errorf("write %s: copy into the container: %w", sandbox.QuotePath(p), s.apiError(err))
	}
	return t.rel, nil
}

// Stat reports the size and modification time of the file at p (following a symbolic link
// that stays inside). A directory is an error: Stat is for files.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	t, err := s.resolve(ctx, "stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if t.stat == nil {
		return sandbox.FileInfo{}, fmt.Errorf("stat %s: %w", sandbox.QuotePath(p), s.missing(ctx))
	}
	if err := t.regular(); err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("stat %s: %w", sandbox.QuotePath(p), err)
	}
	return sandbox.FileInfo{Size: t.stat.Size, ModTime: t.stat.Mtime}, nil
}

// missing explains a path that does not exist: sandbox.ErrNotFound, or ErrContainerGone
// when the whole container is (the archive API answers both with the same bodiless 404).
func (s *Sandbox) missing(ctx context.Context) error {
	if _, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{}); err != nil && cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: container %s (%s)", ErrContainerGone, s.name, shortID(s.id))
	}
	return sandbox.ErrNotFound
}

// regular fails unless t is an existing regular file.
func (t target) regular() error {
	switch {
	case t.stat == nil:
		return sandbox.ErrNotFound
	case t.stat.Mode.IsDir():
		return errors.New("is a directory")
	case !t.stat.Mode.IsRegular():
		return fmt.Errorf("is not a regular file (%v)", t.stat.Mode.Type())
	}
	return nil
}

// relPath cleans p lexically into a workspace-relative, slash-separated path ("." for the
// root): the same rules as the other tiers (sandbox.Resolve) with the container's
// workspace as the only absolute root. Nothing is read.
func relPath(p, root string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: it contains a NUL byte", sandbox.ErrEscape)
	}
	c := path.Clean(p)
	if path.IsAbs(p) {
		switch {
		case c == root:
			return ".", nil
		case strings.HasPrefix(c, root+"/"):
			c = c[len(root)+1:]
		default:
			return "", fmt.Errorf("%w: it is an absolute path outside the workspace %s", sandbox.ErrEscape, root)
		}
	} else if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: it climbs above the workspace root", sandbox.ErrEscape)
	}
	if len(c) > sandbox.MaxPathLen {
		return "", fmt.Errorf("path is %d bytes long (at most %d)", len(c), sandbox.MaxPathLen)
	}
	return c, nil
}

// splitPath splits a clean relative path into its components ("." has none).
func splitPath(rel string) []string {
	if rel == "" || rel == "." {
		return nil
	}
	return strings.Split(rel, "/")
}

// within reports whether p is root or lies under it. Both are clean absolute paths.
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}
