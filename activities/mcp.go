package activities

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/mcpauth"
	"github.com/nexo-temporal/nexo/sandbox"
)

// MCP limits.
const (
	// DefaultMCPIdleTimeout closes a client nobody used for this long: a run whose
	// CloseMCP ran on another worker (or never ran) leaks nothing here for long, and a
	// run that waits hours for an approval reconnects on its next call.
	DefaultMCPIdleTimeout = 10 * time.Minute
	// MCPResultCap is the most of a tool result the model sees, like read_file's cap.
	MCPResultCap = ReadCap
	// mcpConnectTimeout bounds starting a server and the initialize handshake, so one
	// server that hangs cannot hold the others' tools back.
	mcpConnectTimeout = 30 * time.Second
	// stderrTail is how much of a stdio server's last stderr an error quotes.
	stderrTail = 2000
)

var (
	// ErrMCPClosed: the worker is shutting down and opens no MCP client any more.
	ErrMCPClosed = errors.New("this worker's MCP clients are closed (it is shutting down)")
	// ErrMCPToken: the environment variable a server's token_env names is not set here.
	ErrMCPToken = errors.New("token variable not set")
	// ErrMCPDeclaration: a server declaration that cannot work (agents.Spec.Validate
	// catches these at start; this is the backstop for specs built in Go).
	ErrMCPDeclaration = errors.New("bad MCP server declaration")
	// ErrMCPProtocolVersion: the server and this client share no MCP protocol version.
	ErrMCPProtocolVersion = errors.New("no MCP protocol version in common")
)

// redacted replaces a secret in anything the activities return.
const redacted = "[REDACTED]"

// ListMCPTools connects to each of the run's servers (reusing clients the run already
// has on this worker) and lists their tools. A server that cannot start or answer is an
// entry in Errors and offers no tools; the run goes on without it. Servers are asked in
// parallel, each within mcpConnectTimeout to connect.
func (a *MCP) ListMCPTools(ctx context.Context, req api.ListMCPToolsRequest) (api.ListMCPToolsResult, error) {
	pool := a.mcpPool()
	if pool.isClosed() {
		return api.ListMCPToolsResult{}, fmt.Errorf("list MCP tools of run %s: %w", req.RunID, ErrMCPClosed)
	}
	tools := make([][]api.MCPTool, len(req.Servers))
	errs := make([]error, len(req.Servers))
	var wg sync.WaitGroup
	for i, spec := range req.Servers {
		wg.Go(func() { tools[i], errs[i] = pool.listTools(ctx, req.RunID, spec) })
	}
	wg.Wait()
	res := api.ListMCPToolsResult{Tools: []api.MCPTool{}}
	for i, spec := range req.Servers {
		if errs[i] != nil {
			if res.Errors == nil {
				res.Errors = map[string]string{}
			}
			res.Errors[spec.Name] = errs[i].Error()
			continue
		}
		res.Tools = append(res.Tools, tools[i]...)
	}
	return res, nil
}

