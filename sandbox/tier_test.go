package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// tier is one Sandbox implementation under test, with what the shared tests need to know
// about it.
type tier struct {
	name string
	sb   Sandbox
	// abs turns a workspace-relative path into the absolute spelling the tier accepts.
	abs func(rel string) string
	// outside lists every file outside the workspace that a test could have created (nil
	// for tiers with no host side).
	outside func(t *testing.T) []string
}

// ExtraTier makes one more tier for the matrix over dir, a workspace directory of the test's
// own: tiers in packages that import this one (sandbox/bwrap) add themselves from an
// external test file (bwrap_tier_test.go), which an internal test cannot import. It
// returns the tier's name and sandbox, or ok false when the tier cannot run here.
type ExtraTier func(t *testing.T, dir string) (name string, sb Sandbox, ok bool)

// ExtraTiers are added to every tier test.
var ExtraTiers []ExtraTier

func tiers(t *testing.T) []tier {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "ws", "root") // parents created by NewLocal
	loc, err := NewLocal(dir, LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close(context.Background()) })
	virt := NewVirtual()
	t.Cleanup(func() { virt.Close(context.Background()) })
	out := []tier{
		{
			name: "virtual",
			sb:   virt,
			abs:  func(rel string) string { return path.Join(VirtualRoot, rel) },
		},
		{
			name: "local",
			sb:   loc,
			abs:  func(rel string) string { return filepath.Join(dir, rel) },
			outside: func(t *testing.T) []string {
				var files []string
				filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() && !strings.HasPrefix(p, dir+"/") {
						files = append(files, p)
					}
					return nil
				})
				return files
			},
		},
	}
	for _, extra := range ExtraTiers {
		tmp, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(tmp, "ws", "root")
		name, sb, ok := extra(t, dir)
		if !ok {
			continue
		}
		t.Cleanup(func() { sb.Close(context.Background()) })
		out = append(out, tier{
			name: name,
			sb:   sb,
			abs:  func(rel string) string { return filepath.Join(dir, rel) },
			outside: func(t *testing.T) []string {
				var files []string
				filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() && !strings.HasPrefix(p, dir+"/") {
						files = append(files, p)
					}
					return nil
				})
				return files
			},
		})
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	tests := []struct {
		name, path string
		data       []byte
		wantPath   string // Write's answer
	}{
		{"text", "a.txt", []byte("hello\n"), "a.txt"},
		{"binary bytes", "bin.dat", binary, "bin.dat"},
		{"empty file", "empty", nil, "empty"},
		{"nested dirs created", "x/y/z/deep.md", []byte("# deep"), "x/y/z/deep.md"},
		{"dot segments", "./x/../dots.txt", []byte("d"), "dots.txt"},
		{"unicode name", "dïr/ñame 1.txt", []byte("ü"), "dïr/ñame 1.txt"},
		{"large", "large.bin", []byte(strings.Repeat("0123456789", 200_000)), "large.bin"},
	}
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got, err := tr.sb.Write(ctx, tt.path, tt.data)
					if err != nil {
						t.Fatalf("Write(%q): %v", tt.path, err)
					}
					if got != tt.wantPath {
						t.Errorf("Write(%q) = %q, want %q", tt.path, got, tt.wantPath)
					}
					read, err := tr.sb.Read(ctx, tt.path)
					if err != nil {
						t.Fatalf("Read(%q): %v", tt.path, err)
					}
					if string(read) != string(tt.data) {
						t.Errorf("Read(%q) = %d bytes, want the %d written", tt.path, len(read), len(tt.data))
					}
					// The absolute spelling names the same file.
					read, err = tr.sb.Read(ctx, tr.abs(tt.wantPath))
					if err != nil || string(read) != string(tt.data) {
						t.Errorf("Read(%q) = %d bytes, %v; want the same file", tr.abs(tt.wantPath), len(read), err)
					}
					fi, err := tr.sb.Stat(ctx, tt.path)
					if err != nil {
						t.Fatalf("Stat(%q): %v", tt.path, err)
					}
					if fi.Size != int64(len(tt.data)) {
						t.Errorf("Stat(%q).Size = %d, want %d", tt.path, fi.Size, len(tt.data))
					}
					if time.Since(fi.ModTime) > time.Minute {
						t.Errorf("Stat(%q).ModTime = %v, want about now", tt.path, fi.ModTime)
					}
				})
			}
			// Overwrite replaces, and a caller mutating its slices changes nothing stored.
			data := []byte("v1")
			tr.sb.Write(ctx, "over.txt", data)
			data[0] = 'X'
			tr.sb.Write(ctx, "over.txt", []byte("version 2"))
			got, _ := tr.sb.Read(ctx, "over.txt")
			if string(got) != "version 2" {
				t.Errorf("after overwrite Read = %q, want %q", got, "version 2")
			}
			got[0] = 'Z'
			if again, _ := tr.sb.Read(ctx, "over.txt"); string(again) != "version 2" {
				t.Errorf("mutating a Read result changed the file: %q", again)
			}
		})
	}
}

