// Package e2e holds the end-to-end tests: the embedded Temporal server, the real worker
// binary and the real starter binary, driven as a user would. Every test binary that links
// the Temporal server costs a minute or more to link, so all of them live in this package.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/internal/mcptest"
	"github.com/nexo-temporal/nexo/payloads"
)

// bins holds the worker and starter binaries built once for the package.
var bins struct {
	dir, worker, starter string
}

// defaultParallel is how many tests of this package run at once unless -parallel (or
// NEXO_E2E_PARALLEL) says otherwise. Go's default is GOMAXPROCS, 2 on the machines this
// runs on, but an end-to-end test spends most of its time waiting (on a worker's start, a
// timer, a heartbeat timeout), not computing. Tests that use the Docker engine or a
// browser, record fixtures or measure stay serial (no t.Parallel); the cluster's faults run
// in sequence inside TestClusterFaults, which itself runs beside the others.
const defaultParallel = 4

// setParallel applies defaultParallel (or NEXO_E2E_PARALLEL) when -parallel was not given.
func setParallel() error {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	n := defaultParallel
	if v := os.Getenv("NEXO_E2E_PARALLEL"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("NEXO_E2E_PARALLEL=%q: want a whole number of tests, 1 or more", v)
		}
	}
	return flag.Set("test.parallel", strconv.Itoa(n))
}

