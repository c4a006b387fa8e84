package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/nexo-temporal/nexo/sandbox"
)

// These tests run against the real Docker engine (see main_test.go); they skip with a
// message where none answers.

// mustShell runs cmd and fails the test unless it exits 0; it returns stdout.
func mustShell(t *testing.T, sb *Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.Shell(testCtx(t), cmd, 30*time.Second)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Shell(%q) = %+v, %v", cmd, res, err)
	}
	return res.Stdout
}

func TestFileRoundTrips(t *testing.T) {
	sb, _, _ := newTestSandbox(t, Options{})
	ctx := testCtx(t)

	t.Run("text with parents", func(t *testing.T) {
		got, err := sb.Write(ctx, "a/b/c.txt", []byte("hello\n"))
		if err != nil || got != "a/b/c.txt" {
			t.Fatalf("Write = %q, %v", got, err)
		}
		if b, err := sb.Read(ctx, "/workspace/a/b/c.txt"); err != nil || string(b) != "hello\n" {
			t.Fatalf("Read = %q, %v", b, err)
		}
		// The shell sees it, owns it (it can append), and the file tools see the change.
		if out := mustShell(t, sb, "stat -c '%u:%g %a' a/b c.txt 2>/dev/null; stat -c '%u:%g %a' a/b/c.txt; echo more >> a/b/c.txt"); !strings.HasSuffix(out, "1000:1000 644\n") {
			t.Errorf("owner and mode = %q, want the container user's 1000:1000 644", out)
		}
		if b, _ := sb.Read(ctx, "a/b/c.txt"); string(b) != "hello\nmore\n" {
			t.Errorf("Read after the shell appended = %q", b)
		}
	})

	t.Run("binary", func(t *testing.T) {
		data := make([]byte, 1<<20)
		_, _ = rand.Read(data)
		for i := 0; i < 256; i++ {
			data[i] = byte(i) // every byte value, NUL and CR LF included
		}
		if _, err := sb.Write(ctx, "bin/data.bin", data); err != nil {
			t.Fatal(err)
		}
		got, err := sb.Read(ctx, "bin/data.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Read = %d bytes (equal %v), %v", len(got), bytes.Equal(got, data), err)
		}
		sum := sha256.Sum256(data)
		if out := mustShell(t, sb, "sha256sum bin/data.bin"); !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
			t.Errorf("sha256sum in the container = %q, want %x", out, sum)
		}
		fi, err := sb.Stat(ctx, "bin/data.bin")
		if err != nil || fi.Size != int64(len(data)) || time.Since(fi.ModTime) > time.Minute {
			t.Errorf("Stat = %+v, %v", fi, err)
		}
		// Empty files too.
		if _, err := sb.Write(ctx, "empty", nil); err != nil {
			t.Fatal(err)
		}
		if b, err := sb.Read(ctx, "empty"); err != nil || len(b) != 0 {
			t.Errorf("Read(empty) = %q, %v", b, err)
		}
	})

	t.Run("overwrite keeps the mode", func(t *testing.T) {
		mustShell(t, sb, "printf 'echo old' > run.sh && chmod 750 run.sh")
		if _, err := sb.Write(ctx, "run.sh", []byte("echo new")); err != nil {
			t.Fatal(err)
		}
		if out := mustShell(t, sb, "stat -c %a run.sh; ./run.sh"); out != "750\nnew\n" {
			t.Errorf("after overwrite: %q, want mode 750 and the new content", out)
		}
	})

	t.Run("shell files are readable", func(t *testing.T) {
		mustShell(t, sb, "mkdir -p made && printf 'x\\000y' > made/by-shell")
		if b, err := sb.Read(ctx, "made/by-shell"); err != nil || string(b) != "x\x00y" {
			t.Errorf("Read = %q, %v", b, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		if _, err := sb.Read(ctx, "nope.txt"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Read(missing) = %v, want ErrNotFound", err)
		}
		if _, err := sb.Read(ctx, "a/b/c.txt/x"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Read(below a file) = %v, want ErrNotFound", err)
		}
		if _, err := sb.Stat(ctx, "nope.txt"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
		}
		if _, err := sb.Read(ctx, "a"); err == nil || errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Read(directory) = %v, want an is-a-directory error", err)
		}
		if _, err := sb.Write(ctx, "a", []byte("x")); err == nil {
			t.Error("Write over a directory succeeded")
		}
		if _, err := sb.Write(ctx, ".", []byte("x")); err == nil {
			t.Error("Write to the workspace root succeeded")
		}
	})

	t.Run("glob", func(t *testing.T) {
		mustShell(t, sb, "mkdir -p g/sub g/.hidden && touch g/one.go g/two.md g/sub/three.go g/.hidden/four.go 'g/sp ace.go'")
		tests := []struct {
			pattern string
			want    []string
		}{
			{"g/*.go", []string{"g/one.go", "g/sp ace.go"}},
			{"g/**/*.go", []string{"g/.hidden/four.go", "g/one.go", "g/sp ace.go", "g/sub/three.go"}},
			{"**/three.go", []string{"g/sub/three.go"}},
			{"g/*.{go,md}", []string{"g/one.go", "g/sp ace.go", "g/two.md"}},
			{"/workspace/g/sub/*", []string{"g/sub/three.go"}},
			{"missing/**", []string{}},
			{"a/**", []string{"a/b/c.txt"}},
		}
		for _, tt := range tests {
			got, err := sb.Glob(ctx, tt.pattern)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Glob(%q) = %q, %v; want %q", tt.pattern, got, err, tt.want)
			}
		}
	})
}