func TestMissingAndMisuse(t *testing.T) {
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := tr.sb.Write(ctx, "file.txt", []byte("f")); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.sb.Write(ctx, "dir/inner.txt", []byte("i")); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"missing.txt", "no/such/dir/x", "file.txt/below"} {
				if _, err := tr.sb.Read(ctx, p); !errors.Is(err, ErrNotFound) {
					t.Errorf("Read(%q) err = %v, want ErrNotFound", p, err)
				} else if !strings.Contains(err.Error(), p) {
					t.Errorf("Read(%q) error %q does not name the path", p, err)
				}
				if _, err := tr.sb.Stat(ctx, p); !errors.Is(err, ErrNotFound) {
					t.Errorf("Stat(%q) err = %v, want ErrNotFound", p, err)
				}
			}
			for _, tt := range []struct{ op, path string }{
				{"read", "dir"}, {"stat", "dir"}, {"write", "dir"},
				{"write", ""}, {"write", "."}, {"write", "file.txt/below"},
			} {
				var err error
				switch tt.op {
				case "read":
					_, err = tr.sb.Read(ctx, tt.path)
				case "stat":
					_, err = tr.sb.Stat(ctx, tt.path)
				case "write":
					_, err = tr.sb.Write(ctx, tt.path, []byte("x"))
				}
				if err == nil {
					t.Errorf("%s(%q) succeeded, want an error", tt.op, tt.path)
				}
			}
			if got, _ := tr.sb.Read(ctx, "file.txt"); string(got) != "f" {
				t.Errorf("file.txt = %q after failed writes, want %q", got, "f")
			}
		})
	}
}

func TestEscapesWriteNothing(t *testing.T) {
	escapes := []string{
		"../x.txt",
		"../../x.txt",
		"a/../../x.txt",
		"/etc/nexo-escape.txt",
		"/tmp/nexo-escape.txt",
		"/workspace/../x.txt",
		"a\x00b",
		strings.Repeat("../", 2000) + "x.txt",
	}
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			for _, p := range escapes {
				if _, err := tr.sb.Write(ctx, p, []byte("pwned")); !errors.Is(err, ErrEscape) {
					t.Errorf("Write(%q) err = %v, want ErrEscape", p, err)
				}
				if _, err := tr.sb.Read(ctx, p); !errors.Is(err, ErrEscape) {
					t.Errorf("Read(%q) err = %v, want ErrEscape", p, err)
				}
				if _, err := tr.sb.Stat(ctx, p); !errors.Is(err, ErrEscape) {
					t.Errorf("Stat(%q) err = %v, want ErrEscape", p, err)
				}
			}
			for _, pat := range []string{"../*", "../../*", "a/../../*", "/etc/*", "{..,x}/*"} {
				if _, err := tr.sb.Glob(ctx, pat); !errors.Is(err, ErrEscape) {
					t.Errorf("Glob(%q) err = %v, want ErrEscape", pat, err)
				}
			}
			if files, _ := tr.sb.Glob(ctx, "**"); len(files) != 0 {
				t.Errorf("workspace holds %v after refused writes, want nothing", files)
			}
			if tr.outside != nil {
				if files := tr.outside(t); len(files) != 0 {
					t.Errorf("files written outside the workspace: %v", files)
				}
			}
			if _, err := os.Stat("/tmp/nexo-escape.txt"); err == nil {
				t.Errorf("/tmp/nexo-escape.txt exists")
			}
		})
	}
}

