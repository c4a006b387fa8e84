package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // for serve-ours --pprof
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/nexo-temporal/nexo/devserver"
)

// serveOursCommand is the hidden command the bench re-executes itself with to host our server
// alone in a child process.
const serveOursCommand = "serve-ours"

// readyPrefix starts the line a serve-ours child prints on stdout once its server is usable,
// followed by the frontend address.
const readyPrefix = "ready "

// temporalInstall is the command that installs the start-dev the issue measures against.
const temporalInstall = "go install github.com/temporalio/cli/cmd/temporal@v1.5.1"

// startTimeout bounds how long a server may take to become usable.
const startTimeout = 2 * time.Minute

// serveOurs hosts devserver.Start on a SQLite file until its stdin closes (the parent ended or
// asked it to stop) or it gets SIGINT/SIGTERM. It prints readyPrefix+address once the server is
// usable.
func serveOurs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(serveOursCommand, flag.ContinueOnError)
	db := fs.String("db", "", "SQLite database file")
	var dc dynamicConfig
	fs.Var(&dc, "dc", "dynamic config override key=value (repeatable)")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (for investigation)")
	stock := fs.Bool("stock", false, "run the server as Temporal ships it (devserver.Options.Stock)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" {
		return errors.New("serve-ours: --db is required")
	}
	if *pprofAddr != "" {
		l, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("listen for pprof: %w", err)
		}
		go func() { _ = http.Serve(l, nil) }() // DefaultServeMux holds net/http/pprof's handlers
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	srv, err := devserver.Start(startCtx, devserver.Options{
		DBPath:        *db,
		Logger:        logger,
		DynamicConfig: dc.values(),
		Stock:         *stock,
	})
	if err != nil {
		return fmt.Errorf("start embedded server: %w", err)
	}
	fmt.Printf("%s%s\n", readyPrefix, srv.FrontendAddress())

	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	}
	return srv.Stop()
}

// server is one Temporal server under test, running in a child process.
type server struct {
	name    string // serverOurs, serverVariant or serverStartDev
	version string // what runs, for the report
	addr    string // frontend host:port
	cmd     *exec.Cmd
	stdin   io.WriteCloser // ours: closing it stops the child
	logPath string         // the child's stderr (and start-dev's stdout)
	exited  chan struct{}  // closed when the child has exited
}

// pid returns the child's process id.
func (s *server) pid() int { return s.cmd.Process.Pid }

// stop ends the child gracefully (ours: stdin closed; start-dev: SIGINT) and kills it when it
// has not exited after a grace period.
func (s *server) stop() {
	if s.stdin != nil {
		_ = s.stdin.Close()
	} else {
		_ = s.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// startOurs re-executes the bench binary as serve-ours on dir/<name>/temporal.db and waits for
// its ready line. name is serverOurs or serverVariant; stock runs it as Temporal ships it
// (devserver.Options.Stock); pprofAddr, when set, is where the child serves net/http/pprof.
func startOurs(ctx context.Context, dir, name string, stock bool, dc dynamicConfig, pprofAddr string) (*server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find bench executable: %w", err)
	}
	args := []string{serveOursCommand, "--db", filepath.Join(dir, name, "temporal.db")}
	for _, kv := range dc {
		args = append(args, "--dc", kv)
	}
	if stock {
		args = append(args, "--stock")
	}
	if pprofAddr != "" {
		args = append(args, "--pprof", pprofAddr)
	}
	s := &server{name: name, version: ourServerVersion(), logPath: filepath.Join(dir, name+".log")}
	s.cmd = exec.Command(exe, args...)
	s.cmd.SysProcAttr = childProcAttr()
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	s.cmd.Stderr = logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), readyPrefix); ok {
				lines <- addr
			}
		}
	}()
	select {
	case s.addr = <-lines:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("embedded server exited before it was ready; its log %s ends:\n%s", s.logPath, tail(s.logPath))
	case <-time.After(startTimeout):
	case <-ctx.Done():
	}
	s.stop()
	return nil, fmt.Errorf("embedded server not ready after %s; its log %s ends:\n%s", startTimeout, s.logPath, tail(s.logPath))
}

