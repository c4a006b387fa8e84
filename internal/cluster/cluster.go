// Package cluster runs a real Temporal cluster on one machine, each piece a process of its
// own: PostgreSQL (Debian's packages, initdb into a temporary directory), the official
// Temporal server built from go.temporal.io/server/cmd/server at the version go.mod requires,
// with PostgreSQL persistence and visibility (schema by temporal-sql-tool), N Nexo worker
// processes (the real worker binary, each with its own directory, sandbox root and identity,
// one shared artifact store), and the gateway (`starter serve`). The e2e fault tests and
// `go run ./bench chaos|scale` use it.
//
// Every piece can be stopped, SIGKILLed and started again; the server and PostgreSQL can be
// restarted with their data kept. With Options.TLS the frontend requires client certificates
// from a locally generated CA, and the workers and the starter connect with the
// temporal.tls.* keys.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
)

// Options configure Start.
type Options struct {
	// Dir holds everything but PostgreSQL's data (which needs a directory the postgres user
	// can reach): config, logs, the workers' directories, the artifact store. Required.
	Dir string
	// RepoDir is a directory inside the Nexo module (the server version comes from its
	// go.mod). Default ".".
	RepoDir string
	// WorkerBin and StarterBin are the Nexo worker and starter binaries. Required.
	WorkerBin, StarterBin string
	// Workers is how many worker processes start (0: none; AddWorker adds more later).
	Workers int
	// WorkerConfig is the nexo.yaml every worker and the starter read ("" writes none).
	WorkerConfig string
	// Env is added to every worker's and the gateway's environment.
	Env []string
	// Gateway starts `starter serve` on a free port.
	Gateway bool
	// TLS makes the frontend require mutual TLS with certificates from a fresh local CA.
	TLS bool
	// Namespace is registered with Nexo's search attributes. Default "default".
	Namespace string
	// ExternalFrontend, when set, is the address of a Temporal server someone else runs
	// (the embedded dev server of a bench, say): no PostgreSQL and no server start, the
	// workers and the gateway connect there. The namespace and search attributes must exist.
	ExternalFrontend string
	// UI starts the Temporal Web UI as a process of its own (internal/cluster/cmd/ui, built
	// from this module) against the frontend, TLS included; Cluster.UIURL is its address.
	UI bool
	// Isolatable binds the frontend on every address (not only 127.0.0.1), so workers in
	// network namespaces of their own (AddIsolatedWorker) reach it through their veth.
	Isolatable bool
}

// errExternal: the server is not the cluster's to restart.
var errExternal = errors.New("cluster: the Temporal server is external (Options.ExternalFrontend); it cannot be restarted here")

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts    Options
	bins    Binaries
	logs    string
	pg      *postgres
	ports   serverPorts
	cfgPath string
	tls     *TLSFiles

	mu          sync.Mutex
	server      *process
	workers     []*Worker
	gateway     *process
	gatewayPort int
	ui          *process // the Web UI (Options.UI), see ui.go
	uiPort      int
}

// Worker is one worker process of the cluster, by name (w1, w2, …).
type Worker struct {
	c    *Cluster
	Name string
	// Dir is the worker's working directory; its sandbox root is Dir/workspaces.
	Dir string
	// Env is added to this worker's environment after Options.Env, at its next Start (set
	// it while the worker is stopped): a bench runs the same worker with and without a
	// setting.
	Env []string

	mu   sync.Mutex
	proc *process
	pids []int  // every pid it has run as, oldest first
	net  *netns // its network namespace (AddIsolatedWorker), nil on the host's network
}

