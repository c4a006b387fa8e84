package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/nexo-temporal/nexo/sandbox"
)

// Limits of Glob.
const (
	// maxListing bounds the file listing a Glob reads from the container (NUL-separated
	// paths under the pattern's literal directory).
	maxListing = 16 << 20
	// globTimeout bounds the listing command.
	globTimeout = time.Minute
)

// listCommand lists, below the directory dir, the regular files and then (after a record
// "//links", which no find output can be since every path starts with ".") the symbolic
// links, NUL-separated. find does not follow links, so nothing outside is listed.
// Unreadable directories are skipped (find reports them on stderr and goes on).
func listCommand(dir string) string {
	return "cd -- " + sandbox.ShellQuote(dir) + ` 2>/dev/null || exit 0
find . -type f -print0
printf '//links\0'
find . -type l -print0
exit 0`
}

// Glob returns the sorted workspace-relative paths of the files matching pattern, with the
// syntax of every tier (sandbox glob syntax: "*" within a segment, "**" across segments,
// "{a,b}"). Directories are not listed; the walk does not descend into linked directories,
// and a linked file is listed only when its target is a regular file inside the workspace.
// A pattern that climbs out, or whose literal directory prefix resolves outside, fails with
// sandbox.ErrEscape.
//
// The container lists the files (one exec of find); the matching happens here, with the
// same matcher as the other tiers, so a pattern means the same thing everywhere.
func (s *Sandbox) Glob(ctx context.Context, pattern string) ([]string, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("glob %s: %w", sandbox.QuotePath(pattern), err)
	}
	relPattern, err := relPattern(pattern, s.set.workdir)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", sandbox.QuotePath(pattern), err)
	}
	prefix := literalPrefix(relPattern)
	base, err := s.resolve(ctx, "glob", prefix)
	if err != nil {
		return nil, err // names the prefix; enough to see which part escaped
	}
	if base.stat == nil {
		if err := s.missing(ctx); errors.Is(err, ErrContainerGone) {
			return nil, fmt.Errorf("glob %s: %w", sandbox.QuotePath(pattern), err)
		}
		return []string{}, nil
	}
	if !base.stat.Mode.IsDir() {
		return []string{}, nil
	}
	listing, err := s.run(ctx, listCommand(base.phys), globTimeout, maxListing)
	switch {
	case err != nil:
		return nil, fmt.Errorf("glob %s: list files: %w", sandbox.QuotePath(pattern), err)
	case listing.TimedOut:
		return nil, fmt.Errorf("glob %s: listing the files took over %v; narrow the pattern", sandbox.QuotePath(pattern), globTimeout)
	case strings.HasPrefix(listing.Stdout, "[truncated "):
		return nil, fmt.Errorf("glob %s: over %d MiB of file names; narrow the pattern", sandbox.QuotePath(pattern), maxListing>>20)
	}
	out := []byte(listing.Stdout)
	// Match with the shared matcher: an in-memory workspace holding empty files at the
	// listed paths answers the pattern exactly as the other tiers would.
	match := sandbox.NewVirtual()
	defer match.Close(ctx)
	links := map[string]bool{}
	inLinks := false
	for _, rec := range bytes.Split(out, []byte{0}) {
		name := string(rec)
		switch {
		case name == "":
			continue
		case name == "//links":
			inLinks = true
			continue
		}
		rel := path.Join(prefix, name)
		if rel == "." || strings.HasPrefix(rel, "../") {
			continue
		}
		if _, err := match.Write(ctx, rel, nil); err != nil {
			continue // e.g. a path too long for the matcher; it cannot be read either
		}
		if inLinks {
			links[rel] = true
		}
	}
	found, err := match.Glob(ctx, relPattern)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", sandbox.QuotePath(pattern), err)
	}
	res := make([]string, 0, len(found))
	for _, f := range found {
		if links[f] {
			t, err := s.resolve(ctx, "glob", f)
			if err != nil || t.regular() != nil {
				continue // leads outside, dangles, or names a directory
			}
		}
		res = append(res, f)
	}
	return res, nil
}

// relPattern makes an absolute pattern under the workspace relative, so the matcher (whose
// own absolute root is the virtual /workspace) sees what this container means by it.
func relPattern(pattern, root string) (string, error) {
	if pattern == "" {
		return "", fmt.Errorf("%w: empty pattern", path.ErrBadPattern)
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return "", fmt.Errorf("%w: it contains a NUL byte", sandbox.ErrEscape)
	}
	if !path.IsAbs(pattern) {
		return pattern, nil
	}
	c := path.Clean(pattern)
	switch {
	case c == root:
		return ".", nil
	case strings.HasPrefix(c, root+"/"):
		return c[len(root)+1:], nil
	}
	return "", fmt.Errorf("%w: it is an absolute path outside the workspace %s", sandbox.ErrEscape, root)
}

// literalPrefix is the leading directories of pattern without glob syntax: where the
// listing can start. "." when the first segment already has some.
func literalPrefix(pattern string) string {
	segs := strings.Split(path.Clean(pattern), "/")
	n := 0
	for n < len(segs)-1 && !strings.ContainsAny(segs[n], `*?[\{`) {
		n++
	}
	if n == 0 {
		return "."
	}
	return path.Join(segs[:n]...)
}
