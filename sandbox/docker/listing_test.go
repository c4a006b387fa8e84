package docker

import (
	"archive/tar"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/sandbox"
)

// TestListWorkspaceMatchesTheArchive: the listing a snapshot compares names the same
// directories, files (size, mode) and links (target) as the workspace's archive, odd names
// included; its stamp moves when a file is written and stays when it is not; a file opened
// from the listing reads its bytes, and a directory or a missing path is refused.
func TestListWorkspaceMatchesTheArchive(t *testing.T) {
	t.Parallel()
	sb, _, _ := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	res, err := sb.Shell(ctx, `mkdir -p d/e && printf one > d/e/a.txt && printf 'pipe|name' > 'x|y z.txt' && chmod 600 'x|y z.txt' && ln -s d/e/a.txt link && mkfifo fifo`, 0)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("set up: %v %+v", err, res)
	}
	list, err := sb.ListWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		path, typ, link string
		size            int64
		mode            uint32
	}
	var got, want []row
	for _, e := range list {
		got = append(got, row{e.Path, e.Type, e.Link, e.Size, uint32(e.Mode)})
	}
	rc, err := sb.ArchiveWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		switch hdr.Typeflag {
		case tar.TypeDir:
			if p != "" && p != "." {
				want = append(want, row{p, sandbox.EntryDir, "", 0, uint32(hdr.Mode & 0o777)})
			}
		case tar.TypeReg:
			want = append(want, row{p, sandbox.EntryFile, "", hdr.Size, uint32(hdr.Mode & 0o777)})
		case tar.TypeSymlink:
			want = append(want, row{p, sandbox.EntryLink, hdr.Linkname, 0, uint32(hdr.Mode & 0o777)})
		}
	}
	rc.Close()
	slices.SortFunc(want, func(a, b row) int { return strings.Compare(a.path, b.path) })
	if !slices.Equal(got, want) {
		t.Fatalf("ListWorkspace:\n%v\nthe archive:\n%v", got, want)
	}

	stamp := func(p string) sandbox.WorkspaceEntry {
		l, err := sb.ListWorkspace(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l {
			if e.Path == p {
				return e
			}
		}
		t.Fatalf("%s not listed", p)
		return sandbox.WorkspaceEntry{}
	}
	listed := time.Now().UnixNano()
	before, again := stamp("d/e/a.txt"), stamp("d/e/a.txt")
	if before != again {
		t.Fatalf("a file nobody wrote listed %+v, then %+v", before, again)
	}
	if _, err := sb.Write(ctx, "d/e/a.txt", []byte("two")); err != nil {
		t.Fatal(err)
	}
	// Times are whole seconds: a write within the second of the listing may keep the
	// stamp, and then its change second has not ended before the listing began, so a
	// snapshot hashes the file again (activities/snapshot.go's racy window).
	if after := stamp("d/e/a.txt"); after.Change == before.Change && after.ChangeUnixNano == before.ChangeUnixNano && after.ChangeUnixNano < listed {
		t.Fatalf("a written file kept its stamp %+v, which ended before the listing at %d", after, listed)
	}
	f, err := sb.OpenWorkspaceFile(ctx, "x|y z.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "pipe|name" {
		t.Fatalf("OpenWorkspaceFile read %q", b)
	}
	if _, err := sb.OpenWorkspaceFile(ctx, "d"); !errors.Is(err, sandbox.ErrNotRegular) {
		t.Fatalf("OpenWorkspaceFile(dir) = %v, want ErrNotRegular", err)
	}
	if _, err := sb.OpenWorkspaceFile(ctx, "gone.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("OpenWorkspaceFile(missing) = %v, want ErrNotFound", err)
	}
	if _, err := sb.OpenWorkspaceFile(ctx, "../etc/passwd"); !errors.Is(err, sandbox.ErrEscape) {
		t.Fatalf("OpenWorkspaceFile(../etc/passwd) = %v, want ErrEscape", err)
	}

	// A name with a newline cannot be listed line by line: the snapshot reads the archive.
	if _, err := sb.Write(ctx, "two\nlines.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ListWorkspace(ctx); !errors.Is(err, sandbox.ErrListingUnsupported) {
		t.Fatalf("ListWorkspace with a newline in a name = %v, want ErrListingUnsupported", err)
	}
}