// Start builds what is missing and starts PostgreSQL, the schema, the server, the namespace,
// the workers and (optionally) the gateway. On error it stops what it started.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Dir == "" || opts.WorkerBin == "" || opts.StarterBin == "" {
		return nil, errors.New("cluster: Options.Dir, WorkerBin and StarterBin are required")
	}
	if opts.RepoDir == "" {
		opts.RepoDir = "."
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	c := &Cluster{opts: opts, logs: filepath.Join(opts.Dir, "logs")}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, d := range []string{c.logs, c.ArtifactsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if opts.WorkerConfig != "" {
		if err := os.WriteFile(c.ConfigPath(), []byte(opts.WorkerConfig), 0o644); err != nil {
			return nil, err
		}
	}
	if opts.ExternalFrontend == "" {
		if err := c.startServerSide(ctx); err != nil {
			return nil, err
		}
	}
	for i := 0; i < opts.Workers; i++ {
		if _, err := c.AddWorker(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Gateway {
		if err := c.startGateway(ctx); err != nil {
			return nil, err
		}
	}
	if opts.UI {
		if err := c.startUI(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startServerSide builds the server, starts PostgreSQL, sets up the schema and starts the
// server.
func (c *Cluster) startServerSide(ctx context.Context) (err error) {
	opts := c.opts
	if !HavePostgres() {
		return ErrNoPostgres
	}
	if c.bins, err = BuildServer(ctx, opts.RepoDir); err != nil {
		return err
	}
	if opts.TLS {
		tdir := filepath.Join(opts.Dir, "tls")
		if err := os.MkdirAll(tdir, 0o700); err != nil {
			return err
		}
		if c.tls, err = generateTLS(tdir); err != nil {
			return fmt.Errorf("generate TLS certificates: %w", err)
		}
	}
	if c.pg, err = newPostgres(ctx, c.logs); err != nil {
		return err
	}
	if err := c.pg.start(ctx); err != nil {
		return err
	}
	if err := setupSchema(ctx, c.bins, c.pg, c.logs); err != nil {
		return err
	}
	if c.ports, err = pickServerPorts(); err != nil {
		return err
	}
	if c.cfgPath, err = writeServerConfig(opts.Dir, serverConfig{serverPorts: c.ports, PGPort: c.pg.port, Dir: opts.Dir, TLS: c.tls, AllInterfaces: opts.Isolatable}); err != nil {
		return err
	}
	return c.StartServer(ctx)
}

// FrontendAddress is the server's gRPC address (host:port).
func (c *Cluster) FrontendAddress() string {
	if c.opts.ExternalFrontend != "" {
		return c.opts.ExternalFrontend
	}
	return "127.0.0.1:" + strconv.Itoa(c.ports.Frontend)
}

// Namespace is the namespace the workers run in.
func (c *Cluster) Namespace() string { return c.opts.Namespace }

// ArtifactsDir is the artifact store every worker and the starter share.
func (c *Cluster) ArtifactsDir() string { return filepath.Join(c.opts.Dir, "artifacts") }

// ConfigPath is the nexo.yaml of the workers and the starter.
func (c *Cluster) ConfigPath() string { return filepath.Join(c.opts.Dir, "nexo.yaml") }

// LogDir holds one log file per process.
func (c *Cluster) LogDir() string { return c.logs }

// TLS is the certificates of a TLS cluster (nil without TLS).
func (c *Cluster) TLS() *TLSFiles { return c.tls }

// GatewayURL is the gateway's base URL ("" without a gateway).
func (c *Cluster) GatewayURL() string {
	if c.gatewayPort == 0 {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(c.gatewayPort)
}

// Env is the environment a Nexo binary (worker, starter) needs to use the cluster: address,
// namespace, TLS files, the shared artifact store and the config file.
func (c *Cluster) Env() []string {
	env := []string{
		"NEXO_TEMPORAL_ADDRESS=" + c.FrontendAddress(),
		"NEXO_TEMPORAL_NAMESPACE=" + c.opts.Namespace,
		"NEXO_ARTIFACTS_URL=file://" + c.ArtifactsDir(),
	}
	if c.opts.WorkerConfig != "" {
		env = append(env, "NEXO_CONFIG="+c.ConfigPath())
	}
	if c.tls != nil {
		env = append(env, "NEXO_TEMPORAL_TLS_ENABLED=true",
			"NEXO_TEMPORAL_TLS_CERT_FILE="+c.tls.ClientCert, "NEXO_TEMPORAL_TLS_KEY_FILE="+c.tls.ClientKey,
			"NEXO_TEMPORAL_TLS_CA_FILE="+c.tls.CA, "NEXO_TEMPORAL_TLS_SERVER_NAME="+c.tls.ServerName)
	}
	return env
}

// ClientOptions are SDK client options for the cluster (TLS included), without the data
// converter or External Storage a run's payloads may need.
func (c *Cluster) ClientOptions() (client.Options, error) {
	o := client.Options{HostPort: c.FrontendAddress(), Namespace: c.opts.Namespace}
	if c.tls != nil {
		cert, err := tls.LoadX509KeyPair(c.tls.ClientCert, c.tls.ClientKey)
		if err != nil {
			return o, err
		}
		pem, err := os.ReadFile(c.tls.CA)
		if err != nil {
			return o, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		o.ConnectionOptions.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: c.tls.ServerName}
	}
	return o, nil
}

// StartServer starts the Temporal server (all four services in one process) and returns once
// the namespace and the search attributes are served.
func (c *Cluster) StartServer(ctx context.Context) error {
	if c.opts.ExternalFrontend != "" {
		return errExternal
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server != nil && !c.server.exited() {
		return nil
	}
	cmd := exec.Command(c.bins.Server, "--config-file", c.cfgPath, "--allow-no-auth", "start")
	cmd.Dir = c.opts.Dir
	p, err := startProcess("temporal-server", cmd, filepath.Join(c.logs, "temporal-server.log"), "")
	if err != nil {
		return err
	}
	c.server = p
	if err := waitTCP(ctx, c.FrontendAddress(), p); err != nil {
		return err
	}
	o, err := c.ClientOptions()
	if err != nil {
		return err
	}
	nctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ensureNamespace(nctx, o); err != nil {
		return fmt.Errorf("%w\nserver log:\n%s", err, p.tail())
	}
	return nil
}

// KillServer SIGKILLs the server.
func (c *Cluster) KillServer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server != nil {
		c.server.signal(syscall.SIGKILL)
		<-c.server.done
	}
}

// RestartServer SIGKILLs the server and starts it again on the same database.
func (c *Cluster) RestartServer(ctx context.Context) error {
	c.KillServer()
	return c.StartServer(ctx)
}

// RestartPostgres crashes PostgreSQL (immediate shutdown) and starts it again on the same
// data and port; down, if > 0, is how long it stays down.
func (c *Cluster) RestartPostgres(ctx context.Context, down time.Duration) error {
	if c.pg == nil {
		return errExternal
	}
	c.pg.kill()
	if down > 0 {
		select {
		case <-time.After(down):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.pg.start(ctx)
}

// Workers returns the cluster's workers, in the order they were added.
func (c *Cluster) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Worker(nil), c.workers...)
}

// AddWorker creates and starts one more worker process.
func (c *Cluster) AddWorker(ctx context.Context) (*Worker, error) {
	c.mu.Lock()
	name := "w" + strconv.Itoa(len(c.workers)+1)
	w := &Worker{c: c, Name: name, Dir: filepath.Join(c.opts.Dir, name)}
	c.workers = append(c.workers, w)
	c.mu.Unlock()
	if err := os.MkdirAll(w.Dir, 0o755); err != nil {
		return nil, err
	}
	return w, w.Start(ctx)
}

// WorkerOf names the worker an SDK identity (pid@host@, what history records as the identity
// of an activity's or workflow task's worker) belongs to; "" when none.
func (c *Cluster) WorkerOf(identity string) string {
	pid, err := strconv.Atoi(strings.SplitN(identity, "@", 2)[0])
	if err != nil {
		return ""
	}
	for _, w := range c.Workers() {
		w.mu.Lock()
		for _, p := range w.pids {
			if p == pid {
				w.mu.Unlock()
				return w.Name
			}
		}
		w.mu.Unlock()
	}
	return ""
}

// Start starts the worker process (if not running) and waits until it says it is ready.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil && !w.proc.exited() {
		return nil
	}
	cmd := exec.Command(w.c.opts.WorkerBin)
	cmd.Dir = w.Dir
	cmd.Env = append(append(append(os.Environ(), w.c.Env()...),
		"NEXO_SANDBOX_ROOT="+filepath.Join(w.Dir, "workspaces"),
		"NEXO_LOG_LEVEL=warn"), w.c.opts.Env...)
	cmd.Env = append(cmd.Env, w.Env...)
	if err := w.isolate(cmd); err != nil {
		return err
	}
	p, err := startProcess(w.Name, cmd, filepath.Join(w.c.logs, w.Name+".log"), "Nexo worker ready")
	if err != nil {
		return err
	}
	w.proc = p
	w.pids = append(w.pids, p.pid())
	t := time.NewTimer(2 * time.Minute)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("worker %s exited before it was ready:\n%s", w.Name, p.tail())
	case <-ctx.Done():
		return fmt.Errorf("worker %s not ready: %w\n%s", w.Name, ctx.Err(), p.tail())
	case <-t.C:
		return fmt.Errorf("worker %s not ready after 2m:\n%s", w.Name, p.tail())
	}
}

// Kill SIGKILLs the worker and every process it started, like a host that dies.
func (w *Worker) Kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		w.proc.signal(syscall.SIGKILL)
		<-w.proc.done
		w.proc = nil
	}
}

// Stop interrupts the worker (Ctrl-C) and waits for it to exit.
func (w *Worker) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		_ = w.proc.cmd.Process.Signal(os.Interrupt)
		w.proc.wait(30 * time.Second)
		w.proc = nil
	}
}

