// Package gateway is the HTTP face of the compatibility layer: a JSON API under /v1 (with
// Server-Sent Events for a run's live events and a session's activity stream), its OpenAPI
// document, and a server-rendered web page where a person lists runs, watches one,
// downloads its artifacts and approves or denies what it waits for, and talks to sessions.
// Like the starter it is a Temporal client only (through package runs); it holds no state
// of its own but browser logins.
//
// Access: bearer tokens from config, each with scopes read, operate and approve. Without
// tokens the gateway is open and serves a loopback address only (Listen refuses anything
// else); the page then needs no login. With tokens, the page has a login form that trades a
// token for an HttpOnly session cookie. Unsafe requests are checked against cross-origin
// use (Sec-Fetch-Site / Origin), and those authenticated by the cookie must also carry the
// session's CSRF token in the X-Nexo-CSRF header. See auth.go.
//
// A token may be limited to the runs and sessions of some agents and workflow types
// (Token.Agents, Token.Workflows): every other run then answers it exactly as an unknown
// id does. See limits.go.
//
// It is also an MCP server at /mcp (mcp.go): the configured agents as tools run_<agent>,
// get_run and the approvals inbox, each tool needing the scope of its route.
//
// For the Temporal Web UI it also serves a codec endpoint, /codec (codec.go), which reads
// payloads offloaded by External Storage back from the blob store.
//
// Everything a model, a tool or a workflow produced reaches the page through html/template
// (escaped) or through JavaScript that sets textContent, never innerHTML.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

// Sentinel errors of the package.
var (
	// ErrOpenNonLoopback: Listen was asked to serve a non-loopback address without tokens.
	ErrOpenNonLoopback = errors.New("an open gateway (no gateway.tokens) serves a loopback address only")
)

// Runs is the part of *runs.Client the gateway uses, to ease testing. Its methods return
// the typed errors of package runs (NotFoundError, StateError, BadRequestError,
// NoWorkerError), which the API maps onto HTTP statuses. A session is a run too: Get of
// api.SessionID(agent, instance) is its record, whose events are its activity stream.
type Runs interface {
	Start(ctx context.Context, req runs.StartRequest) (string, error)
	Get(ctx context.Context, id string) (api.Record, error)
	// Origin is what a run was started as, read without a worker: limited tokens are
	// judged by it (limits.go).
	Origin(ctx context.Context, id string) (runs.Origin, error)
	List(ctx context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error)
	Follow(ctx context.Context, id string, fn func(rec api.Record) bool) (api.Record, error)
	Resume(ctx context.Context, id string, req runs.ResumeRequest) error
	Decide(ctx context.Context, id string, d runs.Decision) (string, api.Record, error)
	DecideRecord(ctx context.Context, rec api.Record, d runs.Decision) (string, error)
	Cancel(ctx context.Context, id string) (string, error)
	Rerun(ctx context.Context, id string, payload json.RawMessage) (string, error)
	Fork(ctx context.Context, st runs.WorkspaceStore, req runs.ForkRequest) (string, error)

	Prompt(ctx context.Context, agent, instance, text string, o runs.PromptOptions) (api.PromptReply, error)
	Session(ctx context.Context, agent, instance string) (api.SessionView, error)
	ListSessions(ctx context.Context, limit int) ([]runs.SessionSummary, error)
	CloseSession(ctx context.Context, agent, instance string) error
	Interrupt(ctx context.Context, agent, instance string) (api.InterruptReply, error)
	Steer(ctx context.Context, agent, instance, text string) (api.SteerReply, error)
	FollowSessionLive(ctx context.Context, agent, instance string, fn func(rec api.Record) bool, live func(api.LiveText)) error

	Approvals(ctx context.Context, req runs.ApprovalsRequest) ([]runs.Pending, error)
	// Notifications are the receivers' outboxes: what is not delivered yet and what was
	// given up (the Approvals page shows them).
	Notifications(ctx context.Context) ([]api.NotifierStatus, error)
}

var _ Runs = (*runs.Client)(nil)

