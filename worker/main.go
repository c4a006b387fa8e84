// Command worker runs Nexo's workflows and activities on a Temporal task queue. With --dev
// it first starts an embedded Temporal server (SQLite file under .nexo/, plus the Web UI),
// so one command gives a complete local platform.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/gateway"
	"github.com/nexo-temporal/nexo/internal/cli"
	"github.com/nexo-temporal/nexo/internal/secrets"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/sandbox/docker"
	"github.com/nexo-temporal/nexo/skills"
	"github.com/nexo-temporal/nexo/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode reports err on stderr and returns the exit code: 0 ok (or --help), 1 failed,
// 2 usage.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "worker: %v\n%s\n", err, usageLine)
		return 2
	}
	fmt.Fprintf(stderr, "worker: %v\n", err)
	return 1
}

// usageError is a mistake in the command line: exit code 2 and the usage line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// usageLine is what a usage error prints after it: the one usage line, not the whole help.
const usageLine = "Usage: worker [--dev] [flags]   (worker --help lists the flags)"

func run(ctx context.Context, argv []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // main prints the error and the usage line, not the whole help
	dev := fs.Bool("dev", false, "start an embedded Temporal server (SQLite under .nexo/, Web UI), run the worker against it, and serve the HTTP API and web page on gateway.addr")
	showVersion := fs.Bool("version", false, "print the version and exit")
	config.BindFlags(fs)
	if err := fs.Parse(argv); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintln(stdout, "Usage: worker [--dev] [flags]\n\nRuns Nexo's workflows and activities on a Temporal task queue.\n\nFlags:")
			fmt.Fprint(stdout, fs.FlagUsages())
			return err
		}
		return &usageError{cli.FlagError(fs, err)}
	}
	if *showVersion {
		fmt.Fprintln(stdout, "worker", cli.Version())
		return nil
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("worker takes no arguments, got %q", fs.Args())}
	}
	cfg, err := config.Load(config.LoadOptions{Flags: fs})
	if err != nil {
		return err
	}
	// Before anything starts: from here on the secrets live in memory only, so a command
	// the local sandbox runs cannot read them from this process's environment (this may
	// re-execute the worker in place; see internal/secrets).
	env, err := secrets.Take(cfg.SecretEnvNames())
	if err != nil {
		return err
	}
	if err := checkSkills(cfg); err != nil {
		return err
	}
	logger := cfg.NewLogger(stderr)

	// With --dev the gateway listens first, so the embedded Web UI can be pointed at its
	// codec endpoint, which shows the payloads External Storage offloaded.
	var gwLn net.Listener
	var gwErr error
	if *dev {
		gwLn, gwErr = gateway.Listen(cfg.Gateway.Addr, len(cfg.Gateway.Tokens) == 0)
		if errors.Is(gwErr, gateway.ErrOpenNonLoopback) {
			return gwErr
		}
		defer func() {
			if gwLn != nil { // not handed to the gateway
				gwLn.Close()
			}
		}()
		codec := ""
		if gwLn != nil {
			codec = gateway.CodecEndpoint(gwLn)
		}
		srv, err := devserver.Start(ctx, devserver.Options{
			IP:            cfg.Dev.IP,
			FrontendPort:  cfg.Dev.FrontendPort,
			UIPort:        cfg.Dev.UIPort,
			DBPath:        cfg.Dev.DBPath,
			Namespace:     cfg.Temporal.Namespace,
			Logger:        logger,
			CodecEndpoint: codec,
		})
		if err != nil {
			return fmt.Errorf("start embedded Temporal server: %w", err)
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				logger.Error("stop embedded Temporal server", "error", err)
			}
		}()
		cfg.Temporal.Address = srv.FrontendAddress()
		fmt.Fprintf(stdout, "Temporal server: %s (namespace %s, database %s)\n", srv.FrontendAddress(), cfg.Temporal.Namespace, cfg.Dev.DBPath)
		if ui := srv.UIAddress(); ui != "" {
			fmt.Fprintf(stdout, "Temporal Web UI: %s/namespaces/%s/workflows\n", ui, cfg.Temporal.Namespace)
			cfg.Gateway.CodecOrigins = append(cfg.Gateway.CodecOrigins, uiOrigins(cfg.Dev.IP, cfg.Dev.UIPort)...)
			if cfg.Gateway.TemporalUI == "" { // the page links each run to it
				cfg.Gateway.TemporalUI = ui
			}
		}
	}

	// One store for artifacts and for the payloads External Storage offloads: the starter
	// and the gateway open the same artifacts.url.
	store, err := artifacts.OpenWith(ctx, cfg.Artifacts.URL, artifacts.Options{CacheBytes: cfg.Artifacts.CacheBytes})
	if err != nil {
		return err
	}
	defer func() { // after the client, which reads and writes offloaded payloads there
		if err := store.Close(); err != nil {
			logger.Error("close artifact store", "error", err)
		}
	}()
	tc, err := connect.DialWith(ctx, cfg, store, logger, env.Getenv)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := checkSearchAttribute(ctx, tc, cfg.Temporal.Namespace); err != nil {
		return err
	}

	sandboxes, err := activities.NewSandboxes(cfg.Sandbox.Root)
	if err != nil {
		return err
	}
	// The scope label ties containers to this deployment (Temporal address and namespace,
	// hashed into a short label value), so this worker's reaper never touches another's.
	scope := fmt.Sprintf("%x", sha256.Sum256([]byte(cfg.Temporal.Address+"|"+cfg.Temporal.Namespace)))[:16]
	if mgr, stopReaper := startDocker(ctx, tc, scope, logger); mgr != nil {
		sandboxes.WithDocker(mgr)
		defer stopReaper()
		if err := checkDockerAgents(ctx, mgr, cfg.Agents); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "Docker sandboxes: enabled (reaper every "+reapEvery.String()+")")
	} else {
		fmt.Fprintln(stdout, "Docker sandboxes: unavailable (no Docker engine answered); local and virtual sandboxes work")
	}
	identity := workerIdentity()
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{
		Identity: identity,
		// On Ctrl-C, running activities get this long to finish before the worker exits;
		// whatever does not finish is retried by Temporal on the next worker.
		WorkerStopTimeout: 10 * time.Second,
		// Docker sandboxes pin a run's sandbox activities to the worker that holds its
		// container through worker sessions (workflows/hostroute.go).
		EnableSessionWorker: true,
		// A streaming model call publishes its text as heartbeat details: send them within
		// a fraction of a second, not the SDK's 0.8× heartbeat timeout.
		MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
	})
	// Recorded as registered, for the announcement to the task queue's registry.
	registered := workflows.RecordTypes(w)
	workflows.RegisterAll(registered)
	deps := activities.Deps{Store: store, Sandboxes: sandboxes, InlineLimit: cfg.Artifacts.InlineLimit,
		Agents: cfg.Agents, ShellTimeout: cfg.Sandbox.ShellTimeout, SkillsPath: cfg.SkillsPath, MCPCredentialsFile: cfg.MCP.CredentialsFile,
		LookupEnv: env.LookupEnv}
	if cfg.Search.URL != "" {
		key := ""
		if cfg.Search.APIKeyEnv != "" {
			key = env.Getenv(cfg.Search.APIKeyEnv)
		}
		deps.Searcher = activities.NewSearcher(cfg.Search.URL, key)
	}
	if cfg.LLM.BaseURL != "" {
		deps.LLM = activities.NewLLM(activities.LLMConfig{BaseURL: cfg.LLM.BaseURL, Model: cfg.LLM.Model,
			APIKey: cfg.LLM.APIKey(env.Getenv), Timeout: cfg.LLM.Timeout})
	}
	acts := activities.New(deps)
	acts.Register(w)

	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.Temporal.TaskQueue, err)
	}
	agentNames := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		agentNames[i] = a.Name
	}
	if len(agentNames) > 0 {
		fmt.Fprintf(stdout, "Agents: %s (model %s at %s)\n", strings.Join(agentNames, ", "), cfg.LLM.Model, cfg.LLM.BaseURL)
	}
	// After Start, so the registry's first task finds this worker polling.
	stopAnnouncing := startAnnouncing(ctx, tc, cfg.Temporal.TaskQueue,
		api.WorkerAnnouncement{Identity: identity, Workflows: registered.Types(), Agents: agentNames}, logger)
	defer stopAnnouncing()
	if *dev {
		ln := gwLn
		gwLn = nil
		if err := serveGateway(ctx, cfg, tc, store, ln, gwErr, env.Getenv, stdout, logger); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Nexo worker ready: task queue %s at %s\n", cfg.Temporal.TaskQueue, cfg.Temporal.Address)
	logger.Info("worker ready", slog.String("task_queue", cfg.Temporal.TaskQueue), slog.String("address", cfg.Temporal.Address))
	<-ctx.Done()
	logger.Info("shutting down")
	stopAnnouncing()
	w.Stop()
	// After the worker: running MCP calls finish first, then stdio servers are stopped.
	if err := acts.Close(); err != nil {
		logger.Warn("close MCP clients", slog.String("error", err.Error()))
	}
	return nil
}