// Pause freezes the worker (SIGSTOP) and Resume thaws it: the server hears nothing from a
// frozen worker, as from one cut off the network, and it comes back with its state intact.
func (w *Worker) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		w.proc.signal(syscall.SIGSTOP)
	}
}

// Resume thaws a paused worker.
func (w *Worker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		w.proc.signal(syscall.SIGCONT)
	}
}

// Running reports whether the worker process is up.
func (w *Worker) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.proc != nil && !w.proc.exited()
}

// PID is the current process id (0 when not running).
func (w *Worker) PID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc == nil {
		return 0
	}
	return w.proc.pid()
}

// Output is the last lines the worker printed.
func (w *Worker) Output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc == nil {
		b, _ := os.ReadFile(filepath.Join(w.c.logs, w.Name+".log"))
		return string(b)
	}
	return w.proc.tail()
}

func (c *Cluster) startGateway(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.gatewayPort = port
	cmd := exec.Command(c.opts.StarterBin, "serve")
	cmd.Dir = c.opts.Dir
	cmd.Env = append(append(append(os.Environ(), c.Env()...), "NEXO_GATEWAY_ADDR=127.0.0.1:"+strconv.Itoa(port)), c.opts.Env...)
	p, err := startProcess("gateway", cmd, filepath.Join(c.logs, "gateway.log"), "")
	if err != nil {
		return err
	}
	c.gateway = p
	for {
		resp, err := http.Get(c.GatewayURL() + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway not answering: %w\n%s", ctx.Err(), p.tail())
		case <-p.done:
			return fmt.Errorf("gateway exited:\n%s", p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops every process (workers first, PostgreSQL last) and removes PostgreSQL's data.
// The rest of Options.Dir (logs) stays for the caller to remove.
func (c *Cluster) Stop() {
	for _, w := range c.Workers() {
		w.Stop()
	}
	c.mu.Lock()
	c.stopUI()
	if c.gateway != nil {
		_ = c.gateway.cmd.Process.Signal(os.Interrupt)
		c.gateway.wait(15 * time.Second)
		c.gateway = nil
	}
	if c.server != nil {
		c.server.signal(syscall.SIGTERM)
		c.server.wait(20 * time.Second)
		c.server = nil
	}
	c.mu.Unlock()
	if c.pg != nil {
		c.pg.stop()
	}
	c.removeNetns()
}
