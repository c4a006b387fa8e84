package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// MaxWorkspaceArchive bounds the bytes of files a local or virtual workspace archive holds
// (parking a run's workspace to the artifact store, see activities/hostq.go). A bigger
// workspace is not parked: the park fails with an error naming the limit, and the run's
// files stay on its host only.
const MaxWorkspaceArchive = 1 << 30

// ErrArchiveTooLarge: the workspace holds more than MaxWorkspaceArchive bytes of files.
var ErrArchiveTooLarge = errors.New("workspace too large to archive")

// ArchiveWorkspace streams the workspace as a tar archive: its directories and regular
// files with their modes and times, relative to the workspace ("./notes.md"). Symbolic
// links and special files are left out (a link restored on another host could point
// anywhere). The archive is made while it is read; a workspace over MaxWorkspaceArchive
// fails the read with ErrArchiveTooLarge.
func (l *Local) ArchiveWorkspace(ctx context.Context) (io.ReadCloser, error) {
	if err := l.check(ctx); err != nil {
		return nil, fmt.Errorf("archive workspace %s: %w", QuotePath(l.root), err)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var total int64
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
			if !d.IsDir() && !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := l.singleLink(fi); err != nil {
				return fmt.Errorf("%s: %w", QuotePath(filepath.ToSlash(rel)), err)
			}
			hdr := &tar.Header{Name: "./" + filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
			if d.IsDir() {
				hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
				return tw.WriteHeader(hdr)
			}
			total += fi.Size()
			if total > MaxWorkspaceArchive {
				return fmt.Errorf("%w: more than %d bytes of files", ErrArchiveTooLarge, MaxWorkspaceArchive)
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, fi.Size())
			return err
		})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// RestoreWorkspace empties the workspace and extracts an archive made by ArchiveWorkspace
// (or by the Docker tier) into it. Entries that would land outside the workspace, links
// and special files are skipped; more than MaxWorkspaceArchive bytes of files fail.
func (l *Local) RestoreWorkspace(ctx context.Context, archive io.Reader) error {
	if err := l.check(ctx); err != nil {
		return fmt.Errorf("restore workspace %s: %w", QuotePath(l.root), err)
	}
	entries, err := os.ReadDir(l.realRoot)
	if err != nil {
		return fmt.Errorf("restore workspace %s: %w", QuotePath(l.root), err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(l.realRoot, e.Name())); err != nil {
			return fmt.Errorf("restore workspace %s: clear: %w", QuotePath(l.root), err)
		}
	}
	err = readArchive(ctx, archive, func(rel string, hdr *tar.Header, body io.Reader) error {
		dst := filepath.Join(l.realRoot, filepath.FromSlash(rel))
		mode := fs.FileMode(hdr.Mode).Perm()
		if hdr.Typeflag == tar.TypeDir {
			return os.MkdirAll(dst, mode|0o700)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, body); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return os.Chtimes(dst, hdr.ModTime, hdr.ModTime)
	})
	if err != nil {
		return fmt.Errorf("restore workspace %s: %w", QuotePath(l.root), err)
	}
	return nil
}

// readArchive calls fn for every directory and regular file of a tar archive whose name is
// a clean path inside the workspace (workspace-relative, "/"-separated), and fails past
// MaxWorkspaceArchive bytes of files.
func readArchive(ctx context.Context, archive io.Reader, fn func(rel string, hdr *tar.Header, body io.Reader) error) error {
	tr := tar.NewReader(archive)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeDir && hdr.Typeflag != tar.TypeReg {
			continue
		}
		rel := path.Clean(strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "/"))
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if hdr.Typeflag == tar.TypeReg {
			total += hdr.Size
			if total > MaxWorkspaceArchive {
				return fmt.Errorf("%w: more than %d bytes of files", ErrArchiveTooLarge, MaxWorkspaceArchive)
			}
		}
		if err := fn(rel, hdr, tr); err != nil {
			return fmt.Errorf("extract %s: %w", rel, err)
		}
	}
}

// ArchiveWorkspace returns the virtual workspace's files as a tar archive (the same shape
// as the Local and Docker tiers' archives), taken at the moment of the call.
func (v *Virtual) ArchiveWorkspace(ctx context.Context) (io.ReadCloser, error) {
	v.mu.RLock()
	if v.closed {
		v.mu.RUnlock()
		return nil, fmt.Errorf("archive virtual workspace: %w", ErrClosed)
	}
	names := make([]string, 0, len(v.files))
	var total int64
	for n, f := range v.files {
		names = append(names, n)
		total += int64(len(f.data))
	}
	files := make(map[string]virtualFile, len(v.files))
	for n, f := range v.files {
		files[n] = f // data is never changed in place (Write stores a copy)
	}
	v.mu.RUnlock()
	if total > MaxWorkspaceArchive {
		return nil, fmt.Errorf("archive virtual workspace: %w: %d bytes of files", ErrArchiveTooLarge, total)
	}
	sort.Strings(names)
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		for _, n := range names {
			f := files[n]
			if err = ctx.Err(); err != nil {
				break
			}
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "./" + n, Mode: 0o644, Size: int64(len(f.data)), ModTime: f.mod}
			if err = tw.WriteHeader(hdr); err != nil {
				break
			}
			if _, err = tw.Write(f.data); err != nil {
				break
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// RestoreWorkspace replaces the virtual workspace's files with an archive's regular files.
func (v *Virtual) RestoreWorkspace(ctx context.Context, archive io.Reader) error {
	files := map[string]virtualFile{}
	err := readArchive(ctx, archive, func(rel string, hdr *tar.Header, body io.Reader) error {
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		data, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		mod := hdr.ModTime
		if mod.IsZero() {
			mod = time.Now()
		}
		files[rel] = virtualFile{data: data, mod: mod}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore virtual workspace: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return fmt.Errorf("restore virtual workspace: %w", ErrClosed)
	}
	for rel, f := range files {
		v.writes++
		f.gen = v.writes
		files[rel] = f
	}
	v.files = files
	return nil
}

// LocalInstructions is what a Local sandbox over dir says in the system prompt, without
// creating the directory (a worker that only calls the model must not make one).
func LocalInstructions(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return (&Local{root: abs}).Instructions()
}
