// Package bwrap is the sealed process tier: a workspace in a host directory, like
// sandbox.Local, whose commands each run under bubblewrap (Debian's bwrap) in new user,
// mount, pid, ipc, uts, network and (where the kernel allows) cgroup namespaces, with a
// read-only system, the workspace the only writable place, a private /tmp, a /proc of
// the sandbox's own processes, every capability dropped, a seccomp filter, a cleared
// environment and resource limits. A command is a process, not a container, so it starts in milliseconds.
//
// File operations (read, write, glob, listing for snapshots, archives for moves) act on
// the directory from the worker through sandbox.Local's path guard: the workspace is a
// plain directory, and only commands need sealing.
package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/egress"
)

// Defaults of the tier's limits, the Docker tier's figures where the two can compare.
const (
	// DefaultMemory is the address-space limit of each process of a command (RLIMIT_AS):
	// 1 GiB, as the Docker tier's memory default.
	DefaultMemory int64 = 1 << 30
	// DefaultPids bounds the processes a command may have at once (RLIMIT_NPROC, counted
	// in the sandbox's own user namespace): 512, as the Docker tier's pids limit.
	DefaultPids int64 = 512
)

// shellPath is the PATH of a command inside the sandbox.
const shellPath = "/usr/local/bin:/usr/bin:/bin"

// prlimitPath sets a command's limits inside the sandbox, after bwrap made its user
// namespace (util-linux, present on every Debian): set before, RLIMIT_NPROC would count
// every process of the worker's user on the host too.
const prlimitPath = "/usr/bin/prlimit"

// Sentinel errors of the tier.
var (
	// ErrUnavailable: bwrap is missing or cannot make its namespaces on this host.
	ErrUnavailable = errors.New("bubblewrap sandboxes are unavailable")
)

// systemDirs are bound read-only, or re-created as the same symbolic link where the host
// has merged them into /usr (Debian: /bin -> usr/bin). Nothing else of the host's root is
// visible: not /root, /home, /var, /opt, /run, nor the worker's own directory.
var systemDirs = []string{"/usr", "/bin", "/lib", "/lib64", "/sbin"}

// etcFiles is the part of /etc a command needs: names, hosts and name service, the
// dynamic linker's cache, time zone, Debian's alternatives and the CA certificates. No
// secrets (shadow, gshadow, ssh host keys, sudoers, the worker's config) and nothing a
// user put there.
var etcFiles = []string{
	"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf",
	"/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/ssl/certs",
}

// Options configures a bubblewrap sandbox. The zero value is usable.
type Options struct {
	// Bwrap is the bwrap executable; empty finds it on PATH.
	Bwrap string
	// Env adds variables to the minimal environment of a command (PATH, HOME, LANG,
	// TMPDIR); an entry overrides those. Nothing of the worker's environment reaches a
	// command otherwise.
	Env map[string]string
	// Memory limits each process's address space, in bytes (RLIMIT_AS); 0 means
	// DefaultMemory, < 0 no limit.
	Memory int64
	// Pids limits the processes of a command (RLIMIT_NPROC in its user namespace); 0
	// means DefaultPids, < 0 no limit. The kernel does not apply it to the host's root
	// user: a worker running as root has no process limit in this tier.
	Pids int64
	// MaxOutput caps what a command keeps of stdout and of stderr each (see
	// sandbox.LocalOptions); <= 0 means sandbox.DefaultMaxOutput.
	MaxOutput int
	// RefuseHardLinks makes the file tools and snapshots refuse a file with more than one
	// hard link (see sandbox.LocalOptions.RefuseHardLinks); set it for a user's own dir.
	// A sealed command can still read such a file: the link is inside the bound directory.
	RefuseHardLinks bool
	// Egress, when set, gives commands a way out through the worker's egress proxy
	// (sandbox/egress); the sandbox keeps no network of its own either way.
	Egress *Egress
}

// Egress is what a sandbox needs of the egress proxy: the forwarder, the session's
// socket and the CA bundle, all bound into the sandbox (the forwarder and the bundle
// read-only).
type Egress struct {
	// Forwarder is the executable run as egress.ForwarderName (the worker's own).
	Forwarder string
	// Socket is the session's unix socket.
	Socket string
	// Token is the session's token, handed to the forwarder through a pipe (descriptor 4)
	// for each command; never an argument, a variable or a file.
	Token string
	// Bundle is the CA bundle commands trust (the system's roots and the worker's CA).
	Bundle string
	// Port is where the forwarder listens inside the sandbox (egress.ForwardPort).
	Port int
	// Allow is the agent's allow list, for the model's instructions.
	Allow []string
	// Close, when set, is called when the sandbox closes: the session ends with it.
	Close func() error
}