// CallMCPTool calls one tool. What the server answers, an error result (isError) or a
// JSON-RPC error included, is a result the model sees. A broken transport (the server
// died mid-call, the connection was refused) is an activity error naming the server,
// which Temporal retries under the workflow's bounded policy; the broken client is
// dropped first, so the retry reconnects (a stdio server is started again).
func (a *MCP) CallMCPTool(ctx context.Context, req api.CallMCPToolRequest) (api.RunToolResult, error) {
	name := req.Server.Name
	args := req.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return toolError("MCP server %s: %s: arguments are not a JSON object: %v", name, req.Tool, err), nil
	}
	shape, err := newResultShape(req.Server)
	if err != nil {
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, err)
	}
	// The agent's tool hooks: Before decides before any connection is made; After sees
	// the result once the server's own policy (redact, max_bytes) has shaped it.
	call := ToolCall{RunID: req.RunID, CallID: req.CallID, Tool: req.Tool, Server: name, Args: args}
	var hooked []api.ToolHookNote
	after := func(res api.RunToolResult) api.RunToolResult {
		if len(req.Hooks) == 0 {
			return res
		}
		return a.hooks.after(ctx, req.Hooks, call, res, hooked)
	}
	if len(req.Hooks) > 0 {
		var stop *api.RunToolResult
		if hooked, stop = a.hooks.before(ctx, req.Hooks, &call); stop != nil {
			return noteRetry(ctx, *stop), nil
		}
		args = call.Args
	}
	pool := a.mcpPool()
	c, err := pool.acquire(ctx, req.RunID, req.Server)
	if err != nil {
		return api.RunToolResult{}, classifyMCP(err)
	}
	defer pool.release(c)
	// The server's timeout bounds the call alone: connecting has its own bound above.
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if t := time.Duration(req.Server.Timeout); t > 0 {
		callCtx, cancel = context.WithTimeout(ctx, t)
	}
	defer cancel()
	// The raw arguments go as they came, so large integers keep their precision.
	out, err := c.client.CallTool(callCtx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: req.Tool, Arguments: args}})
	if err != nil {
		if ctx.Err() == nil && callCtx.Err() != nil {
			// The server's own bound, not the activity's: the model hears it and the run
			// goes on. The client stays open (a late answer is dropped by its request id).
			res := toolError("MCP server %s: %s: no answer within the server's timeout of %s; the call was abandoned (it may still be running on the server)",
				name, req.Tool, time.Duration(req.Server.Timeout))
			return noteRetry(ctx, after(res)), nil
		}
		if ctx.Err() != nil {
			return api.RunToolResult{}, fmt.Errorf("MCP server %s: call %s: %w", name, req.Tool, ctx.Err())
		}
		if c.oauth != nil && loginNeeded(err) {
			pool.drop(c)
			return api.RunToolResult{}, classifyMCP(pool.oauthError(c, req.Server, err, "call %s", req.Tool))
		}
		if brokenTransport(err) {
			pool.drop(c)
			return api.RunToolResult{}, classifyMCP(c.errorf(err, "call %s: the connection broke (it is reopened on retry)", req.Tool))
		}
		if staleVersion(err) {
			// Refused before the tool ran, so the retry cannot run it twice.
			pool.drop(c)
			return api.RunToolResult{}, classifyMCP(c.errorf(err, "call %s: the server no longer accepts protocol %s (the retry negotiates again)",
				req.Tool, c.client.ProtocolVersion()))
		}
		res := toolError("%s", shape.apply(c.redact(fmt.Sprintf("MCP server %s: %s: %v", name, req.Tool, err))))
		return noteRetry(ctx, after(res)), nil
	}
	res := toolResult(out)
	res.Content = shape.apply(c.redact(res.Content))
	res = after(res)
	// As for the built-in tools: an earlier attempt may have reached the server (a worker
	// killed mid-call), and the model should check before it builds on the call.
	res = noteRetry(ctx, res)
	if req.Note != "" {
		// Before the result is stored, so a result by reference carries it too.
		res.Content, res.Noted = req.Note+res.Content, true
	}
	return a.out.offload(ctx, res, req.StoreOver)
}

