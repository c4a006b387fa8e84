package platform

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/gateway"
	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/workflows"
)

// DevServerOptions are what the embedded Temporal server is started with: config's dev.*
// keys, the namespace, and the gateway's codec endpoint for the Web UI.
type DevServerOptions struct {
	IP            string
	FrontendPort  int
	UIPort        int
	DBPath        string
	Namespace     string
	Logger        *slog.Logger
	CodecEndpoint string
}

// DevServer is a running embedded Temporal server.
type DevServer interface {
	// FrontendAddress is the host:port clients dial.
	FrontendAddress() string
	// UIAddress is the Web UI's URL, "" when it runs none.
	UIAddress() string
	// Stop shuts the server down and waits for it.
	Stop() error
}

// StartDevServer starts an embedded Temporal server and returns once it takes calls.
// platform/dev provides one; it lives there so that only binaries that use it link the
// Temporal server.
type StartDevServer func(ctx context.Context, o DevServerOptions) (DevServer, error)

// WithDevServer runs the platform against an embedded Temporal server started with start
// (temporal.address is then the embedded server's), and serves the gateway beside it, as
// `worker --dev` does. Main starts it only when --dev is given. Use dev.Server().
func WithDevServer(start StartDevServer) Option {
	return func(o *options) { o.startDev = start }
}