// Paths of the egress proxy's parts inside a sandbox.
const (
	egressDir       = "/run/nexo-egress"
	egressForwarder = egressDir + "/" + egress.ForwarderName
	egressSocket    = egressDir + "/proxy.sock"
	egressBundle    = egressDir + "/ca-bundle.pem"
)

// egressEnv is the environment that sends a command's HTTP clients to the forwarder and
// makes them trust the bundle: curl, wget, git, Python's requests, pip, Node and Go all
// read one of these.
func egressEnv(port int) map[string]string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(port)
	return map[string]string{
		"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
		"ALL_PROXY": proxy, "all_proxy": proxy, "NO_PROXY": "", "no_proxy": "",
		"SSL_CERT_FILE": egressBundle, "CURL_CA_BUNDLE": egressBundle, "REQUESTS_CA_BUNDLE": egressBundle,
		"GIT_SSL_CAINFO": egressBundle, "NODE_EXTRA_CA_CERTS": egressBundle, "PIP_CERT": egressBundle,
	}
}

// Sandbox is a bubblewrap workspace: sandbox.Local's file operations and listing, and a
// Shell whose commands run sealed. Safe for concurrent use. It never deletes its
// directory: whoever made it (the worker, for a per-run one) removes it.
type Sandbox struct {
	*sandbox.Local
	dir    string   // physical workspace directory, bound at the same path inside
	prefix []string // bwrap and its options, up to and including "--"
	egress *Egress  // nil: no way out
}

var (
	_ sandbox.Sandbox = (*Sandbox)(nil)
	_ sandbox.Lister  = (*Sandbox)(nil)
	_ sandbox.Execer  = (*Sandbox)(nil)
)

// New returns a bubblewrap sandbox over dir, creating the directory if missing. It does
// not run bwrap: Probe tells whether it can run here.
func New(dir string, opts Options) (*Sandbox, error) {
	bin, err := lookBwrap(opts.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("new bubblewrap sandbox: %w", err)
	}
	s := &Sandbox{}
	// bwrap needs no guard process beside it (sandbox.LocalOptions.WrapDiesWithWorker):
	// --die-with-parent kills it when the worker dies, and its pid namespace dies with it.
	local, err := sandbox.NewLocal(dir, sandbox.LocalOptions{MaxOutput: opts.MaxOutput, Wrap: s.wrap, WrapExec: s.wrapExec,
		WrapDiesWithWorker: true, RefuseHardLinks: opts.RefuseHardLinks})
	if err != nil {
		return nil, fmt.Errorf("new bubblewrap sandbox: %w", err)
	}
	s.Local, s.dir = local, local.RealDir()
	env := map[string]string{"PATH": shellPath, "HOME": s.dir, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
	eg := opts.Egress
	if eg != nil {
		if eg.Forwarder == "" || eg.Socket == "" || eg.Bundle == "" || eg.Token == "" {
			return nil, fmt.Errorf("new bubblewrap sandbox: egress needs the forwarder, the socket, its token and the CA bundle")
		}
		if eg.Port == 0 {
			eg.Port = egress.ForwardPort
		}
		for k, v := range egressEnv(eg.Port) {
			env[k] = v
		}
	}
	for k, v := range opts.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("new bubblewrap sandbox: invalid environment variable %q", k)
		}
		env[k] = v
	}
	s.prefix, err = sealedArgs(bin, s.dir, env)
	if err != nil {
		return nil, fmt.Errorf("new bubblewrap sandbox: %w", err)
	}
	if abs := local.Dir(); abs != s.dir {
		// The directory as the worker spells it (through a symbolic link) names it inside
		// too, so a path from the file tools works in a command.
		at := len(s.prefix) - 3 // before --chdir DIR --
		s.prefix = append(s.prefix[:at:at], append([]string{"--bind", s.dir, abs}, s.prefix[at:]...)...)
	}
	if eg != nil {
		// The forwarder goes first inside: it listens before the command starts, then runs
		// it (after prlimit: the forwarder itself is not the command's to limit).
		at := len(s.prefix) - 3 // before --chdir DIR --
		binds := []string{"--ro-bind", eg.Forwarder, egressForwarder, "--ro-bind", eg.Bundle, egressBundle, "--bind", eg.Socket, egressSocket}
		s.prefix = append(s.prefix[:at:at], append(binds, s.prefix[at:]...)...)
		s.prefix = append(s.prefix, egressForwarder, strconv.Itoa(eg.Port), egressSocket, strconv.Itoa(tokenFD), "--")
		s.egress = eg
	}
	if lim := limits(opts); len(lim) > 0 {
		s.prefix = append(append(s.prefix, prlimitPath), lim...)
		s.prefix = append(s.prefix, "--")
	}
	return s, nil
}