// Register registers the MCP activities.
func (a *MCP) Register(r Registry) {
	for name, fn := range map[string]any{
		api.ActivityListMCPTools: a.ListMCPTools,
		api.ActivityCallMCPTool:  a.CallMCPTool,
		api.ActivityCloseMCP:     a.CloseMCP,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// CloseMCP closes the run's MCP clients on this worker; stdio servers are stopped and
// reaped. Clients the run has on other workers close there when idle.
func (a *MCP) CloseMCP(ctx context.Context, req api.CloseMCPRequest) error {
	return a.mcpPool().closeWhere(func(k mcpKey) bool { return k.run == req.RunID })
}

// Close releases what the activities hold on the worker: every MCP client (stdio servers
// are stopped and reaped). The worker calls it once its Temporal worker has stopped; MCP
// activities run after it fail with ErrMCPClosed.
func (a *MCP) Close() error {
	return a.mcpPool().close()
}

// mcpPool is the provider's pool, made with it (NewMCP) and closed with it (Close).
func (a *MCP) mcpPool() *mcpPool { return a.pool }

// setMCPIdleTimeout changes how long an unused client lives (tests).
func (a *MCP) setMCPIdleTimeout(d time.Duration) {
	p := a.mcpPool()
	p.mu.Lock()
	p.idle = d
	p.mu.Unlock()
}

// mcpProtocolVersion is the protocol version the run's open client for spec speaks, or
// "" when none is open (tests).
func (a *MCP) mcpProtocolVersion(run string, spec api.MCPServerSpec) string {
	p := a.mcpPool()
	p.mu.Lock()
	c, ok := p.conns[keyOf(run, spec)]
	p.mu.Unlock()
	if !ok {
		return ""
	}
	<-c.ready
	if c.client == nil {
		return ""
	}
	return c.client.ProtocolVersion()
}

// mcpPool is a worker's MCP clients, one per run and server declaration, created on first
// use and closed by CloseMCP, by idling, or with the worker.
//
// Concurrency: every field below mu is guarded by it. A connection is in the map from
// the moment someone starts to open it; others wanting it wait on its ready channel.
// Closing never holds mu (a stdio server takes up to seconds to stop).
type mcpPool struct {
	mu     sync.Mutex
	idle   time.Duration
	conns  map[mcpKey]*mcpConn
	closed bool
	// life is the connections' context: a stdio server and an SSE stream outlive the
	// activity that opened them, until they are closed or the pool is.
	life context.Context
	end  context.CancelFunc
	// creds is the OAuth credential file; loginHint names the login command of a server.
	creds     mcpauth.File
	loginHint func(api.MCPServerSpec) string
	// lookupEnv resolves token_env (Deps.LookupEnv; set before first use, then read-only).
	lookupEnv func(string) (string, bool)
}

// mcpKey names a client: the run, the server, and a digest of the server's declaration,
// so two agents of one run that declare different servers under one name never share.
type mcpKey struct {
	run, server, spec string
}

func keyOf(run string, spec api.MCPServerSpec) mcpKey {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return mcpKey{run: run, server: spec.Name, spec: hex.EncodeToString(sum[:8])}
}

func newMCPPool(idle time.Duration) *mcpPool {
	life, end := context.WithCancel(context.Background())
	return &mcpPool{idle: idle, conns: map[mcpKey]*mcpConn{}, life: life, end: end, lookupEnv: os.LookupEnv}
}

func (p *mcpPool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// acquire returns the open client for (run, spec), opening it if needed. The caller
// releases it.
func (p *mcpPool) acquire(ctx context.Context, run string, spec api.MCPServerSpec) (*mcpConn, error) {
	key := keyOf(run, spec)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("MCP server %s: %w", spec.Name, ErrMCPClosed)
	}
	c, ok := p.conns[key]
	if !ok {
		c = &mcpConn{key: key, name: spec.Name, ready: make(chan struct{})}
		p.conns[key] = c
	}
	c.users++
	if c.idle != nil {
		c.idle.Stop()
	}
	p.mu.Unlock()
	if !ok {
		c.err = c.open(ctx, p, spec)
		close(c.ready)
		if c.err != nil {
			p.drop(c)
		}
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		p.release(c)
		return nil, fmt.Errorf("MCP server %s: wait for the connection: %w", spec.Name, ctx.Err())
	}
	if c.err != nil {
		p.release(c)
		return nil, c.err
	}
	return c, nil
}

// release ends a use of c; the last user starts its idle clock.
func (p *mcpPool) release(c *mcpConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.users--
	c.lastUse = time.Now()
	if c.users > 0 || p.conns[c.key] != c {
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(p.idle, func() { p.expire(c) })
	} else {
		c.idle.Reset(p.idle)
	}
}

// expire closes c if it is still unused after the idle timeout.
func (p *mcpPool) expire(c *mcpConn) {
	p.mu.Lock()
	if p.conns[c.key] != c || c.users > 0 || time.Since(c.lastUse) < p.idle {
		p.mu.Unlock()
		return
	}
	delete(p.conns, c.key)
	p.mu.Unlock()
	_ = c.close()
}

// drop takes c out of the pool and closes it (in the background: the caller is on an
// activity's path, and c's users get errors from the closed transport).
func (p *mcpPool) drop(c *mcpConn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
	go func() { _ = c.close() }()
}

// closeWhere closes, in parallel, the clients whose key matches, and waits for them.
func (p *mcpPool) closeWhere(match func(mcpKey) bool) error {
	p.mu.Lock()
	var doomed []*mcpConn
	for k, c := range p.conns {
		if match(k) {
			doomed = append(doomed, c)
			delete(p.conns, k)
		}
	}
	p.mu.Unlock()
	errs := make([]error, len(doomed))
	var wg sync.WaitGroup
	for i, c := range doomed {
		wg.Go(func() { errs[i] = c.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// close closes every client and refuses new ones.
func (p *mcpPool) close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.closeWhere(func(mcpKey) bool { return true })
	p.end()
	return err
}

// listTools lists one server's tools for a run.
func (p *mcpPool) listTools(ctx context.Context, run string, spec api.MCPServerSpec) ([]api.MCPTool, error) {
	c, err := p.acquire(ctx, run, spec)
	if err != nil {
		return nil, err
	}
	defer p.release(c)
	list, err := c.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		if brokenTransport(err) || staleVersion(err) || (c.oauth != nil && loginNeeded(err)) {
			p.drop(c)
		}
		return nil, p.oauthError(c, spec, err, "list tools")
	}
	tools := make([]api.MCPTool, 0, len(list.Tools))
	for _, t := range list.Tools {
		schema := t.RawInputSchema
		if len(schema) == 0 {
			if schema, err = json.Marshal(t.InputSchema); err != nil {
				return nil, c.errorf(err, "tool %s: encode its input schema", t.Name)
			}
		}
		tools = append(tools, api.MCPTool{Server: spec.Name, Name: t.Name, QualifiedName: spec.Name + api.MCPToolSeparator + t.Name,
			Description: c.redact(t.Description), InputSchema: schema})
	}
	return tools, nil
}

// mcpConn is one client: a stdio server process, or a connection to an HTTP one.
type mcpConn struct {
	key  mcpKey
	name string
	// ready is closed once open has returned; then client or err is set for good.
	ready  chan struct{}
	client *client.Client
	err    error
	// secret is the token this client was given, kept out of everything it returns.
	secret string
	// oauth is the token store of a server declared with oauth (nil otherwise), and
	// oauthCfg mcp-go's OAuth configuration over it.
	oauth    *mcpauth.Store
	oauthCfg transport.OAuthConfig
	// stdio: the server's process, the guard of its process group, and the end of its stderr.
	cmd    *exec.Cmd
	guard  *sandbox.Guard // the process group's guard, which kills it with the worker
	stderr *tailWriter

	users   int         // guarded by mcpPool.mu
	lastUse time.Time   // guarded by mcpPool.mu
	idle    *time.Timer // guarded by mcpPool.mu

	closeOnce sync.Once
	closeErr  error
}

// open starts the server (stdio) or prepares the connection, then performs the MCP
// initialize handshake, all within mcpConnectTimeout.
func (c *mcpConn) open(ctx context.Context, p *mcpPool, spec api.MCPServerSpec) error {
	ctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	life := p.life
	if spec.OAuth != nil {
		if err := c.openOAuth(ctx, p, spec); err != nil {
			return err
		}
	}
	var token string
	if spec.TokenEnv != "" {
		v, ok := p.lookupEnv(spec.TokenEnv) // the worker took its secrets out of the environment at start
		if !ok || v == "" {
			return fmt.Errorf("MCP server %s: %w: token_env names %s, which is not set (or is empty) in the worker's environment; set it where the worker runs",
				spec.Name, ErrMCPToken, spec.TokenEnv)
		}
		token = v
	}
	c.secret = token
	logger := slog.New(redactHandler{Handler: slog.Default().Handler(), secrets: c.secrets}).With("mcp_server", spec.Name)
	cl, err := c.connect(ctx, life, spec, token, logger, "")
	if err != nil {
		return err
	}
	// mcp-go settles on 2026-07-28 whenever server/discover answers, without looking at
	// the versions the answer lists; a server that lists only older ones (the official
	// SDK's stateful streamable HTTP handler does: that transport cannot serve
	// 2026-07-28) then refuses every later request. The spec has the client choose one of
	// the listed versions, so ask again and, when ours is not among them, reconnect on the
	// newest version both sides know (through initialize, for a pre-2026 one).
	if v := cl.ProtocolVersion(); mcp.IsModernProtocol(v) {
		disc, err := cl.Discover(ctx, mcp.DiscoverRequest{})
		if err != nil {
			c.shut(cl)
			return c.errorf(err, "discover the protocol versions at %s", v)
		}
		if !slices.Contains(disc.SupportedVersions, v) {
			c.shut(cl)
			both := mcp.NegotiateMutuallySupportedVersion(disc.SupportedVersions)
			if both == "" {
				return c.errorf(ErrMCPProtocolVersion, "negotiate a protocol version (the server supports %v over %s, this client %v)",
					disc.SupportedVersions, spec.Transport, mcp.ValidProtocolVersions)
			}
			if cl, err = c.connect(ctx, life, spec, token, logger, both); err != nil {
				return err
			}
		}
	}
	c.client = cl
	return nil
}

// connect starts a client on spec's transport and performs the MCP handshake within
// ctx. An empty version lets mcp-go prefer the newest it knows (server/discover first,
// initialize if the server predates it); a version pins it.
func (c *mcpConn) connect(ctx context.Context, life context.Context, spec api.MCPServerSpec, token string, logger *slog.Logger, version string) (*client.Client, error) {
	c.cmd, c.guard = nil, nil
	var opts []client.ClientOption
	if version != "" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	var cl *client.Client
	switch spec.Transport {
	case api.MCPStdio:
		c.stderr = &tailWriter{max: stderrTail}
		env := stdioEnv(spec, token)
		tr := transport.NewStdioWithOptions(spec.Command, env, spec.Args,
			transport.WithCommandFunc(func(_ context.Context, command string, env, args []string) (*exec.Cmd, error) {
				// Not exec.CommandContext: the process lives until the client is closed,
				// and the worker's own environment (its secrets) is never inherited.
				cmd := exec.Command(command, args...)
				cmd.Env = env
				// Our writer, not the library's drain, so that once Close has reaped the
				// process its stderr is all here; WaitDelay keeps a grandchild holding
				// the pipe from stalling that for long.
				cmd.Stderr = c.stderr
				cmd.WaitDelay = time.Second
				// In a process group whose guard kills it when the worker dies, even by
				// SIGKILL: the server and whatever it started, not the server alone
				// (which sees its stdin close) while its children run on.
				g, err := sandbox.StartGuard()
				if err != nil {
					return nil, fmt.Errorf("start the process guard of MCP server %s: %w", spec.Name, err)
				}
				g.Join(cmd)
				c.cmd, c.guard = cmd, g
				return cmd, nil
			}),
			transport.WithCommandLogger(logger))
		cl = client.NewClient(tr, opts...)
	case api.MCPHTTP:
		hopts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(c.headerClient(httpHeaders(spec, token))), transport.WithHTTPLogger(logger)}
		if c.oauth != nil {
			hopts = append(hopts, transport.WithHTTPOAuth(c.oauthCfg))
		}
		tr, err := transport.NewStreamableHTTP(spec.URL, hopts...)
		if err != nil {
			return nil, c.errorf(err, "open %s", spec.URL)
		}
		cl = client.NewClient(tr, opts...)
	case api.MCPSSE:
		sopts := []transport.ClientOption{transport.WithHTTPClient(c.headerClient(httpHeaders(spec, token))), transport.WithSSELogger(logger),
			transport.WithEndpointTimeout(mcpConnectTimeout)}
		if c.oauth != nil {
			sopts = append(sopts, transport.WithOAuth(c.oauthCfg))
		}
		tr, err := transport.NewSSE(spec.URL, sopts...)
		if err != nil {
			return nil, c.errorf(err, "open %s", spec.URL)
		}
		cl = client.NewClient(tr, opts...)
	default:
		return nil, fmt.Errorf("MCP server %s: %w: transport %q is not one of stdio, sse, http", spec.Name, ErrMCPDeclaration, spec.Transport)
	}
	// Start with the connection's lifetime, not the activity's (which ends first); give
	// up waiting when the activity's time is out.
	started := make(chan error, 1)
	go func() { started <- cl.Start(life) }()
	select {
	case err := <-started:
		if err != nil {
			c.shut(cl)
			return nil, c.errorf(err, "start")
		}
	case <-ctx.Done():
		go func() { <-started; c.shut(cl) }()
		return nil, c.errorf(ctx.Err(), "start")
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "nexo", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		c.shut(cl)
		return nil, c.errorf(err, "initialize")
	}
	return cl, nil
}

// shut closes a client open did not keep, and kills what is left of its stdio server's
// process group (c.cmd is that server's until the next connect starts another).
func (c *mcpConn) shut(cl *client.Client) {
	_ = cl.Close()
	if c.guard != nil {
		c.guard.Stop()
	}
}

// close stops the client once; a stdio server is reaped, and whatever it started in its
// process group is killed. An exit status of the server is not an error (we stopped it),
// nor a child of it holding its stderr open (the group kill ends that child).
func (c *mcpConn) close() error {
	c.closeOnce.Do(func() {
		<-c.ready
		if c.client == nil {
			return
		}
		err := c.client.Close()
		if c.guard != nil {
			c.guard.Stop()
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) && !errors.Is(err, exec.ErrWaitDelay) && !errors.Is(err, transport.ErrTransportClosed) {
			c.closeErr = c.errorf(err, "close")
		}
	})
	return c.closeErr
}

// brokenTransport tells a failed transport (the server process gone, the connection
// refused or cut, an HTTP error status) from an answer of the server.
func brokenTransport(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) || errors.Is(err, transport.ErrTransportClosed)
}

// staleVersion tells a refusal of the connection's protocol version after the handshake
// agreed on it: the server changed since (redeployed with other versions or another
// transport mode, or moved behind a proxy). Only a new handshake helps, so the client is
// dropped like a broken one.
func staleVersion(err error) bool {
	return mcp.IsUnsupportedProtocolVersion(err)
}

// errorf wraps err as "MCP server <name>: <what>: <err>", quoting the end of a stdio
// server's stderr, with the token redacted; the sentinels of err stay visible to
// errors.Is but its text does not.
func (c *mcpConn) errorf(err error, format string, args ...any) error {
	msg := fmt.Sprintf("MCP server %s: %s: %v", c.name, fmt.Sprintf(format, args...), err)
	if c.stderr != nil {
		if tail := strings.TrimSpace(c.stderr.String()); tail != "" {
			msg += "; its stderr ends: " + tail
		}
	}
	return &mcpError{msg: c.redact(msg), err: err}
}

func (c *mcpConn) redact(s string) string {
	for _, secret := range c.secrets() {
		s = redact(s, secret)
	}
	return s
}

// secrets are the token_env token and the OAuth tokens and client secret of the client.
func (c *mcpConn) secrets() []string {
	out := []string{c.secret}
	if c.oauth != nil {
		out = append(out, c.oauth.Secrets()...)
	}
	return out
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, redacted)
}

// mcpError is an error whose message has been redacted; it unwraps to the original for
// errors.Is and errors.As only.
type mcpError struct {
	msg string
	err error
}

func (e *mcpError) Error() string { return e.msg }
func (e *mcpError) Unwrap() error { return e.err }

// classifyMCP makes the errors that retrying cannot fix non-retryable. It hands Temporal
// a message only: Temporal records an error's whole Unwrap chain in history, and the
// unredacted cause could hold the token.
func classifyMCP(err error) error {
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &app):
		return err
	case loginNeeded(err), errors.Is(err, mcpauth.ErrClientSecret):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, nil)
	case errors.Is(err, ErrMCPToken), errors.Is(err, ErrMCPDeclaration):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, nil)
	case errors.Is(err, ErrMCPProtocolVersion):
		return temporal.NewNonRetryableApplicationError(err.Error()+" (upgrade the server or Nexo)", api.ErrTypeBadInput, nil)
	case errors.Is(err, transport.ErrAuthorizationRequired):
		return temporal.NewNonRetryableApplicationError(err.Error()+" (check the token its token_env names)", api.ErrTypeBadInput, nil)
	case errors.Is(err, transport.ErrLegacySSEServer):
		return temporal.NewNonRetryableApplicationError(err.Error()+" (declare it with transport: sse)", api.ErrTypeBadInput, nil)
	}
	return temporal.NewApplicationError(err.Error(), api.ErrTypeMCPTransport, nil)
}