// Run starts the platform and blocks until ctx ends, then stops it: the worker first
// (running activities get 10 s), then MCP clients, the gateway, the store and the dev
// server. It prints what it started on stdout, ending with "Nexo worker ready: ...".
func (p *Platform) Run(ctx context.Context) error {
	if p.opts.sandboxHost {
		return p.runSandboxHost(ctx)
	}
	cfg := p.cfg
	stdout := p.opts.stdout
	logger := p.logger()
	dev := p.opts.startDev != nil
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(p.opts.stderr, "warning: %s\n", w)
	}
	// A remote A2A agent's token must be here before any run calls it (the A2A activities
	// run on this worker, never on a sandbox host).
	var a2aErrs []error
	for _, a := range cfg.Agents {
		a2aErrs = append(a2aErrs, activities.CheckA2ATokens(a.Name, a.A2A, p.opts.lookupEnv))
	}
	if err := errors.Join(a2aErrs...); err != nil {
		return fmt.Errorf("check A2A remotes: %w", err)
	}

	// With --dev the gateway listens first, so the embedded Web UI can be pointed at its
	// codec endpoint, which shows the payloads External Storage offloaded.
	var gwLn net.Listener
	var gwErr error
	if dev {
		gwLn, gwErr = gateway.Listen(cfg.Gateway.Addr, len(cfg.Gateway.Tokens) == 0)
		if errors.Is(gwErr, gateway.ErrOpenNonLoopback) {
			return gwErr
		}
		if gwErr != nil {
			gwErr = &PortError{Key: "gateway.addr", Value: cfg.Gateway.Addr, FromBase: cfg.FromPortBase("gateway.addr"), Err: gwErr}
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
		srv, err := p.opts.startDev(ctx, DevServerOptions{
			IP:            cfg.Dev.IP,
			FrontendPort:  cfg.Dev.FrontendPort,
			UIPort:        cfg.Dev.UIPort,
			DBPath:        cfg.Dev.DBPath,
			Namespace:     cfg.Temporal.Namespace,
			Logger:        logger,
			CodecEndpoint: codec,
		})
		if err != nil {
			return fmt.Errorf("start embedded Temporal server: %w", portError(cfg, err))
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				logger.Error("stop embedded Temporal server", "error", err)
			}
		}()
		cfg.Temporal.Address = srv.FrontendAddress()
		cfg.Temporal.Pin() // the embedded server, whatever a Temporal client profile says
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
	tel, stopTelemetry, err := startTelemetry(ctx, cfg, p.getenv, stdout, logger)
	if err != nil {
		return err
	}
	defer stopTelemetry() // after the worker and the client: flushes the last spans
	tc, conn, err := connect.DialSettings(ctx, cfg, store, logger, p.opts.lookupEnv, telemetryOption(tel))
	if err != nil {
		return err
	}
	defer tc.Close()
	cfg.Temporal.Address, cfg.Temporal.Namespace = conn.Address, conn.Namespace // the profile may supply them
	if err := checkSearchAttribute(ctx, tc, cfg.Temporal.Namespace); err != nil {
		return err
	}

	sandboxes, err := activities.NewSandboxes(cfg.Sandbox.Root)
	if err != nil {
		return err
	}
	if err := observeWorker(tel, tc, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue, sandboxes); err != nil {
		return err
	}
	scope := deploymentScope(cfg)
	// This worker's host id (kept under sandbox.root): its host queue's name and the label
	// of the containers it creates.
	hostID, releaseHost, err := activities.HostID(cfg.Sandbox.Root)
	if err != nil {
		return err
	}
	defer releaseHost()
	if mgr, stopReaper := startDocker(ctx, tc, scope, cfg.Temporal.TaskQueue, hostID, logger); mgr != nil {
		sandboxes.WithDocker(mgr)
		defer stopReaper()
		if err := checkDockerAgents(ctx, mgr, cfg.Agents); err != nil {
			return err
		}
		if err := warmDockerAgents(ctx, mgr, cfg.Agents); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "Docker sandboxes: enabled (reaper every "+reapEvery.String()+")")
	} else {
		fmt.Fprintln(stdout, "Docker sandboxes: unavailable (no Docker engine answered); local and virtual sandboxes work")
	}
	stopEgress, err := startBubblewrap(ctx, sandboxes, cfg.Agents, stdout, p.opts.lookupEnv)
	defer stopEgress() // after the worker: its tool calls end first
	if err != nil {
		return err
	}
	identity := workerIdentity()
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{
		Identity: identity,
		// On Ctrl-C, running activities get this long to finish before the worker exits;
		// whatever does not finish is retried by Temporal on the next worker.
		WorkerStopTimeout: 10 * time.Second,
		// Runs recorded before host queues pin a docker sandbox's activities to the worker
		// that holds its container through worker sessions (workflows/hostroute.go); kept
		// while any such run may still be open. New runs use host queues (hostq.go).
		EnableSessionWorker: true,
		// A streaming model call publishes its text as heartbeat details: send them within
		// a fraction of a second, not the SDK's 0.8× heartbeat timeout.
		MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
		// Every attempt heartbeats while it runs (keepAlive), and the runs' activities are
		// retried elsewhere this long after a worker went silent (the heartbeat cap).
		Interceptors: append(keepAlive(),
			workflows.Interceptor(workflows.WorkerDefaults{ActivityHeartbeatTimeout: cfg.Worker.ActivityHeartbeatTimeout})),
	})
	// Recorded as registered, for the announcement to the task queue's registry.
	registered := workflows.RecordTypes(w)
	p.RegisterWorkflows(registered)
	deps := activities.Deps{Store: store, Sandboxes: sandboxes, InlineLimit: cfg.Artifacts.InlineLimit,
		Agents: cfg.Agents, ShellTimeout: cfg.Sandbox.ShellTimeout, SkillsPath: cfg.SkillsPath, MCPCredentialsFile: cfg.MCP.CredentialsFile,
		LookupEnv: p.opts.lookupEnv, ToolHooks: p.opts.toolHooks, Loops: p.opts.loops, Notify: cfg.Approvals.Notify, PageURL: cfg.Gateway.PageURL(),
		MaxDepth: cfg.Worker.MaxDepth}
	if cfg.Search.URL != "" {
		key := ""
		if cfg.Search.APIKeyEnv != "" {
			key = p.getenv(cfg.Search.APIKeyEnv)
		}
		deps.Searcher = activities.NewSearcher(cfg.Search.URL, key)
	}
	if cfg.LLM.BaseURL != "" {
		deps.LLM = activities.NewLLM(activities.LLMConfig{BaseURL: cfg.LLM.BaseURL, Model: cfg.LLM.Model,
			APIKey: cfg.LLM.APIKey(p.getenv), Timeout: cfg.LLM.Timeout, RetryFor: cfg.LLM.RetryFor,
			Prices: cfg.LLM.Prices, TokensPerMinute: cfg.LLM.Limits.TokensPerMinute})
	}
	deps.Endpoints, deps.ModelQueues = modelEndpoints(cfg, p.getenv)
	deps.Tokens, deps.TokenWait = tokenLimiter{tc: tc, taskQueue: cfg.Temporal.TaskQueue}, tel.TokenWait
	deps.Outbox = notifyOutbox{tc: tc}
	acts := activities.New(deps)
	acts.Register(w)
	// The run's sandbox activities go to the host queue of the worker that holds its
	// sandbox (workflows/hostq.go); the shared queue keeps them for runs recorded before.
	hq := newHostQueue(tc, cfg, identity, hostID, acts, acts.Register)
	defer func() {
		// After the worker: running MCP calls finish first, then stdio servers are stopped.
		if err := acts.Close(); err != nil {
			logger.Warn("close MCP clients", slog.String("error", err.Error()))
		}
	}()
	if err := p.registerActivities(w); err != nil {
		return err
	}

	if err := hq.start(ctx, tc, sandboxes, logger); err != nil {
		return err
	}
	defer hq.stop()
	if pool := p.opts.pool; pool != "" {
		// --pool: this worker's host also serves the runs whose agents name the pool
		// (after its host queue polls, so a claim it answers finds the queue served).
		pw := newPoolWorker(tc, cfg, identity, pool, acts)
		if err := pw.Start(); err != nil {
			return fmt.Errorf("start worker on the claim queue of pool %s: %w", pool, err)
		}
		defer pw.Stop()
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.Temporal.TaskQueue, err)
	}
	defer w.Stop()
	stopModelWorkers, err := startModelWorkers(tc, cfg, acts, identity, stdout)
	if err != nil {
		return err
	}
	defer stopModelWorkers()
	agentNames := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		agentNames[i] = a.Name
	}
	if len(agentNames) > 0 {
		fmt.Fprintf(stdout, "Agents: %s (model %s at %s)\n", strings.Join(agentNames, ", "), cfg.LLM.Model, cfg.LLM.BaseURL)
	}
	// After Start, so the registry's first task finds this worker polling.
	ann := announcement(identity, registered, cfg.Agents)
	ann.TTLSeconds = int(cfg.Worker.RegistryTTL / time.Second)
	st, err := runs.DescribeStore(cfg.Artifacts.URL, identity)
	if err != nil {
		return err
	}
	ann.Store = &st
	if dev && gwLn != nil {
		// The page this worker serves, so a starter not told where it is (gateway.url)
		// links its runs there (runs.Client.PageURLFromWorkers).
		ann.PageURL = cfg.Gateway.PageURL()
	}
	stopAnnouncing := startAnnouncing(ctx, tc, cfg.Temporal.TaskQueue, ann, logger)
	defer stopAnnouncing()
	if err := reportPeers(ctx, tc, cfg.Temporal.TaskQueue, ann, stdout); err != nil {
		logger.Warn("compare with the other workers", "error", err)
	}
	if dev {
		ln := gwLn
		gwLn = nil
		if err := serveGateway(ctx, cfg, tc, store, ln, gwErr, p.getenv, stdout, logger); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Sandbox host: %s (host queue %s)%s\n", hq.id, hq.queue, poolNote(cfg, p.opts.pool))
	// Said once, on stdout: a log line saying it again is the same banner twice on a
	// terminal (the SDK's "Started Worker" lines already mark it in the log).
	fmt.Fprintf(stdout, "Nexo worker ready: task queue %s at %s\n", cfg.Temporal.TaskQueue, cfg.Temporal.Address)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// announcement is what this worker tells its task queue's registry it offers: the
// workflow types registered on it (shipped and the user's), the agents of its config and
// the sandbox pool of each agent that names one.
func announcement(identity string, registered *workflows.TypeRecorder, defs []agents.Spec) api.WorkerAnnouncement {
	a := api.WorkerAnnouncement{Identity: identity, Workflows: registered.Types(), Inputs: registered.Inputs(), Agents: make([]string, len(defs))}
	for i, d := range defs {
		a.Agents[i] = d.Name
		if d.Sandbox.Pool != "" {
			if a.Pools == nil {
				a.Pools = map[string]string{}
			}
			a.Pools[d.Name] = d.Sandbox.Pool
		}
	}
	return a
}

// poolNote is what the ready lines say of the pool this worker's host serves ("" for none).
func poolNote(cfg config.Config, pool string) string {
	if pool == "" {
		return ""
	}
	return fmt.Sprintf(", pool %s (claim queue %s)", pool, api.PoolQueueName(cfg.Temporal.TaskQueue, pool))
}

// checkSearchAttribute fails fast when the namespace lacks a search attribute Nexo
// upserts (api.SearchAttributes): without NexoStatus every status upsert fails and
// `starter list --status` cannot work; without NexoApprovalAgent `starter approvals`
// finds nothing; without NexoAgent no AgentRun or session can start (it is set at start).
func checkSearchAttribute(ctx context.Context, tc client.Client, namespace string) error {
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	for _, name := range api.SearchAttributes {
		t, ok := resp.GetCustomAttributes()[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		if t != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			return fmt.Errorf("search attribute %s in namespace %s has type %s, want Keyword", name, namespace, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	create := make([]string, len(missing))
	for i, name := range missing {
		create[i] = fmt.Sprintf("--name %s --type Keyword", name)
	}
	return fmt.Errorf("search attribute %s is not registered in namespace %s; create it with: temporal operator search-attribute create --namespace %s %s",
		strings.Join(missing, ", "), namespace, namespace, strings.Join(create, " "))
}

// deploymentScope is the label that ties containers to this deployment (Temporal address
// and namespace, hashed into a short label value): every worker and sandbox host of one
// deployment computes the same, so their reapers recognise its containers and never
// touch another's.
func deploymentScope(cfg config.Config) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(cfg.Temporal.Address+"|"+cfg.Temporal.Namespace)))[:16]
}