// startDev runs `temporal server start-dev` headless on free loopback ports with a SQLite file
// in dir, with dc as --dynamic-config-value flags, and waits until its namespace is usable.
func startDev(ctx context.Context, dir, temporalBin string, dc dynamicConfig) (*server, error) {
	const ip = "127.0.0.1"
	ports := make([]int, 4)
	for i := range ports {
		p, err := devserver.FreePort(ip)
		if err != nil {
			return nil, fmt.Errorf("pick port for start-dev: %w", err)
		}
		ports[i] = p
	}
	args := []string{"server", "start-dev", "--headless",
		"--ip", ip,
		"--port", strconv.Itoa(ports[0]),
		"--http-port", strconv.Itoa(ports[1]),
		"--metrics-port", strconv.Itoa(ports[2]),
		"--ui-port", strconv.Itoa(ports[3]),
		"--db-filename", filepath.Join(dir, "start-dev.db"),
		"--log-level", "error",
	}
	for _, kv := range dc {
		args = append(args, "--dynamic-config-value", kv)
	}
	s := &server{
		name:    serverStartDev,
		version: temporalVersion(temporalBin),
		addr:    fmt.Sprintf("%s:%d", ip, ports[0]),
		logPath: filepath.Join(dir, "start-dev.log"),
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close()
	s.cmd = exec.Command(temporalBin, args...)
	s.cmd.SysProcAttr = childProcAttr()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", temporalBin, err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.exited:
			cancel() // no point waiting for a dead server
		case <-readyCtx.Done():
		}
	}()
	if err := waitReady(readyCtx, s.addr); err != nil {
		s.stop()
		return nil, fmt.Errorf("start-dev (%s %s) not ready: %w; its log %s ends:\n%s",
			temporalBin, strings.Join(args, " "), err, s.logPath, tail(s.logPath))
	}
	return s, nil
}

// findTemporal returns the temporal CLI to run: path when set, else `temporal` on PATH, else
// <gopath>/bin/temporal (where go install puts it; gopath is a GOPATH list).
func findTemporal(path, gopath string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("temporal CLI at --temporal %s: %w", path, err)
		}
		return path, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	var tried []string
	for gopath := range strings.SplitSeq(gopath, string(os.PathListSeparator)) {
		if gopath == "" {
			continue
		}
		p := filepath.Join(gopath, "bin", "temporal")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("temporal CLI not found on PATH nor at %s; install it with\n  %s\n"+
		"(or pass --temporal PATH, or measure our server alone with --only ours)",
		strings.Join(tried, ", "), temporalInstall)
}

// goPath returns `go env GOPATH` (which sees a GOPATH set with go env -w), or the default
// GOPATH when the go command is not at hand.
func goPath() string {
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		return string(bytes.TrimSpace(out))
	}
	return build.Default.GOPATH
}

// temporalVersion describes the CLI: its module version from the binary's build info (a CLI
// built by go install reports 0.0.0-DEV itself) and the server and UI versions it names.
func temporalVersion(bin string) string {
	v := "temporal CLI"
	if info, err := buildinfo.ReadFile(bin); err == nil {
		v += " " + info.Main.Version
	}
	out, err := exec.Command(bin, "--version").Output()
	if _, inner, ok := strings.Cut(string(out), "("); err == nil && ok {
		v += " (" + strings.TrimSpace(inner)
	}
	return v
}

// ourServerVersion returns the versions of the Temporal server and SDK modules in this binary.
func ourServerVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devserver"
	}
	v := map[string]string{}
	for _, m := range info.Deps {
		v[m.Path] = m.Version
	}
	return fmt.Sprintf("devserver (go.temporal.io/server %s)", v["go.temporal.io/server"])
}

// waitReady returns once the frontend at addr serves the default namespace and history
// answers (the same readiness devserver.Start waits for).
func waitReady(ctx context.Context, addr string) error {
	var c client.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var last error
	for {
		if c == nil {
			c, last = client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietSDKLogger()})
		}
		if c != nil {
			_, last = c.WorkflowService().DescribeNamespace(ctx,
				&workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			if last == nil {
				_, last = c.DescribeWorkflowExecution(ctx, "bench-readiness-probe", "")
				var notFound *serviceerror.NotFound
				if errors.As(last, &notFound) {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quietSDKLogger drops the SDK's Info and Debug lines, which would bury the progress output.
func quietSDKLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr,
		&slog.HandlerOptions{Level: slog.LevelError})))
}

// tail returns the last lines of the file at path, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// procStatus reads a kB field (VmRSS, VmHWM) from /proc/<pid>/status, in MiB.
func procStatus(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s of pid %d: %w", field, pid, err)
		}
		return kb / 1024, nil
	}
	return 0, fmt.Errorf("read status of pid %d: no %s", pid, field)
}

// procCPU returns the user+system CPU time pid has used, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("parse stat of pid %d: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse stat of pid %d: %w", pid, err)
	}
	const ticksPerSecond = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// dynamicConfig is a repeatable --dc key=value flag: dynamic config overrides for our server.
type dynamicConfig []string

func (d *dynamicConfig) String() string { return strings.Join(*d, ",") }

func (d *dynamicConfig) Set(kv string) error {
	if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", kv)
	}
	*d = append(*d, kv)
	return nil
}

// values returns the overrides with the types the server expects: bool, int, time.Duration
// (a number with a unit), float64, else string.
func (d dynamicConfig) values() map[string]any {
	if len(d) == 0 {
		return nil
	}
	m := make(map[string]any, len(d))
	for _, kv := range d {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = parseDynamicValue(v)
	}
	return m
}

func parseDynamicValue(v string) any {
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	if i, err := strconv.Atoi(v); err == nil {
		return i
	}
	if dur, err := time.ParseDuration(v); err == nil {
		return dur
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	return v
}