// Token is one bearer token the gateway accepts.
type Token struct {
	// Name is recorded as who decided; never secret.
	Name string
	// Secret is what a client sends as "Authorization: Bearer <secret>".
	Secret string
	// Scopes granted: api.ScopeRead, ScopeOperate, ScopeApprove.
	Scopes []string
	// Agents and Workflows limit the token to the runs and sessions of these agents and
	// workflow types (names or path.Match globs); nil means all (see Limits).
	Agents    []string
	Workflows []string
}

func (t Token) limits() Limits { return Limits{Agents: t.Agents, Workflows: t.Workflows} }

// MinSecretLength is the shortest token secret New accepts: a token is the only thing
// between the network and approving a run, so it must not be guessable.
const MinSecretLength = 16

// Options configure a Server.
type Options struct {
	// Runs reads and drives runs; required.
	Runs Runs
	// Artifacts is the store artifacts not inline in the record are read from; nil serves
	// inline artifacts only.
	Artifacts artifacts.Getter
	// Tokens accepted; none makes the gateway open (loopback only).
	Tokens []Token
	// MaxBodyBytes caps a request body; 0 means 1 MiB.
	MaxBodyBytes int64
	// Logger for server errors; nil discards.
	Logger *slog.Logger
	// SessionTTL is how long a page login lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// KeepAlive is the interval of SSE comments that keep idle streams open through
	// proxies; 0 means 15 seconds.
	KeepAlive time.Duration
	// WorkerWait is how long a prompt waits for a worker to take up its session before
	// it is answered 503; 0 means 10 seconds. (A turn may take as long as it needs once a
	// worker serves it.)
	WorkerWait time.Duration
	// ExternalStorage is the one the platform's clients and workers use
	// (payloads.ExternalStorage over the blob store). With a driver, the gateway serves
	// the codec endpoint /codec for the Temporal Web UI (codec.go); without, it has none.
	ExternalStorage converter.ExternalStorage
	// CodecOrigins are the browser origins (scheme://host[:port]) of Temporal Web UIs
	// allowed to call /codec.
	CodecOrigins []string
	// TemporalUI is the base URL of a Temporal Web UI (http://127.0.0.1:8233); with it, the
	// run page links each run to its page there, in Namespace. Empty: no link.
	TemporalUI string
	// Namespace is the Temporal namespace of the runs, for the TemporalUI links.
	Namespace string
	// Agents are the configured agents the MCP server at /mcp offers as tools
	// run_<agent> (mcp.go); none: only its other tools.
	Agents []string
}

// Server is the gateway's http.Handler. Use Listen and Serve to run it, or mount it
// anywhere (tests use httptest).
type Server struct {
	runs         Runs
	store        artifacts.Getter
	tokens       []Token
	maxBody      int64
	logger       *slog.Logger
	keepAlive    time.Duration
	workerWait   time.Duration
	sessions     *sessions
	mux          *http.ServeMux
	mcp          http.Handler // the MCP server at /mcp (mcp.go)
	a2a          a2aAgents    // the A2A servers at /a2a/<agent> (a2a.go)
	routes       []route
	crossOrigin  *http.CrossOriginProtection
	codec        http.Handler // nil: no codec endpoint
	codecOrigins map[string]bool
	codecCross   *http.CrossOriginProtection
	streams      context.Context // canceled on shutdown, ending SSE streams
	stopStreams  context.CancelFunc
	pageTemplate pageTemplates
	temporalUI   string // base URL, no trailing slash; "" for none
	namespace    string
}

