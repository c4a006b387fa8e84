package docker

import (
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

	"github.com/nexo-temporal/nexo/sandbox"
)

// Listing a container's workspace for an incremental snapshot (activities/snapshot.go):
// the archive of the whole workspace costs its every byte each time, 50 MB for one changed
// file. Instead one command on the container's command server (milliseconds, no exec)
// lists every entry with find and stat, and only the files whose stamp moved are read,
// each with cat on the command server (the archive API costs 60-100 ms a call).
//
// stat's times in whole seconds are what busybox prints fast (with nanoseconds it takes
// twice as long); a file is trusted unchanged only when its change time's whole second
// ended before the previous listing began (ChangeUnixNano is the end of that second), so
// two writes of one size within a second are never mistaken for one.
//
// The listing and the reads run inside the sandbox, so its processes could misreport
// them; that only misreports the run's own workspace to its own snapshot, which the same
// processes could change anyway. Anything the listing cannot say unambiguously (a name
// with a newline, a line that does not parse, an image without find or stat, a truncated
// output) is sandbox.ErrListingUnsupported, and the caller reads the whole archive.

// listScript prints one line per entry: raw mode in hex, inode, size, modification and
// change times (unix seconds), the path ("./"-relative, last, so a "|" in it is kept); and
// a line "N" for any name that holds a newline (which a line-based listing cannot carry).
// Other file types are listed by stat and skipped by the parser.
const listScript = `cd "$1" || exit 3
nl='
'
find . -mindepth 1 \( -name "*$nl*" -exec echo N \; \) -o -exec stat -c '%f|%i|%s|%Y|%Z|%n' {} + || exit 4
`

// linkScript prints "L|<path>|<target>" for each symbolic link of the workspace; run only
// when the listing found one.
const linkScript = `cd "$1" || exit 3
find . -mindepth 1 -type l -exec sh -c 'for f; do printf "L|%s|%s\n" "$f" "$(readlink "$f")"; done' sh {} + || exit 5
`

// catScript prints the regular file $2 of the workspace $1; exit 4: not a regular file,
// 5: nothing there.
const catScript = `cd "$1" || exit 3
[ -L "$2" ] && exit 4
[ -f "$2" ] || { [ -e "$2" ] && exit 4; exit 5; }
exec cat -- "$2"
`

// maxWorkspaceFile bounds one file read for a snapshot (the snapshot's own bound of one
// file, activities.maxSnapshotFile).
const maxWorkspaceFile = 256 << 20

// maxWorkspaceListing bounds the listing's output: about 100 bytes a file, so a million files.
const maxWorkspaceListing = 128 << 20

// listTimeout bounds the listing command.
const listTimeout = 2 * time.Minute

var (
	_ sandbox.Lister      = (*Sandbox)(nil)
	_ sandbox.ShellLister = (*Sandbox)(nil)
)

// ListWorkspace lists the container's workspace (see sandbox.Lister); see above for when it
// answers sandbox.ErrListingUnsupported.
func (s *Sandbox) ListWorkspace(ctx context.Context) ([]sandbox.WorkspaceEntry, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("list workspace of %s: %w", s.name, err)
	}
	out, err := s.listCommand(ctx, listScript)
	if err != nil {
		return nil, err
	}
	return s.finishListing(ctx, out)
}

// ShellAndList is Shell followed, in the same round trip on the command server, by the
// workspace's listing as ListWorkspace gives it, taken once the command and everything
// left in its process group are gone (see serverScript): a snapshot after a shell call
// needs no round trip of its own. The entries are nil when the listing could not be
// taken that way (an image that cannot run the command server, a command killed at its
// timeout, a listing that failed or does not parse); the caller then lists with
// ListWorkspace, which says why.
func (s *Sandbox) ShellAndList(ctx context.Context, command string, timeout time.Duration) (sandbox.ShellResult, []sandbox.WorkspaceEntry, error) {
	res, out, err := s.shell(ctx, command, timeout, true)
	if err != nil || out == nil {
		return res, nil, err
	}
	entries, err := s.finishListing(ctx, string(out))
	if err != nil {
		return res, nil, nil // ListWorkspace, run by the caller, says what failed
	}
	if entries == nil {
		entries = []sandbox.WorkspaceEntry{} // an empty workspace, listed
	}
	return res, entries, nil
}