func TestGlob(t *testing.T) {
	files := []string{".hidden", "a.go", "b.md", "sub/c.go", "sub/deep/d.go", "sub/e.txt", "x{y}.txt", "q?.txt"}
	tests := []struct {
		pattern string
		want    []string
	}{
		{"*.go", []string{"a.go"}},
		{"**/*.go", []string{"a.go", "sub/c.go", "sub/deep/d.go"}},
		{"sub/*", []string{"sub/c.go", "sub/e.txt"}},
		{"sub/**", []string{"sub/c.go", "sub/deep/d.go", "sub/e.txt"}},
		{"sub/**/*.go", []string{"sub/c.go", "sub/deep/d.go"}},
		{"**/deep/*", []string{"sub/deep/d.go"}},
		{"*", []string{".hidden", "a.go", "b.md", "q?.txt", "x{y}.txt"}}, // files only: no "sub"
		{"*/*", []string{"sub/c.go", "sub/e.txt"}},
		{"**/*.{go,md}", []string{"a.go", "b.md", "sub/c.go", "sub/deep/d.go"}},
		{"{a,b}.*", []string{"a.go", "b.md"}},
		{"sub/{c.go,deep/{d,z}.go}", []string{"sub/c.go", "sub/deep/d.go"}},
		{"x{y}.txt", []string{"x{y}.txt"}}, // no comma: literal braces
		{`q\?.txt`, []string{"q?.txt"}},
		{"?.go", []string{"a.go"}},
		{"[ab].*", []string{"a.go", "b.md"}},
		{"[^a].*", []string{"b.md"}},
		{"sub/deep/d.go", []string{"sub/deep/d.go"}},
		{"./sub/../*.md", []string{"b.md"}},
		{"nomatch*", []string{}},
		{"sub", []string{}}, // a directory is not listed
		{"**", files},
		{"**/**/*.go", []string{"a.go", "sub/c.go", "sub/deep/d.go"}},
	}
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			for _, f := range files {
				if _, err := tr.sb.Write(ctx, f, []byte(f)); err != nil {
					t.Fatal(err)
				}
			}
			for _, tt := range tests {
				t.Run(tt.pattern, func(t *testing.T) {
					got, err := tr.sb.Glob(ctx, tt.pattern)
					if err != nil {
						t.Fatalf("Glob(%q): %v", tt.pattern, err)
					}
					want := append([]string{}, tt.want...)
					sort.Strings(want)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("Glob(%q) = %q, want %q", tt.pattern, got, want)
					}
				})
			}
			// The absolute spelling of a pattern works too.
			got, err := tr.sb.Glob(ctx, tr.abs("sub/*.go"))
			if err != nil || !reflect.DeepEqual(got, []string{"sub/c.go"}) {
				t.Errorf("Glob(%q) = %q, %v; want [sub/c.go]", tr.abs("sub/*.go"), got, err)
			}
			for _, bad := range []string{"", "[", "sub/[a-"} {
				if _, err := tr.sb.Glob(ctx, bad); !errors.Is(err, path.ErrBadPattern) {
					t.Errorf("Glob(%q) err = %v, want ErrBadPattern", bad, err)
				}
			}
			if _, err := tr.sb.Glob(ctx, strings.Repeat("{a,b}", 10)); !errors.Is(err, path.ErrBadPattern) {
				t.Errorf("Glob with 1024 brace alternatives: err = %v, want ErrBadPattern", err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			tr.sb.Write(ctx, "a.txt", []byte("a"))
			if err := tr.sb.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := tr.sb.Close(ctx); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := tr.sb.Read(ctx, "a.txt"); !errors.Is(err, ErrClosed) {
				t.Errorf("Read after Close: err = %v, want ErrClosed", err)
			}
			if _, err := tr.sb.Write(ctx, "b.txt", nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Write after Close: err = %v, want ErrClosed", err)
			}
			if _, err := tr.sb.Stat(ctx, "a.txt"); !errors.Is(err, ErrClosed) {
				t.Errorf("Stat after Close: err = %v, want ErrClosed", err)
			}
			if _, err := tr.sb.Glob(ctx, "*"); !errors.Is(err, ErrClosed) {
				t.Errorf("Glob after Close: err = %v, want ErrClosed", err)
			}
		})
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			if _, err := tr.sb.Write(ctx, "a.txt", []byte("a")); !errors.Is(err, context.Canceled) {
				t.Errorf("Write with a canceled ctx: err = %v, want context.Canceled", err)
			}
			if _, err := tr.sb.Glob(ctx, "*"); !errors.Is(err, context.Canceled) {
				t.Errorf("Glob with a canceled ctx: err = %v, want context.Canceled", err)
			}
		})
	}
}

func TestInstructions(t *testing.T) {
	for _, tr := range tiers(t) {
		t.Run(tr.name, func(t *testing.T) {
			got := tr.sb.Instructions()
			var want []string
			switch tr.name {
			case "virtual":
				want = []string{"in-memory", "no shell", VirtualRoot}
			case "local":
				want = []string{tr.abs(""), "sh", "relative"}
			case "bubblewrap":
				want = []string{tr.abs(""), "sh", "relative", "read-only", "no network"}
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("Instructions() = %q, want it to mention %q", got, w)
				}
			}
		})
	}
}

func TestVirtualShell(t *testing.T) {
	_, err := NewVirtual().Shell(context.Background(), "echo hi", time.Second)
	if !errors.Is(err, ErrNoShell) {
		t.Errorf("Virtual.Shell err = %v, want ErrNoShell", err)
	}
}
