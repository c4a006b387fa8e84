package bwrap

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/sandbox"
)

// requireBwrap skips where bubblewrap is not installed, except under CI, where .ci/run
// installs it and its absence is a failure.
func requireBwrap(t *testing.T) {
	t.Helper()
	if err := Probe(context.Background(), ""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap must run under CI: %v", err)
		}
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
}

// world is a workspace inside a directory that also holds a "worker config" with a
// secret, as a worker's checkout does, plus a worker environment variable with a secret.
type world struct {
	sb     *Sandbox
	local  *sandbox.Local // the same workspace, unsealed: the control
	parent string
	dir    string
	config string
}

const secret = "sk-live-do-not-leak-7d1f"

func newWorld(t *testing.T, opts Options) world {
	t.Helper()
	requireBwrap(t)
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(parent, "nexo.yaml")
	if err := os.WriteFile(config, []byte("model:\n  api_key: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", secret)
	dir := filepath.Join(parent, "workspaces", "run-1")
	sb, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	local, err := sandbox.NewLocal(dir, sandbox.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close(context.Background()) })
	return world{sb: sb, local: local, parent: parent, dir: dir, config: config}
}

func run(t *testing.T, sb sandbox.Sandbox, cmd string) sandbox.ShellResult {
	t.Helper()
	res, err := sb.Shell(context.Background(), cmd, 20*time.Second)
	if err != nil {
		t.Fatalf("Shell(%q): %v", cmd, err)
	}
	return res
}

// TestEscapesFail runs each escape a model's command could try and checks it fails in the
// sealed tier. The same command run by the unsealed local tier succeeds (the control), so
// each case shows what the seal takes away, and cannot pass because the command is wrong.
func TestEscapesFail(t *testing.T) {
	w := newWorld(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hostPid := strconv.Itoa(os.Getpid())
	// A process of the worker's user with a secret in its environment, as the worker is
	// (a test process's own /proc environ does not show t.Setenv).
	worker := exec.Command("sleep", "600")
	worker.Env = []string{"OPENAI_API_KEY=" + secret}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { worker.Process.Kill(); worker.Wait() }()
	workerPid := strconv.Itoa(worker.Process.Pid)
	// Outside the workspace both in the test's temporary directory (under /tmp, which the
	// sandbox replaces by its own) and in the package's source directory (not mounted).
	outsideTmp := filepath.Join(w.parent, "escaped.txt")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	outsideSrc := filepath.Join(cwd, "escaped-"+hostPid+".txt")
	defer os.Remove(outsideSrc)

	tests := []struct {
		name, cmd string
		// local says whether the control (the local tier) can do it: some escapes
		// need privileges the test may not have (/etc/shadow as a non-root user).
		local bool
		// wrote, when set, is a host file the escape would create: the command may
		// succeed (inside its own /tmp) as long as the host's file stays absent.
		wrote string
	}{
		{"read the worker's config file", "cat " + w.config, true, ""},
		{"list the worker's directory", "ls " + w.parent + " | grep nexo.yaml", true, ""},
		{"read /etc/shadow", "cat /etc/shadow", os.Getuid() == 0, ""},
		{"list /root", "ls -a /root | grep -q . && ls /root >/dev/null", os.Getuid() == 0, ""},
		{"read the worker's environment from /proc", "tr '\\0' '\\n' < /proc/" + workerPid + "/environ | grep " + secret, true, ""},
		{"find the secret in /proc/1/environ", "tr '\\0' '\\n' < /proc/1/environ | grep " + secret, false, ""},
		{"find the secret in any /proc/*/environ", "cat /proc/[0-9]*/environ | tr '\\0' '\\n' | grep " + secret, true, ""},
		{"connect to a loopback listener on the host", "bash -c 'echo hi > /dev/tcp/127.0.0.1/" + port + "'", true, ""},
		{"write outside the workspace under /tmp", "echo x > " + outsideTmp + " && test -s " + outsideTmp + " && false", true, outsideTmp},
		{"write outside the workspace", "echo x > " + outsideSrc, true, outsideSrc},
		{"write into /usr", "touch /usr/nexo-escape-" + hostPid + " && rm /usr/nexo-escape-" + hostPid, os.Getuid() == 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, w.sb, tt.cmd)
			if tt.wrote != "" {
				if _, err := os.Stat(tt.wrote); !os.IsNotExist(err) {
					t.Errorf("sealed %q reached the host's %s (stat: %v)", tt.cmd, tt.wrote, err)
				}
			} else if res.ExitCode == 0 {
				t.Errorf("sealed %q: exit 0, stdout %q; want it to fail", tt.cmd, res.Stdout)
			}
			if strings.Contains(res.Stdout+res.Stderr, secret) {
				t.Errorf("sealed %q printed the secret: %q", tt.cmd, res.Stdout+res.Stderr)
			}
			if tt.local {
				res := run(t, w.local, tt.cmd)
				if tt.wrote != "" {
					if _, err := os.Stat(tt.wrote); err != nil {
						t.Errorf("control: local %q did not write %s; the case tests nothing", tt.cmd, tt.wrote)
					}
					os.Remove(tt.wrote)
				} else if res.ExitCode != 0 {
					t.Errorf("control: local %q failed (%d, %q); the case tests nothing", tt.cmd, res.ExitCode, res.Stderr)
				}
			}
		})
	}
	// The control connected once; the sealed command never did.
	if n := len(accepted); n != 1 {
		t.Errorf("loopback listener accepted %d connections, want 1 (the local control's)", n)
	}
}