// New returns a Server, checking the options: every token needs a name, a secret of at
// least MinSecretLength characters (distinct from the others) and known scopes.
func New(opts Options) (*Server, error) {
	if opts.Runs == nil {
		return nil, errors.New("new gateway: Options.Runs is nil")
	}
	seen := map[string]string{}
	for i, t := range opts.Tokens {
		if t.Name == "" {
			return nil, fmt.Errorf("new gateway: token %d has no name", i)
		}
		if len(t.Secret) < MinSecretLength {
			return nil, fmt.Errorf("new gateway: the secret of token %s is %d characters, want at least %d (e.g. openssl rand -hex 32)",
				t.Name, len(t.Secret), MinSecretLength)
		}
		if other, dup := seen[t.Secret]; dup {
			return nil, fmt.Errorf("new gateway: tokens %s and %s have the same secret; each needs its own", other, t.Name)
		}
		seen[t.Secret] = t.Name
		for _, sc := range t.Scopes {
			if !validScope(sc) {
				return nil, fmt.Errorf("new gateway: token %s: unknown scope %q (want %s)", t.Name, sc, strings.Join(api.Scopes, ", "))
			}
		}
		if err := t.limits().check(); err != nil {
			return nil, fmt.Errorf("new gateway: token %s: %w", t.Name, err)
		}
	}
	s := &Server{
		runs:       opts.Runs,
		store:      opts.Artifacts,
		tokens:     opts.Tokens,
		maxBody:    opts.MaxBodyBytes,
		logger:     opts.Logger,
		keepAlive:  opts.KeepAlive,
		workerWait: opts.WorkerWait,
		sessions:   newSessions(opts.SessionTTL),
		temporalUI: strings.TrimRight(opts.TemporalUI, "/"),
		namespace:  opts.Namespace,
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	if s.keepAlive <= 0 {
		s.keepAlive = 15 * time.Second
	}
	if s.workerWait <= 0 {
		s.workerWait = 10 * time.Second
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	s.crossOrigin = http.NewCrossOriginProtection()
	s.crossOrigin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, r, http.StatusForbidden, "cross-origin request refused: this endpoint changes state and accepts requests from the gateway's own pages or from non-browser clients only")
	}))
	var err error
	if s.codec, s.codecOrigins, s.codecCross, err = newCodec(opts.ExternalStorage, opts.CodecOrigins); err != nil {
		return nil, err
	}
	if s.pageTemplate, err = parseTemplates(); err != nil {
		return nil, err
	}
	if err := checkAgentTools(opts.Agents); err != nil {
		return nil, err
	}
	s.mcp = s.newMCP(opts.Agents)
	s.a2a = s.newA2A(opts.Agents)
	s.routes = append(s.routeTable(), s.codecRoutes()...)
	s.mux = http.NewServeMux()
	for _, rt := range s.routes {
		h := s.guard(rt)
		if rt.codec {
			h = s.cors(h)
		}
		s.mux.Handle(rt.pattern(), h)
	}
	return s, nil
}

// Open reports whether the gateway has no tokens: everyone who can reach it may do
// anything, which is why it then serves loopback only.
func (s *Server) Open() bool { return len(s.tokens) == 0 }

// AuthSummary says how the gateway admits requests, for a binary's start-up line.
func (s *Server) AuthSummary() string {
	if s.Open() {
		return "open: no gateway.tokens, so loopback only and no login"
	}
	parts := make([]string, len(s.tokens))
	for i, t := range s.tokens {
		parts[i] = fmt.Sprintf("%s (%s)", t.Name, strings.Join(t.Scopes, ", "))
		if l := t.limits(); !l.Unlimited() {
			parts[i] = fmt.Sprintf("%s (%s; %s)", t.Name, strings.Join(t.Scopes, ", "), l)
		}
	}
	return "bearer tokens " + strings.Join(parts, ", ")
}

// Listen opens addr. An open gateway (no tokens) refuses any address that is not loopback
// (ErrOpenNonLoopback), including ":8234" and "0.0.0.0:8234".
func (s *Server) Listen(addr string) (net.Listener, error) { return Listen(addr, s.Open()) }

// Listen opens addr for a gateway that will be open (no tokens) or not, with the same
// rule as Server.Listen, for a caller that must know the address before the Server exists
// (`worker --dev` points the Web UI at the codec endpoint before it has a client).
func Listen(addr string, open bool) (net.Listener, error) {
	if open && !loopbackAddr(addr) {
		return nil, fmt.Errorf("listen on %s: %w; configure gateway.tokens (see the README) or listen on 127.0.0.1", addr, ErrOpenNonLoopback)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	// "localhost" could resolve anywhere; what counts is the socket.
	if tcp, ok := ln.Addr().(*net.TCPAddr); open && (!ok || !tcp.IP.IsLoopback()) {
		ln.Close()
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, ln.Addr(), ErrOpenNonLoopback)
	}
	return ln, nil
}

