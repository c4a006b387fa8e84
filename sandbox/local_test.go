package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newLocal returns a Local over a fresh directory, closed when the test ends.
func newLocal(t *testing.T, opts LocalOptions) (*Local, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := NewLocal(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, dir
}

func TestNewLocal(t *testing.T) {
	tmp := t.TempDir()
	tests := []struct {
		name     string
		dir      string
		opts     LocalOptions
		contains string // "" = success
	}{
		{"creates missing dir", filepath.Join(tmp, "a", "b"), LocalOptions{}, ""},
		{"empty dir", "", LocalOptions{}, "empty"},
		{"file-system root", "/", LocalOptions{}, "file-system root"},
		{"env name with =", tmp, LocalOptions{Env: map[string]string{"A=B": "x"}}, "A=B"},
		{"empty env name", tmp, LocalOptions{Env: map[string]string{"": "x"}}, "invalid environment"},
		{"NUL in env value", tmp, LocalOptions{Env: map[string]string{"A": "x\x00"}}, "invalid environment"},
	}
	mustWrite(t, filepath.Join(tmp, "file"), "x")
	tests = append(tests, struct {
		name     string
		dir      string
		opts     LocalOptions
		contains string
	}{"a file", filepath.Join(tmp, "file"), LocalOptions{}, "file"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLocal(tt.dir, tt.opts)
			if tt.contains == "" {
				if err != nil {
					t.Fatalf("NewLocal(%q): %v", tt.dir, err)
				}
				if fi, err := os.Stat(tt.dir); err != nil || !fi.IsDir() {
					t.Errorf("directory %q not created", tt.dir)
				}
				if l.Dir() != tt.dir {
					t.Errorf("Dir() = %q, want %q", l.Dir(), tt.dir)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("NewLocal(%q) err = %v, want one mentioning %q", tt.dir, err, tt.contains)
			}
		})
	}
}

// Symbolic links: the reference's escapes (read through a link out, write through a
// dangling link out, glob filters links out) and links that stay inside.
func TestLocalSymlinks(t *testing.T) {
	root, outside := guardFixture(t)
	l, err := NewLocal(root, LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := listFiles(t, outside)

	for _, p := range []string{"out/secret", "outrel/secret", "chain1", "toroot/etc/passwd", "dotdotlink/outside/secret"} {
		if _, err := l.Read(ctx, p); !errors.Is(err, ErrEscape) {
			t.Errorf("Read(%q) err = %v, want ErrEscape", p, err)
		}
	}
	for _, p := range []string{"dangling", "danglingrel", "danglingdir/x.txt", "out/new.txt", "chain1", "dotdotlink/outside/x"} {
		if _, err := l.Write(ctx, p, []byte("pwned")); !errors.Is(err, ErrEscape) {
			t.Errorf("Write(%q) err = %v, want ErrEscape", p, err)
		}
	}
	if after := listFiles(t, outside); !reflect.DeepEqual(after, before) {
		t.Errorf("outside changed: before %v, after %v", before, after)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s" {
		t.Errorf("outside/secret = %q, want it untouched", b)
	}

	// Links that stay inside work, and writing through one writes its target.
	if got, err := l.Read(ctx, "filelink"); err != nil || string(got) != "f" {
		t.Errorf("Read(filelink) = %q, %v; want %q", got, err, "f")
	}
	if _, err := l.Write(ctx, "filelink", []byte("via link")); err != nil {
		t.Fatalf("Write(filelink): %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sub", "file.txt")); string(b) != "via link" {
		t.Errorf("sub/file.txt = %q after writing through filelink, want %q", b, "via link")
	}
	if fi, err := os.Lstat(filepath.Join(root, "filelink")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("filelink is no longer a symbolic link")
	}
	if _, err := l.Write(ctx, "indangling", []byte("new")); err != nil {
		t.Fatalf("Write(indangling): %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sub", "notyet.txt")); string(b) != "new" {
		t.Errorf("sub/notyet.txt = %q, want the write through the inside dangling link", b)
	}

	// Glob lists links only when they stay inside and name files.
	got, err := l.Glob(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.txt", "filelink", "indangling"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Glob(*) = %q, want %q", got, want)
	}
	got, _ = l.Glob(ctx, "**")
	for _, g := range got {
		if strings.HasPrefix(g, "out") || strings.HasPrefix(g, "chain") || strings.HasPrefix(g, "dotdot") || strings.HasPrefix(g, "toroot") || strings.HasPrefix(g, "dangling") {
			t.Errorf("Glob(**) returned %q, which leads outside", g)
		}
	}
	// A literal prefix through an inside link is walked; one through an outside link is refused.
	if got, err := l.Glob(ctx, "inlink/*.txt"); err != nil || !reflect.DeepEqual(got, []string{"inlink/file.txt", "inlink/notyet.txt"}) {
		t.Errorf("Glob(inlink/*.txt) = %q, %v", got, err)
	}
	for _, pat := range []string{"out/*", "dotdotlink/outside/*", "toroot/etc/*"} {
		if _, err := l.Glob(ctx, pat); !errors.Is(err, ErrEscape) {
			t.Errorf("Glob(%q) err = %v, want ErrEscape", pat, err)
		}
	}
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestLocalWriteAtomicKeepsMode(t *testing.T) {
	l, dir := newLocal(t, LocalOptions{})
	ctx := context.Background()
	p := filepath.Join(dir, "run.sh")
	mustWrite(t, p, "old")
	if err := os.Chmod(p, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(ctx, "run.sh", []byte("#!/bin/sh\necho new\n")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("mode after overwrite = %v, want 0750", fi.Mode().Perm())
	}
	l.Write(ctx, "fresh.txt", []byte("x"))
	if fi, _ := os.Stat(filepath.Join(dir, "fresh.txt")); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode of a new file = %v, want 0644", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".nexo-write-") {
			t.Errorf("temporary file %q left behind", e.Name())
		}
	}
}

func TestLocalShell(t *testing.T) {
	t.Setenv("NEXO_PARENT_SECRET", "leaked")
	l, dir := newLocal(t, LocalOptions{Env: map[string]string{"FOO": "bar baz"}})
	real, _ := filepath.EvalSymlinks(dir)
	tests := []struct {
		name           string
		cmd            string
		stdout, stderr string
		exit           int
	}{
		{"echo", "echo hi", "hi\n", "", 0},
		{"stderr separate", "echo out; echo err >&2; exit 3", "out\n", "err\n", 3},
		{"runs in the workspace", "pwd", real + "\n", "", 0},
		{"parent env not visible", `echo "[$NEXO_PARENT_SECRET]"`, "[]\n", "", 0},
		{"cleared env", "env | grep -v '^PWD=' | sort", "FOO=bar baz\nHOME=" + dir + "\nLANG=C.UTF-8\nPATH=/usr/local/bin:/usr/bin:/bin\n", "", 0},
		{"no stdin", "cat; echo done", "done\n", "", 0},
		{"command not found", "definitely-not-a-command-nexo", "", "", 127},
		{"killed by a signal", "kill -TERM $$", "", "", 128 + int(syscall.SIGTERM)},
		{"binary output", `printf '\001\377'`, "\x01\xff", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := l.Shell(context.Background(), tt.cmd, 10*time.Second)
			if err != nil {
				t.Fatalf("Shell(%q): %v", tt.cmd, err)
			}
			if res.Stdout != tt.stdout {
				t.Errorf("stdout = %q, want %q", res.Stdout, tt.stdout)
			}
			if tt.name != "command not found" && res.Stderr != tt.stderr {
				t.Errorf("stderr = %q, want %q", res.Stderr, tt.stderr)
			}
			if res.ExitCode != tt.exit {
				t.Errorf("exit code = %d, want %d", res.ExitCode, tt.exit)
			}
			if res.TimedOut {
				t.Errorf("TimedOut = true, want false")
			}
		})
	}
	// Explicit env overrides the defaults.
	l2, _ := newLocal(t, LocalOptions{Env: map[string]string{"PATH": "/bin"}})
	if res, _ := l2.Shell(context.Background(), "echo $PATH", 0); res.Stdout != "/bin\n" {
		t.Errorf("PATH with an override = %q, want /bin", res.Stdout)
	}
}