// TestSealed checks what a command sees of itself: no capabilities, a minimal environment
// without the worker's secrets, only its own processes, a writable workspace whose files
// the worker reads, and a private /tmp.
func TestSealed(t *testing.T) {
	w := newWorld(t, Options{Env: map[string]string{"GREETING": "hello"}})
	res := run(t, w.sb, "grep CapEff /proc/self/status")
	if got := strings.Fields(res.Stdout); len(got) != 2 || got[1] != "0000000000000000" {
		t.Errorf("CapEff = %q, want 0000000000000000", res.Stdout)
	}
	if res := run(t, w.sb, "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status"); !strings.Contains(res.Stdout, "NoNewPrivs:\t1") || !strings.Contains(res.Stdout, "Seccomp:\t2") {
		t.Errorf("status = %q, want NoNewPrivs 1 and Seccomp 2 (a filter)", res.Stdout)
	}
	res = run(t, w.sb, "env | sort")
	want := "GREETING=hello\nHOME=" + w.dir + "\nLANG=C.UTF-8\nPATH=" + shellPath + "\nPWD=" + w.dir + "\nTMPDIR=/tmp\n"
	if res.Stdout != want {
		t.Errorf("env = %q, want %q", res.Stdout, want)
	}
	res = run(t, w.sb, "ls /proc | grep -E '^[0-9]+$' | wc -l")
	if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n < 1 || n > 6 {
		t.Errorf("processes visible in /proc: %q, want only the command's own few", res.Stdout)
	}
	res = run(t, w.sb, "pwd; echo made > made.txt; mkdir -p sub && echo deep > sub/d.txt")
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != w.dir {
		t.Fatalf("workspace command = %d %q %q, want exit 0 in %s", res.ExitCode, res.Stdout, res.Stderr, w.dir)
	}
	if data, err := w.sb.Read(context.Background(), "sub/d.txt"); err != nil || string(data) != "deep\n" {
		t.Errorf("Read(sub/d.txt) = %q, %v; want the command's write", data, err)
	}
	marker := "nexo-bwrap-tmp-" + strconv.Itoa(os.Getpid())
	if res := run(t, w.sb, "echo x > /tmp/"+marker+" && cat /tmp/"+marker); res.Stdout != "x\n" {
		t.Errorf("private /tmp: %q %q, want it writable", res.Stdout, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), marker)); !os.IsNotExist(err) {
		t.Errorf("a write to the sandbox's /tmp reached the host's: %v", err)
	}
	if res := run(t, w.sb, "cat /tmp/"+marker); res.ExitCode == 0 {
		t.Errorf("/tmp kept a file from the previous command")
	}
	if res := run(t, w.sb, "hostname"); res.Stdout != "sandbox\n" {
		t.Errorf("hostname = %q, want sandbox", res.Stdout)
	}
}