// checkSkills loads every skill an agent names, so a missing skill or a broken SKILL.md
// stops the worker at start with the file named, not a run later.
func checkSkills(cfg config.Config) error {
	var errs []error
	for _, a := range cfg.Agents {
		for i, name := range a.Skills {
			_, err := skills.Load(cfg.SkillsPath, name)
			parts := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				parts = j.Unwrap() // one line per problem of a SKILL.md, each with the agent
			}
			for _, e := range parts {
				if e != nil {
					errs = append(errs, fmt.Errorf("agents[%s].skills[%d]: %w", a.Name, i, e))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkSearchAttribute fails fast when the namespace lacks NexoStatus: without it every
// status upsert fails and `starter list --status` cannot work.
func checkSearchAttribute(ctx context.Context, tc client.Client, namespace string) error {
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	if t, ok := resp.GetCustomAttributes()[api.SearchAttributeStatus]; ok {
		if t != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			return fmt.Errorf("search attribute %s in namespace %s has type %s, want Keyword", api.SearchAttributeStatus, namespace, t)
		}
		return nil
	}
	return fmt.Errorf("search attribute %s is not registered in namespace %s; create it with: temporal operator search-attribute create --namespace %s --name %s --type Keyword",
		api.SearchAttributeStatus, namespace, namespace, api.SearchAttributeStatus)
}

// serveGateway serves the HTTP API and the web page next to the embedded server on ln,
// until ctx ends. An address already in use (listenErr) is reported, not fatal: the
// platform works without its page, and a second `worker --dev` must still start. Tokens
// whose secret is missing stop the worker.
func serveGateway(ctx context.Context, cfg config.Config, tc client.Client, store artifacts.Store, ln net.Listener, listenErr error, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	if ln == nil {
		fmt.Fprintf(stdout, "Nexo HTTP API not started: %v (set gateway.addr or NEXO_GATEWAY_ADDR)\n", listenErr)
		return nil
	}
	rc := runs.New(tc, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue)
	rc.Payloads = payloads.NewDriver(store)
	// The worker's own store: one cache, and under mem:// the same bytes the worker wrote.
	gw, err := gateway.FromConfig(cfg, rc, store, getenv, logger)
	if err != nil {
		ln.Close()
		return err
	}
	go func() {
		if err := gw.Serve(ctx, ln); err != nil {
			logger.Error("serve the HTTP API", "error", err)
		}
	}()
	fmt.Fprintf(stdout, "Nexo HTTP API and web page: http://%s/ (%s)\n", ln.Addr(), gw.AuthSummary())
	fmt.Fprintf(stdout, "Codec endpoint for the Temporal Web UI: %s\n", gateway.CodecEndpoint(ln))
	return nil
}

// uiOrigins are the browser origins of the embedded Web UI on ip:port, which may call the
// gateway's codec endpoint: the address itself and, on this machine, its localhost name.
func uiOrigins(ip string, port int) []string {
	p := strconv.Itoa(port)
	parsed := net.ParseIP(ip)
	if parsed == nil || parsed.IsUnspecified() {
		return []string{"http://127.0.0.1:" + p, "http://localhost:" + p}
	}
	out := []string{"http://" + net.JoinHostPort(ip, p)}
	if parsed.IsLoopback() {
		out = append(out, "http://localhost:"+p)
	}
	return out
}

// checkDockerAgents checks, before the worker takes any task, that every agent with a
// docker sandbox can get its container here (image present, bind sources existing), so
// a run does not find out after its first paid model call. Every bad agent is named.
func checkDockerAgents(ctx context.Context, mgr *docker.Manager, specs []agents.Spec) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var errs []error
	for _, a := range specs {
		if a.Sandbox.Type != api.SandboxDocker {
			continue
		}
		if err := mgr.Check(ctx, activities.DockerOptions(a.Sandbox)); err != nil {
			errs = append(errs, fmt.Errorf("agents[%s].sandbox: %w", a.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("check docker sandboxes: %w", err)
	}
	return nil
}

// reapEvery is how often the worker removes containers whose run is closed or unknown, so
// a worker killed mid-run leaks no container for longer than this.
const reapEvery = 5 * time.Minute

// startDocker connects to the Docker engine (DOCKER_HOST or the default socket) and
// starts the reaper; it returns nil when no engine answers.
func startDocker(ctx context.Context, tc client.Client, scope string, logger *slog.Logger) (*docker.Manager, func()) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	cli, err := docker.NewClient(dctx)
	cancel()
	if err != nil {
		logger.Info("docker sandboxes disabled", "error", err)
		return nil, nil
	}
	host, _ := os.Hostname()
	mgr := docker.NewManager(cli, fmt.Sprintf("%s-%d", host, os.Getpid()))
	mgr.SetScope(scope)
	isClosed := func(runID string) (bool, error) {
		desc, err := tc.DescribeWorkflowExecution(ctx, runID, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	}
	rctx, stop := context.WithCancel(ctx)
	reap := func() {
		removed, err := docker.ReapScope(rctx, cli, scope, isClosed)
		if err != nil && rctx.Err() == nil {
			logger.Warn("reap sandbox containers", "error", err)
		}
		if len(removed) > 0 {
			logger.Info("reaped sandbox containers of closed runs", "containers", removed)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reap()
		t := time.NewTicker(reapEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				reap()
			}
		}
	}()
	return mgr, func() {
		stop()
		<-done
		mgr.Close()
		cli.Close()
	}
}
