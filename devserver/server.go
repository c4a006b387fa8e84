// Package devserver runs an embedded Temporal server in-process, for `worker --dev` and the
// end-to-end tests: frontend, history, matching and worker services on loopback ports, SQLite
// persistence (a file, or memory), the Temporal Web UI, and dynamic config tuned for latency
// rather than throughput. Nothing needs installing; the UI's assets ship inside the ui-server
// Go module.
//
// A Server owns everything it starts; Stop releases it. Start returns only once a worker can
// connect and the namespace is usable.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// Errors returned by Start, and the package's internal sentinels.
var (
	// ErrSearchAttributeType means a search attribute exists (or was requested) with a type
	// other than the one required.
	ErrSearchAttributeType = errors.New("search attribute has the wrong type")
	// ErrNotTemporalDB means Options.DBPath names a SQLite file that holds other tables.
	ErrNotTemporalDB = errors.New("database file holds tables but no Temporal schema; choose another path or delete it")
	// ErrPortTaken is matched (errors.Is) by the PortError of a port something else
	// already listens on.
	ErrPortTaken = errors.New("port is taken")

	// errUnsupported is what schemaTx answers for everything but Exec.
	errUnsupported = errors.New("not supported while setting up the schema")
)

// startTimeout bounds how long Start waits for the frontend when ctx has no deadline.
const startTimeout = time.Minute

// Options configure Start. The zero value is usable: an in-memory server on free loopback
// ports, without the UI.
type Options struct {
	// IP is the address every service and the UI bind to. Default 127.0.0.1.
	IP string
	// FrontendPort is the gRPC port clients connect to; 0 picks a free port (see
	// FrontendAddress).
	FrontendPort int
	// UIPort is the Web UI's HTTP port; 0 runs no UI.
	UIPort int
	// CodecEndpoint is the codec server the Web UI's pages call from the browser to show
	// payloads, such as the gateway's http://127.0.0.1:8234/codec: a payload External
	// Storage offloaded is only a reference in history, which the codec reads back. The
	// UI sends credentials (cookies) with its calls. "" configures none.
	CodecEndpoint string
	// DBPath is the SQLite database file; "" keeps everything in memory, gone after Stop. The
	// parent directory is created if missing. A new file gets the schema; an existing one is
	// reused, so runs survive a restart (and the process being killed). The database is the
	// file together with its "-wal" companion: recent commits live in the write-ahead log.
	// The server holds an exclusive lock on it (DBPath+".lock") until Stop; Start on a
	// database another server holds fails at once with ErrDBInUse.
	DBPath string
	// Namespace is created if absent, also in an existing database. Default "default".
	Namespace string
	// SearchAttributes are registered on Namespace (also in an existing database) before the
	// server starts. The keyword attributes of api.SearchAttributes (NexoStatus,
	// NexoApprovalAgent, NexoAgent) are always registered; it is an error to ask for one with another
	// type.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// LogLevel filters the server's logs before they reach Logger. Default slog.LevelWarn:
	// the server logs a great deal at Info.
	LogLevel slog.Leveler
	// DynamicConfig overrides the dev server's defaults, key by key (for example
	// "history.transferProcessorMaxPollRPS": 20). Values have the types the server expects:
	// int (not int64 or float64), bool, string, float64, time.Duration.
	DynamicConfig map[string]any
	// Stock runs the server as Temporal ships it, for comparison: Temporal's own dynamic config
	// defaults instead of latencyDefaults (DynamicConfig still applies on top), and the
	// visibility indexes are left as they are: every index of the schema in a new database,
	// the trimmed set in one an earlier tuned Start has trimmed (see trimVisibilityIndexes).
	// The SQLite settings stay. Setting the environment variable NEXO_DEVSERVER_STOCK=1 turns
	// it on for every Start in the process (a whole test run, `worker --dev`).
	Stock bool
}

// stockEnv is the environment variable that sets Options.Stock.
const stockEnv = "NEXO_DEVSERVER_STOCK"

// Server is a running embedded Temporal server. Its methods are safe for concurrent use.
type Server struct {
	temporal     temporal.Server
	ui           *uiserver.Server
	frontendAddr string
	uiAddr       string
	logGate      *logGate
	lock         *dbLock // held until Stop; nil for an in-memory database

	stopOnce sync.Once
	stopErr  error
}