// TestMemoryLimit: a process of the command cannot take more address space than Memory.
func TestMemoryLimit(t *testing.T) {
	w := newWorld(t, Options{Memory: 256 << 20})
	// dd allocates its block at once: 512 MiB is over the limit, 16 MiB under it.
	if res := run(t, w.sb, "dd if=/dev/zero of=/dev/null bs=512M count=1"); res.ExitCode == 0 {
		t.Errorf("a 512 MiB allocation under a 256 MiB limit succeeded: %q", res.Stderr)
	}
	if res := run(t, w.sb, "dd if=/dev/zero of=/dev/null bs=16M count=1"); res.ExitCode != 0 {
		t.Errorf("a 16 MiB allocation under a 256 MiB limit failed: %q", res.Stderr)
	}
}

// TestPidsLimit: a command cannot have more processes than Pids. The kernel exempts the
// host's root user from RLIMIT_NPROC, so as root the test checks the limit is set.
func TestPidsLimit(t *testing.T) {
	w := newWorld(t, Options{Pids: 20})
	if res := run(t, w.sb, "grep 'Max processes' /proc/self/limits"); !strings.Contains(res.Stdout, " 20 ") {
		t.Errorf("limits = %q, want Max processes 20", res.Stdout)
	}
	if os.Getuid() == 0 {
		t.Log("running as root: the kernel does not enforce RLIMIT_NPROC for root, only its value is checked")
		return
	}
	res := run(t, w.sb, "for i in $(seq 40); do sleep 5 & done 2>&1; kill $(jobs -p) 2>/dev/null; echo done")
	if !strings.Contains(res.Stdout+res.Stderr, "fork") && !strings.Contains(res.Stdout+res.Stderr, "resource") {
		t.Errorf("40 processes under a limit of 20 all started: %q %q", res.Stdout, res.Stderr)
	}
}