func TestPathAndSymlinkEscapes(t *testing.T) {
	host := t.TempDir()
	if err := os.Chmod(host, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "secret.txt"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /data is writable and readable in the container: only the guard keeps the file
	// tools out of it.
	sb, _, _ := newTestSandbox(t, Options{RWBinds: []string{host + ":/data"}})
	ctx := testCtx(t)
	mustShell(t, sb, `cat /data/secret.txt >/dev/null && mkdir real && echo inside > real/f &&
ln -s /etc etc && ln -s /etc/passwd pw && ln -s ../../etc/passwd rel && ln -s /data data &&
ln -s /data/secret.txt secret && ln -s /tmp/outside dang && ln -s /data/new.txt dangdata &&
ln -s real inlink && ln -s real/f fl && ln -s /workspace/real abslink &&
ln -s loop2 loop1 && ln -s loop1 loop2 && mkdir sub && ln -s .. sub/up`)

	escapes := []struct{ op, path string }{
		{"read", "../etc/passwd"},
		{"read", "/etc/passwd"},
		{"read", "a/../../etc/passwd"},
		{"read", "nul\x00byte"},
		{"read", "etc/passwd"},
		{"read", "pw"},
		{"read", "rel"},
		{"read", "secret"},
		{"read", "data/secret.txt"},
		{"read", "/data/secret.txt"},
		{"read", "sub/up/pw"},
		{"read", "sub/up/sub/up/etc/passwd"},
		{"stat", "pw"},
		{"write", "etc/x"},
		{"write", "dang"},
		{"write", "dangdata"},
		{"write", "data/new.txt"},
		{"write", "/data/new.txt"},
		{"write", "../x"},
		{"glob", "etc/*"},
		{"glob", "data/**"},
		{"glob", "../*"},
		{"glob", "/etc/*"},
	}
	for _, tt := range escapes {
		t.Run(tt.op+" "+tt.path, func(t *testing.T) {
			var err error
			switch tt.op {
			case "read":
				var b []byte
				b, err = sb.Read(ctx, tt.path)
				if len(b) > 0 {
					t.Errorf("read %d bytes from outside: %q", len(b), b)
				}
			case "stat":
				_, err = sb.Stat(ctx, tt.path)
			case "write":
				_, err = sb.Write(ctx, tt.path, []byte("escaped"))
			case "glob":
				_, err = sb.Glob(ctx, tt.path)
			}
			if !errors.Is(err, sandbox.ErrEscape) {
				t.Errorf("%s(%q) = %v, want ErrEscape", tt.op, tt.path, err)
			}
		})
	}
	if out := mustShell(t, sb, "ls /tmp/outside /data/new.txt 2>&1; true"); !strings.Contains(out, "No such file") || strings.Contains(out, "/tmp/outside\n") {
		t.Errorf("after the refused writes: %q, want neither file created", out)
	}
	if _, err := os.Stat(filepath.Join(host, "new.txt")); err == nil {
		t.Error("a write through a link reached the host directory")
	}

	// Links that stay inside work like the files they name.
	for _, p := range []string{"inlink/f", "fl", "abslink/f", "sub/up/real/f"} {
		if b, err := sb.Read(ctx, p); err != nil || string(b) != "inside\n" {
			t.Errorf("Read(%q) = %q, %v; want the linked file", p, b, err)
		}
	}
	if _, err := sb.Write(ctx, "fl", []byte("through the link\n")); err != nil {
		t.Fatal(err)
	}
	if out := mustShell(t, sb, "cat real/f; test -L fl && echo still-a-link"); out != "through the link\nstill-a-link\n" {
		t.Errorf("after writing through fl: %q", out)
	}
	if _, err := sb.Read(ctx, "loop1"); err == nil {
		t.Error("Read of a link loop succeeded")
	}
	got, err := sb.Glob(ctx, "**")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"fl", "real/f"}; !slices.Equal(got, want) {
		t.Errorf("Glob(**) = %q, want %q (links out, dangling links, link loops and links to directories left out)", got, want)
	}
}