// Start starts the server and returns once the frontend answers gRPC calls, the history shard
// is loaded and the namespace is usable, so a worker can connect at once. ctx bounds the wait
// (startTimeout when it has no deadline); canceling it after Start returns has no effect.
// On error, Start has stopped whatever it started.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	display := opts.DBPath // as the user spelled it, for messages
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	gate := &logGate{base: opts.LogLevel}
	logger := slog.New(levelHandler{min: gate, h: opts.Logger.Handler()})

	ports, err := pickPorts(opts.IP, opts.FrontendPort)
	if err != nil {
		return nil, err
	}
	if opts.UIPort != 0 {
		if err := checkPortFree(opts.IP, opts.UIPort); err != nil {
			return nil, &PortError{Service: ServiceUI, Port: opts.UIPort, Err: err}
		}
	}

	var lock *dbLock
	if opts.DBPath != "" {
		// Before anything reads or writes the database: a second server must not touch it.
		if lock, err = lockDB(opts.DBPath, display); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				lock.release()
			}
		}()
		if err := prepareDBFile(ctx, opts.DBPath); err != nil {
			return nil, err
		}
	}
	sqlCfg := sqlConfig(opts.DBPath)
	columnsInUse, err := ensureNamespace(ctx, sqlCfg, clusterName, opts.Namespace, opts.SearchAttributes)
	if err != nil {
		return nil, err
	}
	if !opts.Stock {
		if err := trimVisibilityIndexes(ctx, sqlCfg, columnsInUse); err != nil {
			return nil, err
		}
	}

	conf := serverConfig(opts.IP, ports, sqlCfg, primitives.NewUUID().String())
	ts, err := newTemporalServer(conf, ports, serverLogger{log: logger, gate: gate}, opts.Stock, opts.DynamicConfig)
	if err != nil {
		return nil, err
	}
	// Start blocks until every service has started; it takes no context.
	if err := ts.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	s := &Server{temporal: ts, frontendAddr: conf.PublicClient.HostPort, logGate: gate, lock: lock}

	if opts.UIPort != 0 {
		if err := s.startUI(ctx, opts.IP, opts.UIPort, opts.Namespace, opts.CodecEndpoint); err != nil {
			return nil, errors.Join(err, s.Stop())
		}
	}
	if err := waitReady(ctx, s.frontendAddr, opts.Namespace, logger); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// FrontendAddress returns the host:port clients and workers dial.
func (s *Server) FrontendAddress() string { return s.frontendAddr }

// UIAddress returns the Web UI's URL (http://host:port), or "" when the server runs no UI.
func (s *Server) UIAddress() string { return s.uiAddr }

// Stop shuts the UI and the server down and waits for them. It is idempotent: later calls
// return the first call's result. While stopping, only errors are logged; after, nothing (see
// logGate).
//
// The SQLite connection outlives Stop: server v1.32's sqlite plugin keeps one connection per
// database for the life of the process (its pool never closes). A later Start on the same file
// in the same process reuses it, and every commit is already in the file or its WAL, so
// nothing is lost if the process then dies; an in-memory database keeps its memory until the
// process exits.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.logGate.state.Store(gateStopping)
		defer s.logGate.state.Store(gateStopped)
		if s.ui != nil {
			s.ui.Stop()
		}
		if err := s.temporal.Stop(); err != nil {
			s.stopErr = fmt.Errorf("stop temporal server: %w", err)
		}
		s.lock.release()
	})
	return s.stopErr
}