// stdioEnv is a stdio server's environment: PATH, HOME and LANG of the worker, the
// declaration's env, and the token variable when token_env is set. Never the worker's
// whole environment, which holds its secrets (model keys, other servers' tokens).
func stdioEnv(spec api.MCPServerSpec, token string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if _, set := spec.Env[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != spec.TokenEnv || token == "" {
			env = append(env, k+"="+spec.Env[k])
		}
	}
	if token != "" {
		env = append(env, spec.TokenEnv+"="+token)
	}
	return env
}

// httpHeaders are the declaration's headers and, with a token, "Authorization: Bearer"
// (which wins over any Authorization header declared).
func httpHeaders(spec api.MCPServerSpec, token string) map[string]string {
	h := make(map[string]string, len(spec.Headers)+1)
	for k, v := range spec.Headers {
		if token != "" && strings.EqualFold(k, "Authorization") {
			continue
		}
		h[k] = v
	}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

// headerClient is the HTTP client of a remote server's transport: it puts the headers on
// every request the transport sends. mcp-go's own header options miss the DELETE that ends
// a streamable HTTP session, which then reached the server without the token, was refused,
// and left the session open there.
//
// With OAuth, mcp-go's handler authorizes its requests; the client fills in the token on
// the ones it leaves without (that DELETE again).
func (c *mcpConn) headerClient(headers map[string]string) *http.Client {
	t := headerTransport{base: http.DefaultTransport, headers: headers}
	if c.oauth != nil {
		t.auth = c.oauth
	}
	return &http.Client{Transport: t}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	auth    transport.TokenStore // nil: no OAuth
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.auth != nil && r.Header.Get("Authorization") == "" {
		tok, err := t.auth.GetToken(r.Context())
		if err != nil {
			return nil, err
		}
		r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	}
	return t.base.RoundTrip(r)
}

// toolResult renders a tool's answer for the model: text parts joined, other content
// summarised, uncut (resultShape.apply cuts it, after redaction, so a cut never leaves
// half a secret that a pattern would have matched whole).
func toolResult(r *mcp.CallToolResult) api.RunToolResult {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, contentText(c))
	}
	text := strings.Join(parts, "\n")
	if len(r.Content) == 0 && r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			text = string(b)
		}
	}
	if r.IsError && strings.TrimSpace(text) == "" {
		text = "error: the tool failed and gave no message"
	}
	return api.RunToolResult{Content: text, IsError: r.IsError}
}