func TestMain(m *testing.M) {
	if err := setParallel(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "nexo-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.dir = dir
	bins.worker = filepath.Join(dir, "worker")
	bins.starter = filepath.Join(dir, "starter")
	// One go build for both, so the two links run at once (the worker's links the server).
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./worker", "./starter")
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build ./worker ./starter: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	ensureSandboxImage()
	code := mcptest.Main(m) // and the MCP servers it built
	os.RemoveAll(dir)
	os.Exit(code)
}

// platform is one worker --dev process (embedded server + worker) in its own directory.
type platform struct {
	t        testing.TB
	dir      string
	frontend int
	ui       int
	gateway  int
	cmd      *exec.Cmd
	done     chan struct{}
	extraEnv []string
	mu       sync.Mutex
	out      bytes.Buffer

	// bin and args, when set, run another worker binary built on package platform (a
	// user's own) in place of bins.worker, with args after --dev.
	bin  string
	args []string
	// plain runs the worker without --dev, against a server the test started on frontend
	// (startDevServer), so the worker can stop while the server stays up.
	plain bool
	// wrap, when set, changes the worker's command before it starts (to run it in a
	// network namespace of its own, cluster.Netns.Wrap).
	wrap func(*exec.Cmd) error
	// held are the ports above, held by this process until the worker starts.
	held []*heldPort
	// portBase, when set, is the NEXO_PORT_BASE the platform's processes get in place of
	// the per-port settings (frontend, ui and gateway are then base, +1000, +1001).
	portBase int
}

// newPlatform picks free ports and a fresh directory; start() runs the worker.
func newPlatform(t testing.TB) *platform {
	t.Helper()
	held := []*heldPort{holdPort(t), holdPort(t), holdPort(t)}
	p := &platform{t: t, dir: t.TempDir(), frontend: held[0].Port, ui: held[1].Port, gateway: held[2].Port, held: held}
	t.Cleanup(p.stop)
	return p
}

// releasePorts lets the platform's ports go for the process about to bind them
// (ports_test.go). env calls it, so every process started with the platform's settings
// (the worker, starter serve, a worker a test runs itself) finds them free.
func (p *platform) releasePorts() {
	for _, h := range p.held {
		if err := h.release(); err != nil {
			p.t.Errorf("platform ports: %v", err) // env may run on a goroutine of the test
		}
	}
}

func (p *platform) env() []string {
	p.releasePorts()
	ports := []string{
		fmt.Sprintf("NEXO_TEMPORAL_ADDRESS=127.0.0.1:%d", p.frontend),
		fmt.Sprintf("NEXO_DEV_FRONTEND_PORT=%d", p.frontend),
		fmt.Sprintf("NEXO_DEV_UI_PORT=%d", p.ui),
		fmt.Sprintf("NEXO_GATEWAY_ADDR=127.0.0.1:%d", p.gateway),
	}
	if p.portBase != 0 {
		ports = []string{fmt.Sprintf("NEXO_PORT_BASE=%d", p.portBase)}
	}
	return append(append(append(os.Environ(), ports...),
		"NEXO_DEV_DB_PATH="+filepath.Join(p.dir, ".nexo", "temporal.db"),
		"NEXO_LOG_LEVEL=warn",
	), p.extraEnv...)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// start runs `worker --dev` (`worker` when plain) and returns once it says it is ready.
func (p *platform) start() {
	p.t.Helper()
	bin := bins.worker
	if p.bin != "" {
		bin = p.bin
	}
	args := append([]string{"--dev"}, p.args...)
	if p.plain {
		args = p.args
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = p.dir
	cmd.Env = p.env()
	if p.wrap != nil {
		if err := p.wrap(cmd); err != nil {
			p.t.Fatal(err)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = lockedWriter{&p.mu, &p.out}
	p.releasePorts()
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if strings.HasPrefix(line, "Nexo worker ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	select {
	case <-ready:
	case <-p.done:
		p.t.Fatalf("worker exited before it was ready:\n%s", p.output())
	case <-time.After(90 * time.Second):
		p.t.Fatalf("worker not ready after 90s:\n%s", p.output())
	}
}

func (p *platform) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// kill sends SIGKILL: no cleanup, exactly like a crashed host.
func (p *platform) kill() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// stop sends SIGINT (Ctrl-C) and waits for a clean exit.
func (p *platform) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Errorf("worker did not exit within 30s of Ctrl-C:\n%s", p.output())
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// dial connects to the platform's server as its starter does: with External Storage over
// the blob store the worker and the starter share (artifacts.url, by default .nexo/artifacts
// in the platform's directory), so a test reads and writes offloaded payloads as they do.
// The client closes when the test ends.
func (p *platform) dial() client.Client {
	p.t.Helper()
	store, err := artifacts.Open(p.artifactsDir())
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = store.Close() })
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + strconv.Itoa(p.frontend),
		ExternalStorage: payloads.ExternalStorage(store, p.offloadThreshold())})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(c.Close)
	return c
}

// memBlobs is an in-memory blob store for a test's in-process clients and workers.
func memBlobs(t testing.TB) artifacts.Store {
	t.Helper()
	st, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// setting is the value of NEXO_<key> the platform runs with, "" when unset.
func (p *platform) setting(env string) string {
	v := ""
	for _, kv := range p.env() {
		if k, val, ok := strings.Cut(kv, "="); ok && k == env {
			v = val // the last one wins, as in the process environment
		}
	}
	return v
}

// artifactsDir is the platform's artifact store directory (artifacts.url).
func (p *platform) artifactsDir() string {
	dir := strings.TrimPrefix(p.setting("NEXO_ARTIFACTS_URL"), "file://")
	if dir == "" {
		dir = filepath.Join(".nexo", "artifacts")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(p.dir, dir)
	}
	return dir
}

// offloadThreshold is the platform's payloads.offload_threshold (0: the default).
func (p *platform) offloadThreshold() int {
	n, _ := strconv.Atoi(p.setting("NEXO_PAYLOADS_OFFLOAD_THRESHOLD"))
	return n
}

// result of one starter invocation.
type result struct {
	stdout, stderr string
	code           int
}

// starter runs the starter binary in the platform's directory.
func (p *platform) starter(args ...string) result {
	p.t.Helper()
	return p.runBin(bins.starter, args...)
}

// runBin runs bin with args in the platform's directory and environment, like starter.
func (p *platform) runBin(bin string, args ...string) result {
	p.t.Helper()
	if bin != bins.starter {
		p.releasePorts() // a worker binary binds the platform's ports itself
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = p.dir
	cmd.Env = p.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("%s %v: %v", bin, args, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// bgStarter is a starter command in its own process (a prompt that waits for its turn, a
// watch), its output readable while it runs.
type bgStarter struct {
	cmd            *exec.Cmd
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
}

// startStarter starts the starter with args in the platform's directory and environment; ctx
// bounds it.
func (p *platform) startStarter(ctx context.Context, args ...string) *bgStarter {
	p.t.Helper()
	r := &bgStarter{cmd: exec.CommandContext(ctx, bins.starter, args...)}
	r.cmd.Dir, r.cmd.Env = p.dir, p.env()
	r.cmd.Stdout, r.cmd.Stderr = lockedWriter{&r.mu, &r.stdout}, lockedWriter{&r.mu, &r.stderr}
	if err := r.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	return r
}

// Stdout and Stderr are what the command printed so far.
func (r *bgStarter) Stdout() string { r.mu.Lock(); defer r.mu.Unlock(); return r.stdout.String() }
func (r *bgStarter) Stderr() string { r.mu.Lock(); defer r.mu.Unlock(); return r.stderr.String() }

// Wait waits for the command to exit.
func (r *bgStarter) Wait() error { return r.cmd.Wait() }

// ok runs the starter and fails the test on a non-zero exit.
func (p *platform) ok(args ...string) string {
	p.t.Helper()
	r := p.starter(args...)
	if r.code != 0 {
		p.t.Fatalf("starter %s: exit %d\nstdout: %s\nstderr: %s\nworker:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr, p.output())
	}
	return r.stdout
}

// record returns `starter show --json`.
func (p *platform) record(id string) api.Record {
	p.t.Helper()
	var rec api.Record
	out := p.ok("show", id, "--json")
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		p.t.Fatalf("decode show --json: %v\n%s", err, out)
	}
	return rec
}

// waitStatus polls the record until it has status want.
func (p *platform) waitStatus(id string, want api.Status) api.Record {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec := p.record(id)
		if rec.Status == want {
			return rec
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("run %s: status %s, want %s after 60s\n%+v", id, rec.Status, want, rec)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countEvents(rec api.Record, typ string) int {
	n := 0
	for _, e := range rec.Events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// ensureSandboxImage builds the default Docker sandbox image with the real starter when a
// Docker engine answers and the image is missing, so `go test ./...` runs the Docker
// tests on a fresh machine too. Without an engine (or busybox-static) those tests skip.
func ensureSandboxImage() {
	if exec.Command("docker", "info").Run() != nil {
		return
	}
	if exec.Command("docker", "image", "inspect", "nexo-sandbox:busybox").Run() == nil {
		return
	}
	cmd := exec.Command(bins.starter, "sandbox", "build-image")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: could not build the sandbox image (%v); Docker tests will skip\n", err)
	}
}