// shellModes runs f against the command server and against the one-exec-per-command
// fallback, each on a container of its own.
func shellModes(t *testing.T, opts Options, f func(t *testing.T, sb *Sandbox)) {
	for _, mode := range []string{"server", "exec"} {
		t.Run(mode, func(t *testing.T) {
			sb, _, _ := newTestSandbox(t, opts)
			if mode == "exec" {
				sb.pool.mu.Lock()
				sb.pool.unsupported = true
				sb.pool.mu.Unlock()
			}
			f(t, sb)
		})
	}
}

// processes lists the container's processes (pid, pgid, command line).
func processes(t *testing.T, sb *Sandbox) string {
	return mustShell(t, sb, "ps -o pid,pgid,args")
}

func TestShell(t *testing.T) {
	shellModes(t, Options{}, func(t *testing.T, sb *Sandbox) {
		ctx := testCtx(t)
		t.Run("streams and exit code", func(t *testing.T) {
			res, err := sb.Shell(ctx, "echo out; echo err >&2; pwd; exit 3", 0)
			if err != nil || res.Stdout != "out\n/workspace\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.TimedOut {
				t.Errorf("Shell = %+v, %v", res, err)
			}
		})
		t.Run("quoting and binary output", func(t *testing.T) {
			cmd := "x='a \"b\" \\\\ c'\nprintf '%s|\\tz\\n' \"$x\" 'é €'\nprintf '\\000\\001\\377'"
			res, err := sb.Shell(ctx, cmd, 0)
			if want := "a \"b\" \\\\ c|\tz\né €|\tz\n\x00\x01\xff"; err != nil || res.Stdout != want {
				t.Errorf("Shell(%q) stdout = %q, %v; want %q", cmd, res.Stdout, err, want)
			}
		})
		t.Run("output that looks like a marker", func(t *testing.T) {
			res, err := sb.Shell(ctx, "echo '@nexo:00:E0'; echo '@nexo:00:E0' >&2", 0)
			if err != nil || res.Stdout != "@nexo:00:E0\n" || res.Stderr != "@nexo:00:E0\n" {
				t.Errorf("Shell = %+v, %v", res, err)
			}
		})
		t.Run("timeout kills the whole group", func(t *testing.T) {
			start := time.Now()
			res, err := sb.Shell(ctx, "sleep 301 & sleep 302 | sleep 303; echo not reached", time.Second)
			if err != nil || !res.TimedOut || res.ExitCode != 137 || strings.Contains(res.Stdout, "not reached") {
				t.Errorf("Shell = %+v, %v; want timed out with 137", res, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Shell took %v for a 1s timeout", d)
			}
			if ps := processes(t, sb); strings.Contains(ps, "sleep 30") {
				t.Errorf("processes after the timeout:\n%s", ps)
			}
		})
		t.Run("background jobs die with the command", func(t *testing.T) {
			start := time.Now()
			res, err := sb.Shell(ctx, "sleep 304 >/dev/null 2>&1 & echo started", 10*time.Second)
			if err != nil || res.ExitCode != 0 || res.Stdout != "started\n" || time.Since(start) > 5*time.Second {
				t.Errorf("Shell = %+v, %v after %v", res, err, time.Since(start))
			}
			if ps := processes(t, sb); strings.Contains(ps, "sleep 304") {
				t.Errorf("processes after the command ended:\n%s", ps)
			}
		})
		t.Run("context end kills", func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			res, err := sb.Shell(cctx, "sleep 305", 30*time.Second)
			if !errors.Is(err, context.DeadlineExceeded) || !res.TimedOut {
				t.Errorf("Shell = %+v, %v; want the context's error", res, err)
			}
			if ps := processes(t, sb); strings.Contains(ps, "sleep 305") {
				t.Errorf("processes after the context ended:\n%s", ps)
			}
		})
		t.Run("output capped", func(t *testing.T) {
			sb.MaxOutput = 1000
			defer func() { sb.MaxOutput = 0 }()
			res, err := sb.Shell(ctx, "yes x | head -c 100000; yes y | head -c 50000 >&2", 0)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(res.Stdout, "[truncated 99000 bytes]\n") || len(res.Stdout) != len("[truncated 99000 bytes]\n")+1000 {
				t.Errorf("stdout = %.60q… (%d bytes), want the last 1000 bytes after a marker", res.Stdout, len(res.Stdout))
			}
			if !strings.HasPrefix(res.Stderr, "[truncated 49000 bytes]\n") || !strings.HasSuffix(res.Stderr, "y\n") {
				t.Errorf("stderr = %.60q… (%d bytes)", res.Stderr, len(res.Stderr))
			}
		})
		t.Run("concurrent commands", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					want := strings.Repeat(string(rune('a'+i)), 3) + "\n"
					res, err := sb.Shell(ctx, "sleep 0.3; echo "+strings.TrimSpace(want), 0)
					if err != nil || res.Stdout != want {
						errs <- res.Stdout + " " + errors.Join(err).Error()
					}
				}(i)
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("concurrent Shell: %s", e)
			}
		})
	})
}

