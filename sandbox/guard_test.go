package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guardFixture builds tmp/root (the workspace) next to tmp/outside (with a secret), and
// plants every kind of symbolic link inside root.
func guardFixture(t *testing.T) (root, outside string) {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(tmp, "root")
	outside = filepath.Join(tmp, "outside")
	mustMkdir(t, filepath.Join(root, "sub"))
	mustMkdir(t, outside)
	mustWrite(t, filepath.Join(root, "a.txt"), "a")
	mustWrite(t, filepath.Join(root, "sub", "file.txt"), "f")
	mustWrite(t, filepath.Join(outside, "secret"), "s")
	links := map[string]string{
		"toroot":      "/",
		"out":         outside,
		"outrel":      "../outside",
		"chain1":      "chain2",
		"chain2":      "sub/chain3",
		"sub/chain3":  "../../outside/secret",
		"dangling":    filepath.Join(outside, "new.txt"),
		"danglingrel": "../outside/newer.txt",
		"danglingdir": "../outside/nodir/deeper",
		"inlink":      "sub",
		"filelink":    "sub/file.txt",
		"absinlink":   filepath.Join(root, "sub"),
		"loop1":       "loop2",
		"loop2":       "loop1",
		"dotdotlink":  "..",
		"selflink":    ".",
		"indangling":  "sub/notyet.txt",
		"roundtrip":   "../root/sub", // leaves and comes back: lands inside
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolveInside(t *testing.T) {
	root, _ := guardFixture(t)
	tests := []struct {
		in   string
		want string // relative to root
	}{
		{"a.txt", "a.txt"},
		{"", "."},
		{".", "."},
		{"./", "."},
		{"sub/file.txt", "sub/file.txt"},
		{"sub/", "sub"},
		{"./sub/../a.txt", "a.txt"},
		{"a/../b", "b"},
		{"new/dir/x.txt", "new/dir/x.txt"},
		{"....", "...."}, // a name, not a climb
		{"..a", "..a"},
		{root + "/a.txt", "a.txt"},
		{root, "."},
		{root + "/sub/../a.txt", "a.txt"},
		{"inlink/file.txt", "sub/file.txt"},
		{"filelink", "sub/file.txt"},
		{"absinlink/file.txt", "sub/file.txt"},
		{"selflink/a.txt", "a.txt"},
		{"selflink/selflink/sub", "sub"},
		{"indangling", "sub/notyet.txt"},
		{"roundtrip/file.txt", "sub/file.txt"},
		{"inlink/../a.txt", "a.txt"}, // lexical: ".." undoes "inlink" before any link is read
		{`..\..\x`, `..\..\x`},       // a backslash is a file-name byte on unix
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Resolve(root, tt.in)
			if err != nil {
				t.Fatalf("Resolve(%q) error: %v", tt.in, err)
			}
			if want := filepath.Join(root, tt.want); got != want {
				t.Errorf("Resolve(%q) = %q, want %q", tt.in, got, want)
			}
		})
	}
}

func TestResolveEscapes(t *testing.T) {
	root, outside := guardFixture(t)
	tests := []string{
		"..",
		"../",
		"../x",
		"../outside/secret",
		"a/../../x",
		"sub/../../outside",
		"./../root/../outside",
		"/etc/passwd",
		"/",
		"/workspace/x", // the virtual spelling means nothing on the host
		outside + "/secret",
		root + "/../outside/secret",
		root + "x/a.txt", // a sibling sharing the root's name as a prefix
		"toroot/etc/passwd",
		"toroot",
		"out/secret",
		"out",
		"outrel/secret",
		"chain1",             // chain of links ending outside
		"dangling",           // dangling link whose target would be created outside
		"danglingrel",        // same, relative target
		"danglingdir/x.txt",  // dangling through a missing directory
		"dotdotlink",         // link to the parent
		"dotdotlink/outside", // and through it
		"dotdotlink/root/../outside/secret",
		"a\x00b",
		"a.txt\x00../../etc/passwd",
		strings.Repeat("../", 2000) + "etc/passwd",
		strings.Repeat("a/", 50) + strings.Repeat("../", 51) + "x",
	}
	for _, in := range tests {
		t.Run(strings.ReplaceAll(in, "\x00", `\0`), func(t *testing.T) {
			got, err := Resolve(root, in)
			if !errors.Is(err, ErrEscape) {
				t.Fatalf("Resolve(%q) = %q, %v; want ErrEscape", in, got, err)
			}
			if !strings.Contains(err.Error(), "resolve ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	root, _ := guardFixture(t)
	tests := []struct {
		name, root, in string
		contains       string
	}{
		{"symlink loop", root, "loop1", "too many levels"},
		{"very long path", root, strings.Repeat("a/", MaxPathLen), "bytes long"},
		{"file-system root", "/", "etc/passwd", "file-system root"},
		{"empty root", "", "a", "empty"},
		{"missing root", filepath.Join(root, "nope"), "a", "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.root, tt.in)
			if err == nil {
				t.Fatalf("Resolve = %q, want an error", got)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
		})
	}
}

func TestResolveErrorNamesPath(t *testing.T) {
	root, _ := guardFixture(t)
	_, err := Resolve(root, "../../etc/shadow")
	if err == nil || !strings.Contains(err.Error(), `"../../etc/shadow"`) {
		t.Errorf("error %v does not name the path", err)
	}
	long := strings.Repeat("../", 1000)
	_, err = Resolve(root, long)
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("error for a 3000-byte path is %d bytes; want it shortened", len(err.Error()))
	}
}

// A root spelled through a symbolic link (as /tmp is on macOS) accepts both spellings of
// absolute paths and resolves to the physical directory.
func TestResolveSymlinkedRoot(t *testing.T) {
	root, _ := guardFixture(t)
	alias := filepath.Join(filepath.Dir(root), "alias")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"a.txt", alias + "/a.txt", root + "/a.txt"} {
		got, err := Resolve(alias, in)
		if err != nil {
			t.Fatalf("Resolve(alias, %q): %v", in, err)
		}
		if want := filepath.Join(root, "a.txt"); got != want {
			t.Errorf("Resolve(alias, %q) = %q, want %q", in, got, want)
		}
	}
	if _, err := Resolve(alias, "../outside/secret"); !errors.Is(err, ErrEscape) {
		t.Errorf("escape through an aliased root: err = %v, want ErrEscape", err)
	}
}