func (o Options) withDefaults() (Options, error) {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if net.ParseIP(o.IP) == nil {
		// The server binds on, and advertises, this exact address.
		return o, fmt.Errorf("check IP %q: not an IP address", o.IP)
	}
	if o.Namespace == "" {
		o.Namespace = api.DefaultNamespace
	}
	switch v := os.Getenv(stockEnv); v {
	case "", "0":
	case "1":
		o.Stock = true
	default:
		return o, fmt.Errorf("check %s=%q: want 1 (or 0, or unset)", stockEnv, v)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LogLevel == nil {
		o.LogLevel = slog.LevelWarn
	}
	if o.DBPath != "" {
		abs, err := filepath.Abs(o.DBPath)
		if err != nil {
			return o, fmt.Errorf("resolve database path: %w", err)
		}
		o.DBPath = abs
	}
	attrs := maps.Clone(o.SearchAttributes)
	if attrs == nil {
		attrs = map[string]enumspb.IndexedValueType{}
	}
	for _, name := range api.SearchAttributes {
		if typ, ok := attrs[name]; ok && typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			return o, fmt.Errorf("check search attribute %s: %w (got %s, want Keyword)",
				name, ErrSearchAttributeType, typ)
		}
		attrs[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	o.SearchAttributes = attrs
	return o, nil
}

// pickPorts returns the frontend port (checked free, or picked when 0) and free ports for the
// internal services.
func pickPorts(ip string, frontend int) (servicePorts, error) {
	var ps servicePorts
	if frontend != 0 {
		if err := checkPortFree(ip, frontend); err != nil {
			return ps, &PortError{Service: ServiceFrontend, Port: frontend, Err: err}
		}
		ps.frontend = frontend
	}
	for _, p := range []*int{&ps.frontend, &ps.history, &ps.matching, &ps.worker} {
		if *p != 0 {
			continue
		}
		port, err := FreePort(ip)
		if err != nil {
			return ps, fmt.Errorf("pick port: %w", err)
		}
		*p = port
	}
	return ps, nil
}

func newTemporalServer(
	conf *config.Config,
	ports servicePorts,
	logger serverLogger,
	stock bool,
	overrides map[string]any,
) (temporal.Server, error) {
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("create authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("create claim mapper: %w", err)
	}

	dc := latencyDefaults()
	if stock {
		dc = dynamicconfig.StaticClient{}
	}
	for k, v := range overrides {
		dc[dynamicconfig.MakeKey(k)] = v
	}

	ip := conf.Global.Membership.BroadcastAddress
	host := func(port int) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(ip, strconv.Itoa(port)))
	}
	ts, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		// Static membership: no gossip ring to join, so no join delay.
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: host(ports.frontend),
			primitives.HistoryService:  host(ports.history),
			primitives.MatchingService: host(ports.matching),
			primitives.WorkerService:   host(ports.worker),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	return ts, nil
}

// startUI serves the Web UI on ip:port and waits until it answers.
func (s *Server) startUI(ctx context.Context, ip string, port int, namespace, codecEndpoint string) (err error) {
	// NewServer panics on a bad config or missing assets; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("create web UI: %v", r)
		}
	}()
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	host := ip
	if strings.Contains(ip, ":") {
		host = "[" + ip + "]" // the UI server joins host and port with a plain ":"
	}
	ui := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true}, // plain http on loopback
		HideLogs:            true,
		DisableNewsFetch:    true, // no calls to the internet from a dev tool
		// Credentials, so a gateway with tokens sees the login cookie of its own page.
		Codec: uiconfig.Codec{Endpoint: codecEndpoint, IncludeCredentials: codecEndpoint != ""},
	}))
	s.ui = ui
	s.uiAddr = "http://" + addr

	// Start blocks until Stop. It only returns early by exiting the process (echo's
	// Logger.Fatal) when it cannot listen, which checkPortFree made unlikely.
	go func() { _ = ui.Start() }()

	return poll(ctx, "wait for web UI", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.uiAddr+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health check: %s", resp.Status)
		}
		return nil
	})
}

// waitReady returns once the frontend serves the namespace and the history shard answers.
// DescribeNamespace proves the frontend and the namespace registry; DescribeWorkflowExecution
// of an unknown workflow goes through to history, whose NotFound proves the shard is loaded.
func waitReady(ctx context.Context, addr, namespace string, logger *slog.Logger) error {
	var c client.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	return poll(ctx, "wait for namespace "+namespace, func(ctx context.Context) error {
		if c == nil {
			dialed, err := client.DialContext(ctx, client.Options{
				HostPort:  addr,
				Namespace: namespace,
				Logger:    sdklog.NewStructuredLogger(logger),
			})
			if err != nil {
				return fmt.Errorf("dial frontend %s: %w", addr, err)
			}
			c = dialed
		}
		if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{
			Namespace: namespace,
		}); err != nil {
			return err
		}
		_, err := c.DescribeWorkflowExecution(ctx, "nexo-devserver-readiness-probe", "")
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nil
		}
		if err == nil {
			return nil // someone runs a workflow by that id; history answered all the same
		}
		return err
	})
}

// poll calls try, each attempt bounded to a short deadline, until it succeeds or ctx ends, and
// then returns the last attempt's error.
func poll(ctx context.Context, what string, try func(context.Context) error) error {
	const (
		attemptTimeout = 2 * time.Second
		interval       = 20 * time.Millisecond
	)
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := try(attemptCtx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