func TestCloseKillsRunningCommandsAndKeepsTheContainer(t *testing.T) {
	sb, m, runID := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		_, err := sb.Shell(ctx, "sleep 307", 30*time.Second)
		done <- err
	}()
	other, err := m.Ensure(ctx, runID, Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(processes(t, other), "sleep 307") {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shell did not return after Close")
	}
	if ps := processes(t, other); strings.Contains(ps, "sleep 307") {
		t.Errorf("processes after Close:\n%s", ps)
	}
	if _, err := sb.Read(ctx, "x"); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestBackstopKillsTheCommandsOfAGoneWorker(t *testing.T) {
	sb, _, _ := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	// A worker's end of a command server, sending a command with a 1 s backstop and then
	// vanishing before it would time the command out.
	srv, err := startServer(ctx, engine, sb.ID(), sb.Workdir())
	if err != nil {
		t.Fatal(err)
	}
	mark := newMark("")
	srv.setJob(newJob(mark, 4096, nil))
	if err := srv.send(mark, "1", "sleep 308"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(processes(t, sb), "sleep 308") {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	srv.close()
	deadline = time.Now().Add(15 * time.Second)
	for strings.Contains(processes(t, sb), "sleep 308") {
		if time.Now().After(deadline) {
			t.Fatalf("the command outlived its backstop:\n%s", processes(t, sb))
		}
	}
}

func TestHardenedDefaults(t *testing.T) {
	sb, _, _ := newTestSandbox(t, Options{})
	res, err := engine.ContainerInspect(testCtx(t), sb.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := res.Container.HostConfig
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) != 0 || !slices.Contains(hc.SecurityOpt, "no-new-privileges") ||
		!hc.ReadonlyRootfs || hc.NetworkMode != "none" || hc.Memory != 1<<30 || hc.MemorySwap != 1<<30 ||
		hc.NanoCPUs != 1e9 || hc.PidsLimit == nil || *hc.PidsLimit != 512 || hc.Init == nil || !*hc.Init {
		t.Errorf("host config = %+v", hc)
	}
	out := mustShell(t, sb, `id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status
touch /etc/x 2>/dev/null && echo root-writable
touch /tmp/x /workspace/x && echo tmp-and-workspace-writable`)
	want := "1000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\ntmp-and-workspace-writable\n"
	if out != want {
		t.Errorf("inside the container:\n%s\nwant:\n%s", out, want)
	}
	if s := sb.Instructions(); !strings.Contains(s, "/workspace") || !strings.Contains(s, "no network") {
		t.Errorf("Instructions() = %q", s)
	}
}

func TestNoNetworkByDefault(t *testing.T) {
	cli := needEngine(t)
	ctx := testCtx(t)
	// The host end of Docker's bridge: an address of this machine, reachable from a
	// container on the bridge network and from nowhere else.
	ni, err := cli.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	nw := ni.Network
	if err != nil || len(nw.IPAM.Config) == 0 {
		t.Skipf("no default bridge network to test against: %v", err)
	}
	gw := ""
	if a := nw.IPAM.Config[0].Gateway; a.IsValid() {
		gw = a.String()
	} else if p := nw.IPAM.Config[0].Subnet; p.IsValid() {
		gw = localAddressIn(p.String())
	}
	if gw == "" || !isLocalAddress(gw) {
		t.Skipf("no address of this machine on the bridge network %s", nw.IPAM.Config[0].Subnet)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Skipf("listen on the bridge gateway %s: %v", gw, err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	connect := "nc -w 3 " + gw + " " + port + " </dev/null && echo connected"

	sb, _, _ := newTestSandbox(t, Options{})
	if out := mustShell(t, sb, "ls /sys/class/net"); out != "lo\n" {
		t.Errorf("network interfaces = %q, want only lo", out)
	}
	res, err := sb.Shell(ctx, connect, 10*time.Second)
	if err != nil || res.ExitCode == 0 || strings.Contains(res.Stdout, "connected") || len(accepted) != 0 {
		t.Errorf("connect from the default sandbox = %+v, %v (accepted %d); want it to fail", res, err, len(accepted))
	}
	// The control: the same command on the bridge network reaches the listener, so the
	// failure above is the sandbox's doing.
	open, _, _ := newTestSandbox(t, Options{Network: "bridge"})
	res, err = open.Shell(ctx, connect, 10*time.Second)
	if err != nil || res.ExitCode != 0 {
		t.Skipf("the bridge network cannot reach the host here (%+v, %v): the control is unavailable", res, err)
	}
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Error("the listener saw no connection from the bridge container")
	}
}

func TestLimitsApply(t *testing.T) {
	sb, _, _ := newTestSandbox(t, Options{Memory: "64m", PidsLimit: 64})
	ctx := testCtx(t)
	limits := mustShell(t, sb, `cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max
cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max`)
	if limits != "67108864\n64\n" {
		t.Errorf("cgroup limits = %q, want 64 MiB and 64 processes", limits)
	}

	// A fork bomb stops at the pids limit and is killed at the timeout; the container
	// recovers.
	res, err := sb.Shell(ctx, "b() { b | b & }; b; sleep 30", 3*time.Second)
	if err != nil || !res.TimedOut {
		t.Errorf("fork bomb: %+v, %v; want it timed out", res.ExitCode, err)
	}
	out := mustShell(t, sb, "echo alive; ps -o pid | wc -l; cat /sys/fs/cgroup/pids/pids.events 2>/dev/null || cat /sys/fs/cgroup/pids.events")
	lines := strings.Fields(out)
	if len(lines) < 4 || lines[0] != "alive" || lines[2] != "max" || lines[3] == "0" {
		t.Errorf("after the fork bomb: %q, want alive and a pids.events max count above 0", out)
	}
	if ps := processes(t, sb); strings.Count(ps, "\n") > 12 {
		t.Errorf("processes left after the fork bomb:\n%s", ps)
	}

	// Memory beyond the limit is not granted: the process is killed.
	res, err = sb.Shell(ctx, "x=$(head -c 200000000 /dev/zero | tr '\\000' a); echo ${#x}", 30*time.Second)
	if err != nil || res.ExitCode == 0 || strings.Contains(res.Stdout, "200000000") {
		t.Errorf("allocating 200 MB under a 64 MiB limit: %+v, %v; want it killed", res, err)
	}
	if out := mustShell(t, sb, "echo alive"); out != "alive\n" {
		t.Errorf("after the memory test: %q", out)
	}
}

func TestEnsureIsIdempotent(t *testing.T) {
	sb, m, runID := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	if _, err := sb.Write(ctx, "keep.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	again, err := m.Ensure(ctx, runID, Options{})
	if err != nil || again.ID() != sb.ID() {
		t.Fatalf("second Ensure = %v, %v; want container %s", again, err, sb.ID())
	}

	// A stopped container (daemon restart, host reboot) is started again with its
	// workspace.
	if _, err := engine.ContainerStop(ctx, sb.ID(), client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted, err := m.Ensure(ctx, runID, Options{})
	if err != nil || restarted.ID() != sb.ID() {
		t.Fatalf("Ensure after stop = %v, %v", restarted, err)
	}
	if b, err := restarted.Read(ctx, "keep.txt"); err != nil || string(b) != "kept" {
		t.Errorf("Read after restart = %q, %v", b, err)
	}
	if out := mustShell(t, restarted, "cat keep.txt"); out != "kept" {
		t.Errorf("shell after restart = %q", out)
	}

	// Racing Ensures for a new run end with one container.
	race := testRunID(t)
	t.Cleanup(func() { _ = m.Remove(context.Background(), race) })
	ids := make(chan string, 4)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := NewManager(engine, "racer").Ensure(ctx, race, Options{Image: testImage})
			if err != nil {
				t.Errorf("racing Ensure: %v", err)
				return
			}
			ids <- s.ID()
		}()
	}
	wg.Wait()
	close(ids)
	var got []string
	for id := range ids {
		got = append(got, id)
	}
	res, _ := engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: runFilter(race)})
	list := res.Items
	if len(list) != 1 || len(got) != 4 || slices.Compact(slices.Sorted(slices.Values(got)))[0] != list[0].ID || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 1 {
		t.Errorf("racing Ensures got %q; containers %d", got, len(list))
	}

	// After Remove, a handle reports the container gone and Ensure makes a fresh one.
	if err := m.Remove(ctx, runID); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Read(ctx, "keep.txt"); !errors.Is(err, ErrContainerGone) {
		t.Errorf("Read on a removed container = %v, want ErrContainerGone", err)
	}
	if _, err := sb.Shell(ctx, "true", 0); !errors.Is(err, ErrContainerGone) {
		t.Errorf("Shell on a removed container = %v, want ErrContainerGone", err)
	}
	fresh, err := m.Ensure(ctx, runID, Options{Image: testImage})
	if err != nil || fresh.ID() == sb.ID() {
		t.Fatalf("Ensure after Remove = %v, %v", fresh, err)
	}
	if _, err := fresh.Read(ctx, "keep.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Read in the fresh container = %v, want ErrNotFound", err)
	}
}

func TestArchiveAndRestoreWorkspace(t *testing.T) {
	sb, m, runID := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	bin := make([]byte, 300_000)
	_, _ = rand.Read(bin)
	if _, err := sb.Write(ctx, "src/main.go", []byte("package main\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Write(ctx, "data/blob.bin", bin); err != nil {
		t.Fatal(err)
	}
	mustShell(t, sb, "mkdir -p empty/dir .hidden && echo h > .hidden/h && printf '#!/bin/sh\\necho ran\\n' > tool.sh && chmod 755 tool.sh && ln -s src/main.go link.go && touch -d '2020-01-02 03:04:05' src/main.go")
	// Everything but the workspace root's own mtime, which the extraction itself changes.
	const listing = "stat -c '%n %a %u:%g' .; find . -mindepth 1 | sort | while read -r f; do stat -c '%n %a %u:%g %F %s %Y' \"$f\"; done"
	before := mustShell(t, sb, listing)

	rc, err := sb.ArchiveWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The run suspends: the container goes; later a fresh one gets the workspace back.
	if err := m.Remove(ctx, runID); err != nil {
		t.Fatal(err)
	}
	fresh, err := m.Ensure(ctx, runID, Options{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID() == sb.ID() {
		t.Fatal("Ensure after Remove reused the removed container")
	}
	if err := fresh.RestoreWorkspace(ctx, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	if after := mustShell(t, fresh, listing); after != before {
		t.Errorf("workspace after restore:\n%s\nbefore:\n%s", after, before)
	}
	if b, err := fresh.Read(ctx, "data/blob.bin"); err != nil || !bytes.Equal(b, bin) {
		t.Errorf("binary file after restore: %d bytes, %v", len(b), err)
	}
	if b, err := fresh.Read(ctx, "link.go"); err != nil || string(b) != "package main\n" {
		t.Errorf("Read(link.go) after restore = %q, %v", b, err)
	}
	if out := mustShell(t, fresh, "./tool.sh"); out != "ran\n" {
		t.Errorf("tool.sh after restore: %q", out)
	}
}

func TestReapRemovesClosedAndOrphanedRuns(t *testing.T) {
	open, _, openID := newTestSandbox(t, Options{})
	closed, _, closedID := newTestSandbox(t, Options{})
	// A worker killed mid-run: its container stays, and its run is unknown to Temporal.
	orphan, _, orphanID := newTestSandbox(t, Options{})
	ctx := testCtx(t)
	mine := map[string]bool{openID: false, closedID: true, orphanID: true}
	removed, err := Reap(ctx, engine, func(runID string) (bool, error) {
		// Other users' containers on this engine are left alone: only this test's runs
		// are closed.
		return mine[runID], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{closed.Name(), orphan.Name()}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("Reap removed %q, want %q", removed, want)
	}
	for id, wantExists := range map[string]bool{open.ID(): true, closed.ID(): false, orphan.ID(): false} {
		_, err := engine.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if exists := err == nil; exists != wantExists {
			t.Errorf("container %s exists = %v, want %v", shortID(id), exists, wantExists)
		}
	}
	vols, err := engine.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", LabelRun+"="+closedID)})
	if err != nil || len(vols.Items) != 0 {
		t.Errorf("volumes of the reaped run: %d, %v; want none", len(vols.Items), err)
	}
	if _, err := open.Shell(ctx, "true", 0); err != nil {
		t.Errorf("the open run's sandbox after Reap: %v", err)
	}
}

func TestMissingImageIsClear(t *testing.T) {
	cli := needEngine(t)
	m := NewManager(cli, "gotest-worker")
	runID := testRunID(t)
	t.Cleanup(func() { _ = m.Remove(context.Background(), runID) })
	_, err := m.Ensure(testCtx(t), runID, Options{Image: "nexo-sandbox:no-such-image"})
	if !errors.Is(err, ErrImageNotFound) || !strings.Contains(err.Error(), "nexo-sandbox:no-such-image") ||
		!strings.Contains(err.Error(), "starter sandbox build-image") {
		t.Fatalf("Ensure = %v, want ErrImageNotFound naming the image and the build command", err)
	}
	res, _ := cli.ContainerList(testCtx(t), client.ContainerListOptions{All: true, Filters: runFilter(runID)})
	list := res.Items
	if len(list) != 0 {
		t.Errorf("%d containers left behind", len(list))
	}
}

func TestBuiltImage(t *testing.T) {
	cli := needEngine(t)
	img, err := cli.ImageInspect(testCtx(t), testImage)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config == nil || img.Config.User != "1000:1000" || img.Config.WorkingDir != "/workspace" {
		t.Errorf("image config = %+v", img.Config)
	}
	no := false
	sb, _, _ := newTestSandbox(t, Options{ReadonlyRootfs: &no})
	out := mustShell(t, sb, "whoami; stat -c '%U %a' /workspace /tmp; /usr/bin/env true && readlink /bin/sh")
	if want := "nexo\nnexo 755\nroot 1777\nbusybox\n"; out != want {
		t.Errorf("in the image: %q, want %q", out, want)
	}
}

// TestMissingBindSourceIsRefused: a bind whose host path does not exist fails Ensure with
// a *BindSourceError naming the bind, and Docker does not create the path on the host.
func TestMissingBindSourceIsRefused(t *testing.T) {
	cli := needEngine(t)
	m := NewManager(cli, "gotest-worker")
	runID := testRunID(t)
	t.Cleanup(func() { _ = m.Remove(context.Background(), runID) })
	missing := filepath.Join(t.TempDir(), "no-such-repo")
	spec := missing + ":/workspace/repo"
	_, err := m.Ensure(testCtx(t), runID, Options{Image: testImage, ROBinds: []string{spec}})
	var be *BindSourceError
	if !errors.As(err, &be) || !errors.Is(err, ErrInvalidOptions) || be.Field != "ro_binds" || be.Bind != spec ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Ensure = %v, want a *BindSourceError for ro_binds %q", err, spec)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host path %s after Ensure: %v; want it still absent", missing, err)
	}
	res, _ := cli.ContainerList(testCtx(t), client.ContainerListOptions{All: true, Filters: runFilter(runID)})
	list := res.Items
	if len(list) != 0 {
		t.Errorf("%d containers left behind", len(list))
	}
}

// TestCheck: what a worker checks at start, without making a container.
func TestCheck(t *testing.T) {
	cli := needEngine(t)
	m := NewManager(cli, "gotest-worker")
	dir := t.TempDir()
	if err := m.Check(testCtx(t), Options{Image: testImage, RWBinds: []string{dir + ":/data"}}); err != nil {
		t.Errorf("Check of a good sandbox: %v", err)
	}
	if err := m.Check(testCtx(t), Options{Image: "nexo-sandbox:no-such-image"}); !errors.Is(err, ErrImageNotFound) ||
		!strings.Contains(err.Error(), "nexo-sandbox:no-such-image") {
		t.Errorf("Check with a missing image = %v, want ErrImageNotFound naming it", err)
	}
	missing := filepath.Join(dir, "gone")
	var be *BindSourceError
	if err := m.Check(testCtx(t), Options{Image: testImage, RWBinds: []string{missing + ":/data"}}); !errors.As(err, &be) || be.Host != missing {
		t.Errorf("Check with a missing bind source = %v, want a *BindSourceError for %s", err, missing)
	}
	if err := m.Check(testCtx(t), Options{Image: testImage, Network: "host"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Check with network host = %v, want ErrInvalidOptions", err)
	}
}