// ParseMemory reads a memory size as the Docker tier's memory field does ("512m", "2g");
// under 16m no shell starts, so smaller sizes are refused.
func ParseMemory(s string) (int64, error) {
	n, err := units.RAMInBytes(s)
	if err != nil || n < 16<<20 {
		return 0, fmt.Errorf("%q is not a size of at least 16m (e.g. 512m, 2g)", s)
	}
	return n, nil
}

// LookPath finds the bwrap executable name ("" is bwrap on PATH), or says how to install it.
func LookPath(name string) (string, error) { return lookBwrap(name) }

// lookBwrap finds the bwrap executable.
func lookBwrap(name string) (string, error) {
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found (install bubblewrap: apt-get install bubblewrap)", ErrUnavailable, name)
	}
	return p, nil
}

// sealedArgs is the bwrap command line that runs a command sealed with the workspace dir
// as its only writable place, up to the "--" that precedes the command.
func sealedArgs(bin, dir string, env map[string]string) ([]string, error) {
	args := []string{bin,
		// Every namespace bwrap knows (user, mount, pid, ipc, uts, net, cgroup where the
		// kernel allows it), no nested user namespaces, every capability dropped.
		"--unshare-all", "--unshare-user", "--unshare-cgroup-try", "--disable-userns", "--cap-drop", "ALL",
		// Killed (SIGKILL, by the kernel: PR_SET_PDEATHSIG) when the worker dies, even by
		// SIGKILL, and every process of the sandbox with it: the pid namespace dies with
		// its first process. That is what keeps a command from outliving its worker, so
		// no guard process runs beside it (sandbox.LocalOptions.WrapDiesWithWorker). A new
		// session so a command cannot push input into the worker's terminal (TIOCSTI).
		"--die-with-parent", "--new-session",
		"--hostname", "sandbox", "--clearenv",
		// The seccomp filter (seccomp.go), read from the command's descriptor 3.
		"--seccomp", "3",
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--setenv", k, env[k])
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue // not on this host (/lib64 on some architectures)
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, fmt.Errorf("read link %s: %w", d, err)
			}
			args = append(args, "--symlink", target, d)
		default:
			args = append(args, "--ro-bind", d, d)
		}
	}
	for _, f := range etcFiles {
		args = append(args, "--ro-bind-try", f, f)
	}
	args = append(args,
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		// After /tmp: a workspace under /tmp is bound over the private tmpfs.
		"--bind", dir, dir, "--chdir", dir,
		"--",
	)
	return args, nil
}

// limits is prlimit's options for opts, empty when there is nothing to limit.
func limits(opts Options) []string {
	mem, pids := opts.Memory, opts.Pids
	if mem == 0 {
		mem = DefaultMemory
	}
	if pids == 0 {
		pids = DefaultPids
	}
	var out []string
	if mem > 0 {
		out = append(out, "--as="+strconv.FormatInt(mem, 10))
	}
	if pids > 0 {
		out = append(out, "--nproc="+strconv.FormatInt(pids, 10))
	}
	return out
}

// tokenFD is the descriptor the egress forwarder reads its session's token from: the
// second of the command's extra files, after the seccomp filter.
const tokenFD = 4

// wrap runs argv (sh -c CMD) under bwrap, with the seccomp filter as descriptor 3 and,
// with egress, a pipe holding the session's token as descriptor 4.
func (s *Sandbox) wrap(argv []string) ([]string, []*os.File, error) {
	filter, err := filterFile()
	if err != nil {
		return nil, nil, err
	}
	files := []*os.File{filter}
	if s.egress != nil {
		r, w, err := os.Pipe()
		if err != nil {
			filter.Close()
			return nil, nil, fmt.Errorf("egress token pipe: %w", err)
		}
		_, err = w.WriteString(s.egress.Token) // well under a pipe's buffer
		w.Close()
		if err != nil {
			r.Close()
			filter.Close()
			return nil, nil, fmt.Errorf("egress token pipe: %w", err)
		}
		files = append(files, r)
	}
	out := make([]string, 0, len(s.prefix)+len(argv))
	return append(append(out, s.prefix...), argv...), files, nil
}