// resultShape is a server's result policy (api.MCPResultPolicy), compiled.
type resultShape struct {
	redact   []*regexp.Regexp
	maxBytes int // 0: MCPResultCap, with its own note
}

// newResultShape compiles spec's result policy. agents.Spec.Validate refuses a bad
// pattern at config load; this is the backstop for specs built in Go.
func newResultShape(spec api.MCPServerSpec) (resultShape, error) {
	var sh resultShape
	if spec.Result == nil {
		return sh, nil
	}
	if m := spec.Result.MaxBytes; m < 0 || m > api.MaxMCPResultBytes {
		return sh, fmt.Errorf("MCP server %s: %w: result.max_bytes %d is not between 1 and %d", spec.Name, ErrMCPDeclaration, m, api.MaxMCPResultBytes)
	}
	sh.maxBytes = spec.Result.MaxBytes
	for _, p := range spec.Result.Redact {
		rx, err := regexp.Compile(p)
		if err != nil {
			return sh, fmt.Errorf("MCP server %s: %w: result.redact pattern %q does not compile: %v", spec.Name, ErrMCPDeclaration, p, err)
		}
		sh.redact = append(sh.redact, rx)
	}
	return sh, nil
}

// apply redacts text, then caps it at a UTF-8 boundary with a note the model reads.
func (sh resultShape) apply(text string) string {
	for _, rx := range sh.redact {
		text = rx.ReplaceAllLiteralString(text, api.MCPRedacted)
	}
	if sh.maxBytes == 0 {
		if len(text) > MCPResultCap {
			cut := headUTF8(text, MCPResultCap)
			text = cut + fmt.Sprintf("\n[truncated: showing %d of %d bytes]", len(cut), len(text))
		}
		return text
	}
	if len(text) > sh.maxBytes {
		cut := headUTF8(text, sh.maxBytes)
		text = cut + fmt.Sprintf("\n[result cut at %d of %d bytes]", len(cut), len(text))
	}
	return text
}