// TestTimeoutKillsEverything: a command that times out, and a process it left in the
// background in a session of its own, are gone when Shell returns.
func TestTimeoutKillsEverything(t *testing.T) {
	w := newWorld(t, Options{})
	start := time.Now()
	res, err := w.sb.Shell(context.Background(), "setsid sleep 987 & sleep 654", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("result = %+v, want TimedOut and exit 137", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shell returned after %v, want soon after the timeout", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesWith("987", "654")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processesWith lists host pids running sleep with one of args.
func processesWith(args ...string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range args {
			if bytes.Equal(cmdline, []byte("sleep\x00"+a+"\x00")) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// TestProbeMissing: a bwrap that is not there is ErrUnavailable, naming the package.
func TestProbeMissing(t *testing.T) {
	err := Probe(context.Background(), "/nonexistent/bwrap")
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("Probe(missing) = %v, want ErrUnavailable naming the package", err)
	}
	if _, err := New(t.TempDir(), Options{Bwrap: "/nonexistent/bwrap"}); err == nil {
		t.Error("New with a missing bwrap succeeded")
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		if _, err := New(t.TempDir(), Options{Env: map[string]string{"A=B": "x"}}); err == nil {
			t.Error("New with an invalid environment variable name succeeded")
		}
	}
}

// syscallProbe makes system calls the seccomp filter denies and prints each outcome: "ok"
// where the kernel allowed it.
const syscallProbe = `import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": {"keyctl": 250, "userfaultfd": 323, "io_uring_setup": 425},
      "aarch64": {"keyctl": 219, "userfaultfd": 282, "io_uring_setup": 425}}[platform.machine()]
args = {"keyctl": (0, ctypes.c_long(-3), 1), "userfaultfd": (0,), "io_uring_setup": (1, ctypes.create_string_buffer(120))}
for name in ("keyctl", "userfaultfd", "io_uring_setup"):
    r = libc.syscall(nr[name], *args[name])
    print(name, "ok" if r >= 0 else os.strerror(ctypes.get_errno()))
`

// TestSeccompFilter: system calls the filter denies fail with EPERM in the sandbox, while
// the same calls succeed from the local tier (the control).
func TestSeccompFilter(t *testing.T) {
	w := newWorld(t, Options{})
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3, which makes the raw system calls, is not installed")
	}
	if _, err := w.sb.Write(context.Background(), "probe.py", []byte(syscallProbe)); err != nil {
		t.Fatal(err)
	}
	sealed, local := run(t, w.sb, "python3 probe.py"), run(t, w.local, "python3 probe.py")
	tested := 0
	for _, name := range []string{"keyctl", "userfaultfd", "io_uring_setup"} {
		if !strings.Contains(local.Stdout, name+" ok") {
			// Refused on the host too (vm.unprivileged_userfaultfd=0 for a user that is
			// not root, a container's own filter): this call shows nothing here.
			t.Logf("control: local %s did not succeed (%q %q); not checked", name, local.Stdout, local.Stderr)
			continue
		}
		tested++
		if !strings.Contains(sealed.Stdout, name+" Operation not permitted") {
			t.Errorf("sealed %s: %q %q, want Operation not permitted", name, sealed.Stdout, sealed.Stderr)
		}
	}
	if tested == 0 {
		t.Errorf("control: no probed call succeeds from the local tier (%q %q); the test shows nothing", local.Stdout, local.Stderr)
	}
}

// TestSymlinkedWorkspace: a workspace reached through a symbolic link is the same
// directory inside the sandbox under both spellings.
func TestSymlinkedWorkspace(t *testing.T) {
	requireBwrap(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	sb, err := New(link, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	res := run(t, sb, "echo one > "+filepath.Join(link, "a.txt")+" && cat "+filepath.Join(tmp, "real", "a.txt")+" && pwd")
	if want := "one\n" + filepath.Join(tmp, "real") + "\n"; res.Stdout != want {
		t.Errorf("through the link: %q %q, want %q", res.Stdout, res.Stderr, want)
	}
	if !strings.Contains(sb.Instructions(), filepath.Join(tmp, "real")) {
		t.Errorf("Instructions() = %q, want the directory a command sees", sb.Instructions())
	}
}

// TestProbeNoUserNamespaces: a bwrap that cannot make its namespaces (here a stand-in
// that fails as bwrap does without user namespaces) is ErrUnavailable with bwrap's own
// message and what to enable.
func TestProbeNoUserNamespaces(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bwrap")
	script := "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Probe(context.Background(), fake)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "No permissions to create new namespace") ||
		!strings.Contains(err.Error(), "user namespaces must be enabled") {
		t.Errorf("Probe = %v, want ErrUnavailable with bwrap's message and the sysctl to set", err)
	}
}

// TestExecBindsTheProgram: a program outside the system folders and the workspace (a
// harness built beside its config) runs sealed, bound read-only, and reads its stdin.
func TestExecBindsTheProgram(t *testing.T) {
	w := newWorld(t, Options{})
	prog := filepath.Join(t.TempDir(), "harness.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nread line\necho \"got $line\"\necho x >> \"$0\" || echo read-only\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := w.sb.Exec(context.Background(), []string{prog}, sandbox.ExecOptions{Stdin: []byte("hello\n"), Timeout: 20 * time.Second, ReadOnly: []string{prog}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "got hello\nread-only\n" {
		t.Errorf("result = %+v", res)
	}
	if res, _ := w.sb.Exec(context.Background(), []string{prog}, sandbox.ExecOptions{Timeout: 20 * time.Second}); res.ExitCode == 0 {
		t.Errorf("unbound, the program ran anyway: %+v", res)
	}
}