// CodecEndpoint is the URL of the codec endpoint of a gateway listening on ln, as a
// browser on this machine reaches it (a wildcard address becomes 127.0.0.1).
func CodecEndpoint(ln net.Listener) string {
	addr := ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	}
	return "http://" + addr + codecPath
}

// loopbackAddr reports whether addr's host is a loopback IP or "localhost".
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve serves on ln until ctx ends, then shuts down: live event streams end at once,
// other requests get up to 5 seconds to finish. It returns nil after a shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No ReadTimeout or WriteTimeout: an event stream lasts as long as its run, and an
		// expired read deadline would cancel it. Handlers that read a body set their own
		// read deadline (decodeJSON).
		ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(s.stopStreams)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve gateway on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("shut down gateway on %s: %w", ln.Addr(), err)
	}
	return nil
}

// ServeHTTP dispatches to the route table. Unknown API paths and methods get problem
// documents, like every other API error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// ServeMux would answer a path with . or .. segments with a redirect to its cleaned
	// form (GET /v1/runs/r1/artifacts/.. to /v1/runs/r1), which names another resource:
	// such a path is refused instead.
	if isAPI(r.URL.Path) && hasDotSegment(r.URL.Path) {
		problem(w, r, http.StatusBadRequest, fmt.Sprintf("path %s has a . or .. segment; name the resource itself", r.URL.Path))
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" && isAPI(r.URL.Path) {
		if allowed := s.allowedMethods(r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			problem(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
			return
		}
		problem(w, r, http.StatusNotFound, fmt.Sprintf("no API route %s %s (see /v1/openapi.json)", r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// hasDotSegment reports whether p has a "." or ".." segment.
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func (s *Server) allowedMethods(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := s.mux.Handler(r2); p != "" {
			out = append(out, m)
		}
	}
	return out
}

func isAPI(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }

// route is one entry of the route table: the single source the mux, the auth guard and
// the OpenAPI test read.
type route struct {
	method string
	path   string // a ServeMux path pattern, e.g. /v1/runs/{id}
	// scope the caller needs; "" for public routes (the OpenAPI document, login, assets).
	scope string
	// page routes answer errors with HTML and send unauthenticated browsers to /login.
	page bool
	// csrfExempt: the route does not act with the session cookie's authority (login acts
	// with the token typed into its form), so it needs no CSRF token.
	csrfExempt bool
	// codec routes serve the Temporal Web UI from its own origin (codec.go).
	codec bool
	// perCall routes need a token (any scope) and check the scope of each call
	// themselves: the MCP server, whose tools need different scopes (mcp.go).
	perCall bool
	handle  http.HandlerFunc
}

func (rt route) pattern() string { return rt.method + " " + rt.path }

func (s *Server) routeTable() []route {
	return []route{
		// The JSON API.
		{method: "GET", path: "/v1/openapi.json", handle: s.openAPI},
		{method: "GET", path: "/v1/runs", scope: api.ScopeRead, handle: s.listRuns},
		{method: "POST", path: "/v1/runs", scope: api.ScopeOperate, handle: s.startRun},
		{method: "GET", path: "/v1/runs/{id}", scope: api.ScopeRead, handle: s.getRun},
		{method: "GET", path: "/v1/runs/{id}/events", scope: api.ScopeRead, handle: s.events},
		{method: "POST", path: "/v1/runs/{id}/resume", scope: api.ScopeOperate, handle: s.resumeRun},
		{method: "POST", path: "/v1/runs/{id}/approvals/{call_id}", scope: api.ScopeApprove, handle: s.decide},
		{method: "POST", path: "/v1/runs/{id}/cancel", scope: api.ScopeOperate, handle: s.cancelRun},
		{method: "POST", path: "/v1/runs/{id}/rerun", scope: api.ScopeOperate, handle: s.rerunRun},
		{method: "GET", path: "/v1/runs/{id}/artifacts", scope: api.ScopeRead, handle: s.listArtifacts},
		{method: "GET", path: "/v1/runs/{id}/artifacts/{name}", scope: api.ScopeRead, handle: s.getArtifact},
		{method: "GET", path: "/v1/runs/{id}/files", scope: api.ScopeRead, handle: s.listFiles},
		{method: "GET", path: "/v1/runs/{id}/files/{path...}", scope: api.ScopeRead, handle: s.getFile},
		{method: "GET", path: "/v1/runs/{id}/diff", scope: api.ScopeRead, handle: s.diffFiles},
		{method: "POST", path: "/v1/runs/{id}/fork", scope: api.ScopeOperate, handle: s.forkRun},
		{method: "GET", path: "/v1/approvals", scope: api.ScopeRead, handle: s.listApprovals},
		{method: "GET", path: "/v1/sessions", scope: api.ScopeRead, handle: s.listSessions},
		{method: "GET", path: "/v1/sessions/{agent}/{instance}", scope: api.ScopeRead, handle: s.getSession},
		{method: "POST", path: "/v1/sessions/{agent}/{instance}/prompt", scope: api.ScopeOperate, handle: s.promptSession},
		{method: "POST", path: "/v1/sessions/{agent}/{instance}/close", scope: api.ScopeOperate, handle: s.closeSession},
		{method: "POST", path: "/v1/sessions/{agent}/{instance}/interrupt", scope: api.ScopeOperate, handle: s.interruptSession},
		{method: "POST", path: "/v1/sessions/{agent}/{instance}/steer", scope: api.ScopeOperate, handle: s.steerSession},
		{method: "GET", path: "/v1/sessions/{agent}/{instance}/stream", scope: api.ScopeRead, handle: s.sessionStream},
		{method: "GET", path: "/v1/schedules", scope: api.ScopeRead, handle: s.listSchedules},
		{method: "POST", path: "/v1/schedules", scope: api.ScopeOperate, handle: s.createSchedule},
		{method: "GET", path: "/v1/schedules/{name}", scope: api.ScopeRead, handle: s.getSchedule},
		{method: "DELETE", path: "/v1/schedules/{name}", scope: api.ScopeOperate, handle: s.changeSchedule("delete")},
		{method: "POST", path: "/v1/schedules/{name}/pause", scope: api.ScopeOperate, handle: s.changeSchedule("pause")},
		{method: "POST", path: "/v1/schedules/{name}/unpause", scope: api.ScopeOperate, handle: s.changeSchedule("unpause")},
		// The MCP server (mcp.go): POST carries the messages, DELETE ends a session.
		{method: "POST", path: mcpPath, perCall: true, handle: s.mcp.ServeHTTP},
		{method: "DELETE", path: mcpPath, perCall: true, handle: s.mcp.ServeHTTP},
		// The A2A servers (a2a.go): a card per agent (any token reads it: a client reads
		// the card before each call), and its JSON-RPC endpoint, whose methods check their
		// scopes.
		{method: "GET", path: a2aPrefix + "{agent}" + a2aCardPath, perCall: true, handle: s.a2aCard},
		{method: "POST", path: a2aPrefix + "{agent}", perCall: true, handle: s.a2aRPC},
		// The web page.
		{method: "GET", path: "/{$}", scope: api.ScopeRead, page: true, handle: s.runsPage},
		{method: "GET", path: "/runs/{id}", scope: api.ScopeRead, page: true, handle: s.runPage},
		{method: "GET", path: "/runs/{id}/files", scope: api.ScopeRead, page: true, handle: s.workspaceFilesPage},
		{method: "GET", path: "/runs/{id}/files/{path...}", scope: api.ScopeRead, page: true, handle: s.workspaceFilePage},
		{method: "GET", path: "/runs/{id}/changes", scope: api.ScopeRead, page: true, handle: s.callChangesPage},
		{method: "GET", path: "/sessions", scope: api.ScopeRead, page: true, handle: s.sessionsPage},
		{method: "GET", path: "/approvals", scope: api.ScopeRead, page: true, handle: s.approvalsPage},
		{method: "GET", path: "/schedules", scope: api.ScopeRead, page: true, handle: s.schedulesPage},
		{method: "GET", path: "/sessions/{agent}/{instance}", scope: api.ScopeRead, page: true, handle: s.sessionPage},
		{method: "GET", path: "/login", page: true, handle: s.loginPage},
		{method: "POST", path: "/login", page: true, csrfExempt: true, handle: s.login},
		{method: "POST", path: "/logout", page: true, handle: s.logout},
		{method: "GET", path: "/static/{file}", page: true, handle: s.static},
	}
}