// finishListing reads listScript's output out, with the targets of its symbolic links
// (linkScript, one more round trip, only when the listing holds a link).
func (s *Sandbox) finishListing(ctx context.Context, out string) ([]sandbox.WorkspaceEntry, error) {
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "a") { // raw mode 0xa...: a symbolic link
			links, err := s.listCommand(ctx, linkScript)
			if err != nil {
				return nil, err
			}
			out += links
			break
		}
	}
	entries, err := parseListing(out)
	if err != nil {
		return nil, fmt.Errorf("list workspace of %s: %w: %v", s.name, sandbox.ErrListingUnsupported, err)
	}
	return entries, nil
}

// listCommand runs a listing script on the workspace and returns its output.
func (s *Sandbox) listCommand(ctx context.Context, script string) (string, error) {
	res, err := s.run(ctx, "set -- "+shellQuote(s.set.workdir)+"\n"+script, listTimeout, maxWorkspaceListing)
	if err != nil {
		return "", fmt.Errorf("list workspace of %s: %w", s.name, err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return "", fmt.Errorf("list workspace of %s: %w: the listing command exited %d: %s", s.name,
			sandbox.ErrListingUnsupported, res.ExitCode, firstLine(res.Stderr))
	}
	return res.Stdout, nil
}

// parseListing reads listScript's output.
func parseListing(out string) ([]sandbox.WorkspaceEntry, error) {
	if !strings.HasSuffix(out, "\n") && out != "" {
		return nil, errors.New("the listing does not end with a newline")
	}
	byPath := map[string]int{}
	var entries []sandbox.WorkspaceEntry
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		if line == "N" {
			return nil, errors.New("a name in the workspace holds a newline")
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
		mod, err3 := strconv.ParseInt(f[3], 10, 64)
		chg, err4 := strconv.ParseInt(f[4], 10, 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("line %q: %v", line, err)
		}
		p := path.Clean(strings.TrimPrefix(f[5], "./"))
		if p == "." || strings.HasPrefix(p, "../") || p == ".." {
			return nil, fmt.Errorf("line %q names no workspace path", line)
		}
		e := sandbox.WorkspaceEntry{Path: p, Mode: fs.FileMode(mode & 0o777), ModUnixNano: mod * int64(time.Second)}
		switch mode & 0o170000 {
		case 0o040000:
			e.Type = sandbox.EntryDir
		case 0o100000:
			// The end of the change time's second: see above.
			e.Type, e.Size, e.Change, e.ChangeUnixNano = sandbox.EntryFile, size, f[1], (chg+1)*int64(time.Second)-1
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

// OpenWorkspaceFile reads rel out of the container with cat on the command server (see
// sandbox.Lister): a symbolic link at the path's end is ErrNotRegular, nothing there
// ErrNotFound; a file over the snapshot's bound of one file is refused.
func (s *Sandbox) OpenWorkspaceFile(ctx context.Context, rel string) (io.ReadCloser, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), err)
	}
	clean := path.Clean(rel)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), sandbox.ErrEscape)
	}
	res, err := s.cat(ctx, "./"+clean, maxWorkspaceFile+1)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), err)
	}
	switch {
	case res.TimedOut:
		return nil, fmt.Errorf("open %s: reading it took over %s", sandbox.QuotePath(rel), listTimeout)
	case res.ExitCode == 4:
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), sandbox.ErrNotRegular)
	case res.ExitCode == 5:
		return nil, fmt.Errorf("open %s: %w", sandbox.QuotePath(rel), sandbox.ErrNotFound)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("open %s: cat exited %d: %s", sandbox.QuotePath(rel), res.ExitCode, firstLine(res.Stderr))
	case len(res.Stdout) > maxWorkspaceFile:
		return nil, fmt.Errorf("open %s: %w: over %d bytes", sandbox.QuotePath(rel), sandbox.ErrArchiveTooLarge, maxWorkspaceFile)
	}
	return io.NopCloser(strings.NewReader(res.Stdout)), nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// OpenLimit: past this many changed files a snapshot reads the archive (see
// sandbox.OpenLimiter): a file read costs a round trip of about 5-10 ms on the command
// server, the archive of a 50 MB workspace about 500 ms.
func (s *Sandbox) OpenLimit() int { return 64 }