// alive reports whether pid is a running process. A zombie counts as dead: it has exited
// and only waits for a parent (or init) to reap it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) S ...: the state follows the last ")".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPID waits for the command to have written a pid file, then returns the pid.
func readPID(t *testing.T, file string) int {
	t.Helper()
	pid, ok := pollPID(file, 10*time.Second)
	if !ok {
		t.Fatalf("no pid in %s within 10s", file)
	}
	return pid
}

// pollPID is readPID for goroutines other than the test's: it reports instead of failing.
func pollPID(file string, d time.Duration) (int, bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid, true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, false
}

func requireProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
}

func TestLocalShellTimeoutKillsTree(t *testing.T) {
	requireProc(t)
	l, dir := newLocal(t, LocalOptions{})
	// sh (leader) -> sh (child) -> sleep (grandchild), all waiting.
	cmd := `sh -c 'sleep 100 & echo $! > gc.pid; wait' & wait`
	start := time.Now()
	res, err := l.Shell(context.Background(), cmd, 300*time.Millisecond)
	if err != nil {
		t.Fatalf("Shell: %v", err)
	}
	if !res.TimedOut {
		t.Errorf("TimedOut = false, want true")
	}
	if res.ExitCode != 137 {
		t.Errorf("exit code = %d, want 137 (SIGKILL)", res.ExitCode)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shell returned after %v; want soon after the 300ms timeout", d)
	}
	gc := readPID(t, filepath.Join(dir, "gc.pid"))
	waitFor(t, "grandchild "+strconv.Itoa(gc)+" gone", 5*time.Second, func() bool { return !alive(gc) })
}