func contentText(c mcp.Content) string {
	switch v := c.(type) {
	case mcp.TextContent:
		return v.Text
	case *mcp.TextContent:
		return v.Text
	case mcp.ImageContent:
		return binarySummary(v.MIMEType, v.Data)
	case *mcp.ImageContent:
		return binarySummary(v.MIMEType, v.Data)
	case mcp.AudioContent:
		return binarySummary(v.MIMEType, v.Data)
	case *mcp.AudioContent:
		return binarySummary(v.MIMEType, v.Data)
	case mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s]", v.Name, v.URI)
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s: %s]", v.Name, v.URI)
	case mcp.EmbeddedResource:
		return resourceText(v.Resource)
	case *mcp.EmbeddedResource:
		return resourceText(v.Resource)
	}
	return fmt.Sprintf("[%T content not shown]", c)
}

func resourceText(r mcp.ResourceContents) string {
	switch v := r.(type) {
	case mcp.TextResourceContents:
		return fmt.Sprintf("[resource %s]\n%s", v.URI, v.Text)
	case *mcp.TextResourceContents:
		return fmt.Sprintf("[resource %s]\n%s", v.URI, v.Text)
	case mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s: %s]", v.URI, strings.Trim(binarySummary(v.MIMEType, v.Blob), "[]"))
	case *mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s: %s]", v.URI, strings.Trim(binarySummary(v.MIMEType, v.Blob), "[]"))
	}
	return "[resource not shown]"
}

// binarySummary is "[image/png, 1234 bytes]" for base64 data.
func binarySummary(mime, b64 string) string {
	if mime == "" {
		mime = "binary"
	}
	n := base64.StdEncoding.DecodedLen(len(b64)) - strings.Count(b64[max(0, len(b64)-2):], "=")
	return fmt.Sprintf("[%s, %d bytes]", mime, n)
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.ToValidUTF8(string(w.buf), "")
}

// redactHandler keeps the client's secrets (which an OAuth refresh adds to) out of the log
// lines of the MCP library.
type redactHandler struct {
	slog.Handler
	secrets func() []string
}

func (h redactHandler) redact(s string) string {
	for _, secret := range h.secrets() {
		s = redact(s, secret)
	}
	return s
}

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	return slog.String(a.Key, h.redact(a.Value.Resolve().String()))
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return redactHandler{Handler: h.Handler.WithAttrs(out), secrets: h.secrets}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{Handler: h.Handler.WithGroup(name), secrets: h.secrets}
}