// TestParseListingRefusesWhatItCannotRead: output the parser cannot read unambiguously is
// refused, never half-read.
func TestParseListingRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	good := "81a4|12|3|1796300290|1796300291|./a|b\n"
	l, err := parseListing(good)
	if err != nil || len(l) != 1 || l[0].Path != "a|b" || l[0].Size != 3 || l[0].Mode != 0o644 || l[0].Change != "12" ||
		l[0].ModUnixNano != 1796300290e9 || l[0].ChangeUnixNano != 1796300292e9-1 {
		t.Fatalf("parseListing(good) = %+v, %v", l, err)
	}
	for name, out := range map[string]string{
		"newline marker": good + "N\n",
		"truncated":      "[truncated 12 bytes]\n" + good,
		"no final line":  strings.TrimSuffix(good, "\n"),
		"twice":          good + good,
		"bad time":       "81a4|12|3|yesterday|1796300291|./a\n",
		"escaping":       "81a4|12|3|1796300290|1796300291|./../a\n",
		"stray link":     "L|./nowhere|target\n",
	} {
		if l, err := parseListing(out); err == nil {
			t.Errorf("%s: parseListing = %+v, want an error", name, l)
		}
	}
}

// TestShellAndListListsAfterTheCommand: the listing a shell call's own round trip carries
// is ListWorkspace's, taken after the command: it holds what the command wrote (and a
// link's target), not what a background job of the command would have written later (the
// job dies with the command's group), and the command's own output and exit code are as
// Shell gives them. A command killed at its timeout carries no listing, nor does a
// workspace the listing cannot read (a newline in a name): the caller lists.
func TestShellAndListListsAfterTheCommand(t *testing.T) {
	t.Parallel()
	sb, _, _ := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	res, got, err := sb.ShellAndList(ctx, `printf none; echo err >&2; exit 3`, 0)
	if err != nil || res.ExitCode != 3 || res.Stdout != "none" || res.Stderr != "err\n" {
		t.Fatalf("ShellAndList on an empty workspace: %v %+v", err, res)
	}
	if got == nil || len(got) != 0 {
		t.Fatalf("an empty workspace listed as %#v, want no entries (and not nil: it was listed)", got)
	}
	res, got, err = sb.ShellAndList(ctx, `mkdir -p d && printf abc > d/f.txt && ln -s d/f.txt link; (sleep 2; echo late > late.txt) & echo out`, 0)
	if err != nil || res.ExitCode != 0 || res.Stdout != "out\n" {
		t.Fatalf("ShellAndList: %v %+v", err, res)
	}
	want, err := sb.ListWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ShellAndList listed\n%+v\nListWorkspace lists\n%+v", got, want)
	}
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path+":"+e.Type+":"+e.Link)
	}
	if w := []string{"d:dir:", "d/f.txt:file:", "link:link:d/f.txt"}; !slices.Equal(paths, w) {
		t.Fatalf("listed %q, want %q", paths, w)
	}
	res, got, err = sb.ShellAndList(ctx, `sleep 30`, time.Second)
	if err != nil || !res.TimedOut || got != nil {
		t.Fatalf("a timed-out command: %v %+v, listing %v; want a timeout and no listing", err, res, got)
	}
	if _, err := sb.Write(ctx, "two\nlines.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if res, got, err = sb.ShellAndList(ctx, `true`, 0); err != nil || res.ExitCode != 0 || got != nil {
		t.Fatalf("a name with a newline: %v %+v, listing %v; want the command's result and no listing", err, res, got)
	}
}