// A command that leaves a job in the background returns when it finishes (not when the
// job's copy of stdout closes), and the job dies with it.
func TestLocalShellBackgroundJobDies(t *testing.T) {
	requireProc(t)
	l, dir := newLocal(t, LocalOptions{})
	start := time.Now()
	res, err := l.Shell(context.Background(), `sleep 100 & echo $! > bg.pid; echo started`, 10*time.Second)
	if err != nil {
		t.Fatalf("Shell: %v", err)
	}
	if res.Stdout != "started\n" || res.ExitCode != 0 || res.TimedOut {
		t.Errorf("result = %+v, want stdout started, exit 0, not timed out", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shell returned after %v; want it not to wait for the background job", d)
	}
	bg := readPID(t, filepath.Join(dir, "bg.pid"))
	waitFor(t, "background job gone", 5*time.Second, func() bool { return !alive(bg) })
}

// A process that leaves the group (setsid) and keeps stdout open cannot hang the call.
func TestLocalShellEscapedProcessDoesNotHang(t *testing.T) {
	requireProc(t)
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("needs setsid")
	}
	l, dir := newLocal(t, LocalOptions{})
	start := time.Now()
	res, err := l.Shell(context.Background(), `setsid sh -c 'echo $$ > esc.pid; exec sleep 60' & sleep 0.2; echo ok`, 10*time.Second)
	if err != nil {
		t.Fatalf("Shell: %v", err)
	}
	pid := readPID(t, filepath.Join(dir, "esc.pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if d := time.Since(start); d > drainGrace+5*time.Second {
		t.Errorf("Shell returned after %v; want at most about drainGrace (%v)", d, drainGrace)
	}
	if res.Stdout != "ok\n" {
		t.Errorf("stdout = %q, want %q", res.Stdout, "ok\n")
	}
}

func TestLocalShellContextCancel(t *testing.T) {
	requireProc(t)
	l, dir := newLocal(t, LocalOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		pollPID(filepath.Join(dir, "c.pid"), 10*time.Second)
		cancel() // cancels even when the pid never came, so the test cannot hang
	}()
	res, err := l.Shell(ctx, `sleep 100 & echo $! > c.pid; wait`, time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Shell err = %v, want context.Canceled", err)
	}
	if !res.TimedOut {
		t.Errorf("TimedOut = false, want true after cancel")
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(dir, "c.pid"))))
	waitFor(t, "child gone after cancel", 5*time.Second, func() bool { return !alive(pid) })
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLocalCloseKillsRunningCommand(t *testing.T) {
	requireProc(t)
	l, dir := newLocal(t, LocalOptions{})
	done := make(chan ShellResult, 1)
	go func() {
		res, _ := l.Shell(context.Background(), `sleep 100 & echo $! > k.pid; wait`, time.Minute)
		done <- res
	}()
	pid := readPID(t, filepath.Join(dir, "k.pid"))
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.ExitCode != 137 {
			t.Errorf("exit code after Close = %d, want 137", res.ExitCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shell still running 10s after Close")
	}
	waitFor(t, "child gone after Close", 5*time.Second, func() bool { return !alive(pid) })
	if _, err := l.Shell(context.Background(), "echo hi", time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Shell after Close: err = %v, want ErrClosed", err)
	}
}

func TestLocalShellOutputCap(t *testing.T) {
	const max = 1000
	l, _ := newLocal(t, LocalOptions{MaxOutput: max})
	res, err := l.Shell(context.Background(),
		`head -c 5000000 /dev/zero | tr '\0' a; echo; echo END; yes err | head -n 200000 >&2; echo ERR-END >&2`, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		marker, kept, ok := strings.Cut(out, "\n")
		if !ok || !strings.HasPrefix(marker, "[truncated ") {
			t.Errorf("%s starts %q, want a [truncated N bytes] line", name, marker)
		}
		if len(kept) > max {
			t.Errorf("%s keeps %d bytes, want at most %d", name, len(kept), max)
		}
	}
	if !strings.HasSuffix(res.Stdout, "\nEND\n") {
		t.Errorf("stdout does not keep the tail: ends %q", res.Stdout[len(res.Stdout)-20:])
	}
	if !strings.HasSuffix(res.Stderr, "err\nERR-END\n") {
		t.Errorf("stderr does not keep the tail: ends %q", res.Stderr[len(res.Stderr)-20:])
	}
	if !strings.HasPrefix(res.Stdout, "[truncated 4999") {
		t.Errorf("stdout marker = %q, want about 5,000,000 bytes dropped", res.Stdout[:30])
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under the cap", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly the cap", 6, []string{"abc", "def"}, "abcdef"},
		{"many small writes", 4, []string{"ab", "cd", "ef", "gh", "ij"}, "[truncated 6 bytes]\nghij"},
		{"one big write", 3, []string{"abcdefgh"}, "[truncated 5 bytes]\nfgh"},
		{"does not split a rune", 4, []string{"xé€"}, "[truncated 3 bytes]\n€"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewTailBuffer(tt.max)
			for _, w := range tt.writes {
				b.Write([]byte(w))
				if len(b.buf) > 2*tt.max {
					t.Fatalf("buffer holds %d bytes, want at most %d", len(b.buf), 2*tt.max)
				}
			}
			if got := b.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}