// wrapExec is wrap for Exec: each of readOnly (the harness's binary) is bound read-only
// at its own path, so a program outside the system folders and the workspace (a harness
// built beside the config) runs sealed like any command. A path must be absolute.
func (s *Sandbox) wrapExec(argv, readOnly []string) ([]string, []*os.File, error) {
	out, files, err := s.wrap(argv)
	if err != nil || len(readOnly) == 0 {
		return out, files, err
	}
	at := -1
	for i, a := range out {
		if a == "--chdir" {
			at = i
			break
		}
	}
	if at < 0 {
		closeFiles(files)
		return nil, nil, errors.New("bubblewrap command line has no --chdir")
	}
	var binds []string
	for _, p := range readOnly {
		if !filepath.IsAbs(p) {
			closeFiles(files)
			return nil, nil, fmt.Errorf("bind %q read-only: not an absolute path", p)
		}
		binds = append(binds, "--ro-bind", p, p)
	}
	out = append(out[:at:at], append(binds, out[at:]...)...)
	return out, files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// Exec runs argv sealed in the workspace (see sandbox.Local.Exec), with opts.ReadOnly
// bound read-only.
func (s *Sandbox) Exec(ctx context.Context, argv []string, opts sandbox.ExecOptions) (sandbox.ExecResult, error) {
	return s.Local.Exec(ctx, argv, opts)
}

// Shell runs command sealed in the workspace (see sandbox.Local.Shell for timeouts,
// output caps and killing; the bwrap process is what is killed, and its pid namespace
// dies with it).
func (s *Sandbox) Shell(ctx context.Context, command string, timeout time.Duration) (sandbox.ShellResult, error) {
	return s.Local.Shell(ctx, command, timeout)
}

// Close closes the workspace and ends the sandbox's egress session.
func (s *Sandbox) Close(ctx context.Context) error {
	err := s.Local.Close(ctx)
	if s.egress != nil && s.egress.Close != nil {
		err = errors.Join(err, s.egress.Close())
	}
	return err
}

// Instructions describes the sealed workspace to the model.
func (s *Sandbox) Instructions() string {
	if s.egress != nil {
		return InstructionsEgress(s.dir, s.egress.Allow)
	}
	return InstructionsFor(s.dir)
}

// InstructionsEgress is InstructionsFor a sandbox whose commands reach the hosts allow
// lists through the egress proxy.
func InstructionsEgress(dir string, allow []string) string {
	return strings.Replace(InstructionsFor(dir), "there is no network,", "there is no network but HTTP and HTTPS through a proxy (already set in "+
		"HTTP_PROXY and HTTPS_PROXY, with its CA in SSL_CERT_FILE) to these hosts only: "+strings.Join(allow, ", ")+
		"; any other host is refused with 403, and credentials for them are added by the proxy, so do not look for tokens,", 1)
}

// InstructionsFor is the text a bubblewrap sandbox over dir gives the model, without
// making the sandbox (a worker that only calls the model asks it).
func InstructionsFor(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the spelling a command's pwd shows
	}
	return fmt.Sprintf("Your workspace is the directory %s. Use the file tools with paths relative "+
		"to it (absolute paths must lie inside it); paths that leave it, including through "+
		"symbolic links, are refused. Shell commands run with sh in that directory inside a "+
		"sealed sandbox: the workspace is the only writable place besides a private /tmp that "+
		"is emptied after each command, the system (/usr, /etc) is read-only, there is no "+
		"network, and only the command's own processes are visible. The environment is minimal "+
		"(PATH=%s, HOME=%s, LANG=C.UTF-8); a command is killed, with anything it started, when "+
		"it times out or finishes, so do not leave servers running in the background; only the "+
		"end of long output is kept.", dir, shellPath, dir)
}

// Probe runs `true` sealed as a command would be, once, and says why bubblewrap cannot
// run here: bwrap missing, or user namespaces unavailable (a kernel or container setting).
func Probe(ctx context.Context, bwrapPath string) error {
	bin, err := lookBwrap(bwrapPath)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "nexo-bwrap-probe-*")
	if err != nil {
		return fmt.Errorf("probe bubblewrap: %w", err)
	}
	defer os.RemoveAll(dir)
	args, err := sealedArgs(bin, dir, map[string]string{"PATH": shellPath})
	if err != nil {
		return fmt.Errorf("probe bubblewrap: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	filter, err := filterFile()
	if err != nil {
		return fmt.Errorf("probe bubblewrap: %w", err)
	}
	defer filter.Close()
	cmd := exec.CommandContext(ctx, args[0], append(args[1:], prlimitPath, "--nproc=64", "--", "/bin/true")...)
	cmd.Env = []string{"PATH=" + shellPath}
	cmd.ExtraFiles = []*os.File{filter}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%w: %s cannot make its namespaces here: %s (user namespaces must be enabled: "+
			"sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0, and a container "+
			"must allow unshare)", ErrUnavailable, bin, msg)
	}
	return nil
}
