package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/nexo-temporal/nexo/sandbox"
)

// Listing a container's workspace for an incremental snapshot (activities/snapshot.go):
// the archive of the whole workspace costs its every byte each time, 50 MB for one changed
// file. Instead one command on the container's command server (milliseconds, no exec)
// lists every entry with find and stat, and only the files whose stamp moved are copied
// out, each through the archive API.
//
// The listing is produced inside the sandbox, so its processes could misreport it; that
// only misreports the run's own workspace to its own snapshot, which the same processes
// could change anyway. Anything the listing cannot say unambiguously (a name with a
// newline, a line that does not parse, an image without find or stat, a truncated
// output) is sandbox.ErrListingUnsupported, and the caller reads the whole archive.

// listScript prints "N" and stops if any name in the workspace holds a newline (a line a
// parser could not tell apart), else one line per directory, regular file or symbolic
// link: raw mode in hex, inode, size, modification and change times (with nanoseconds),
// the path ("./"-relative, last, so a "|" in it is kept); then "L|<path>|<target>" per
// symbolic link. Other file types are listed by stat and skipped by the parser.
const listScript = `cd "$1" || exit 3
nl='
'
if [ -n "$(find . -mindepth 1 -name "*$nl*" 2>/dev/null | head -c 1)" ]; then echo N; exit 0; fi
find . -mindepth 1 -exec stat -c '%f|%i|%s|%y|%z|%n' {} + || exit 4
find . -mindepth 1 -type l -exec sh -c 'for f; do printf "L|%s|%s\n" "$f" "$(readlink "$f")"; done' sh {} + || exit 5
`

// maxWorkspaceListing bounds the listing's output: about 100 bytes a file, so a million files.
const maxWorkspaceListing = 128 << 20

// listTimeout bounds the listing command.
const listTimeout = 2 * time.Minute

var _ sandbox.Lister = (*Sandbox)(nil)

// ListWorkspace lists the container's workspace (see sandbox.Lister); see above for when it
// answers sandbox.ErrListingUnsupported.
func (s *Sandbox) ListWorkspace(ctx context.Context) ([]sandbox.WorkspaceEntry, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("list workspace of %s: %w", s.name, err)
	}
	cmd := "set -- " + shellQuote(s.set.workdir) + "\n" + listScript
	res, err := s.run(ctx, cmd, listTimeout, maxWorkspaceListing)
	if err != nil {
		return nil, fmt.Errorf("list workspace of %s: %w", s.name, err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return nil, fmt.Errorf("list workspace of %s: %w: the listing command exited %d: %s", s.name,
			sandbox.ErrListingUnsupported, res.ExitCode, firstLine(res.Stderr))
	}
	entries, err := parseListing(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("list workspace of %s: %w: %v", s.name, sandbox.ErrListingUnsupported, err)
	}
	return entries, nil
}

// parseListing reads listScript's output.
func parseListing(out string) ([]sandbox.WorkspaceEntry, error) {
	if out == "N\n" {
		return nil, errors.New("a name in the workspace holds a newline")
	}
	if !strings.HasSuffix(out, "\n") && out != "" {
		return nil, errors.New("the listing does not end with a newline")
	}
	byPath := map[string]int{}
	var entries []sandbox.WorkspaceEntry
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "L|./"); ok {
			p, target, ok := strings.Cut(rest, "|")
			i, known := byPath[p]
			if !ok || !known || entries[i].Type != sandbox.EntryLink {
				return nil, fmt.Errorf("link line %q names no listed link", line)
			}
			entries[i].Link = target
			continue
		}
		f := strings.SplitN(line, "|", 6)
		if len(f) != 6 || !strings.HasPrefix(f[5], "./") {
			return nil, fmt.Errorf("line %q does not parse", line)
		}
		mode, err1 := strconv.ParseUint(f[0], 16, 32)
		size, err2 := strconv.ParseInt(f[2], 10, 64)
		mod, err3 := parseStatTime(f[3])
		chg, err4 := parseStatTime(f[4])
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("line %q: %v", line, err)
		}
		p := path.Clean(strings.TrimPrefix(f[5], "./"))
		if p == "." || strings.HasPrefix(p, "../") || p == ".." {
			return nil, fmt.Errorf("line %q names no workspace path", line)
		}
		e := sandbox.WorkspaceEntry{Path: p, Mode: fs.FileMode(mode & 0o777), ModUnixNano: mod}
		switch mode & 0o170000 {
		case 0o040000:
			e.Type = sandbox.EntryDir
		case 0o100000:
			e.Type, e.Size, e.Change, e.ChangeUnixNano = sandbox.EntryFile, size, f[1], chg
		case 0o120000:
			e.Type = sandbox.EntryLink
		default:
			continue // FIFOs, sockets, devices are never listed
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("%s is listed twice", p)
		}
		byPath[p] = len(entries)
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return entries, nil
}

// parseStatTime reads stat's %y/%z ("2026-12-03 12:18:10.431519429 +0000").
func parseStatTime(s string) (int64, error) {
	t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700", s)
	if err != nil {
		return 0, err
	}
	return t.UnixNano(), nil
}

// OpenWorkspaceFile copies rel out of the container (see sandbox.Lister). The archive API
// does not follow a symbolic link at the path's end, so a file replaced by a link since
// the listing is ErrNotRegular.
func (s *Sandbox) OpenWorkspaceFile(ctx context.Context, rel string) (io.ReadCloser, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), err)
	}
	clean := path.Clean(rel)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), sandbox.ErrEscape)
	}
	rc, _, err := s.cli.CopyFromContainer(ctx, s.id, path.Join(s.set.workdir, clean))
	if err != nil {
		if cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "No such container") {
			return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), s.apiError(err))
	}
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("open %s: read archive: %w", sandbox.QuotePath(rel), err)
	}
	if hdr.Typeflag != tar.TypeReg {
		rc.Close()
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), sandbox.ErrNotRegular)
	}
	return struct {
		io.Reader
		io.Closer
	}{tr, rc}, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
