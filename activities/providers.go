package activities

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/mcpauth"
)

// The activities are providers, each owning what it works with and registering its own
// activities under their api names:
//   - Model: model calls, threads, compaction, token bookings, cost, and agent resolution
//     (llm.go, endpoints.go, thread.go, compact.go, stream.go, tokenlimit.go, cost.go);
//   - MCP: the worker's MCP clients (its pool, OAuth tokens), closed with it (mcp.go);
//   - A2A: calls of remote Agent2Agent agents with a2a-go's client (a2a.go);
//   - Tools: the built-in tools, fetch, web search and skills (tools.go, skills.go);
//   - Host: the run's sandbox, its snapshots, park and restore, artifacts and stored
//     records (activities.go, hostq.go, snapshot.go, park.go, record.go);
//   - Notifier: approval notifications (notify.go) and their outbox (outbox.go).
//
// New builds them all from Deps; a worker registers each on the task queues whose
// activities it serves (platform composes them), with the KeepAlive interceptor in its
// options so every attempt heartbeats while it runs (heartbeat.go).

// Registry is the part of a Temporal worker the providers register on.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Model makes model calls and keeps their threads. Construct with New.
type Model struct {
	store       artifacts.Store
	sandboxes   *Sandboxes // the run sandbox's instructions go into the system prompt
	llm         *LLM
	agents      map[string]agents.Spec
	threads     *threadCache
	out         outputs
	notify      []api.NotifyTarget // approvals.notify, given to every resolved agent
	maxDepth    int                // worker.max_depth, bounding every resolved agent's (0: the default)
	endpoints   map[string]*LLM    // llm.endpoints by name (the default endpoint is llm)
	modelQueues map[string]string  // endpoint name → task queue of its rate-limited model calls
	tokens      TokenLimiter       // books the calls of endpoints with tokens_per_minute (tokenlimit.go)
	tokenWait   func(endpoint string, waited time.Duration)
	// signalStream sends a chunk of a call streamed by signal (runs recorded before live
	// text): signalChunk; tests set their own.
	signalStream func(ctx context.Context, workflowID string, chunk api.StreamChunk) error
}

// MCP calls the tools of MCP servers. It owns its pool of clients: Close stops them.
type MCP struct {
	pool   *mcpPool
	agents map[string]agents.Spec // to name the agent in a login hint
	out    outputs
	hooks  ToolHooks // the worker's tool hooks, run around each call (toolhook.go)
}

// Tools runs the built-in tools, fetch, web search and skills against the run's sandbox.
type Tools struct {
	store        artifacts.Store
	sandboxes    *Sandboxes
	host         *Host // snapshots after a call that can change the workspace
	fetcher      *Fetcher
	searcher     *Searcher
	shellTimeout time.Duration
	skillsPath   string
	out          outputs
	hooks        ToolHooks // the worker's tool hooks, run around each call (toolhook.go)
	// model rebuilds and stores the threads of loop steps (harness.go), as for a model call.
	model *Model
	loops Loops // the worker's Go loops (harness.go)
}

// Host serves the run's sandbox as its host: files, artifacts, snapshots, park and
// restore, the host-queue claim, and stored records.
type Host struct {
	store       artifacts.Store
	sandboxes   *Sandboxes
	inlineLimit int
	host        *api.SandboxHost // the host queue this worker polls (hostq.go); nil: none
}

// Notifier sends approval notifications.
type Notifier struct {
	store     artifacts.Store // the stored notifications the outbox references (outbox.go)
	outbox    NotifyOutbox    // nil: runs on this worker cannot hand notifications over
	notify    []api.NotifyTarget
	pageURL   string // the web page's base URL, for notifications' links
	lookupEnv func(string) (string, bool)
}

// outputs stores what is too large for history (tool outputs, reasoning) as blobs with a
// preview in its place; each provider that returns such text holds one.
type outputs struct{ store artifacts.Store }

// Deps are what the activities work with.
type Deps struct {
	Store     artifacts.Store
	Sandboxes *Sandboxes
	// InlineLimit is the largest artifact whose content is also kept in the run record.
	InlineLimit int
	// LLM is the model endpoint; nil means agents cannot run on this worker.
	LLM *LLM
	// Agents are the configured agent definitions, by name.
	Agents []agents.Spec
	// Fetcher serves the fetch tool; nil means the default (public addresses only).
	Fetcher *Fetcher
	// Searcher serves the web_search tool; nil means no search backend on this worker.
	Searcher *Searcher
	// ShellTimeout caps any command a tool runs (default 2m).
	ShellTimeout time.Duration
	// SkillsPath is the folder of the skills agents name (default "skills").
	SkillsPath string
	// MCPCredentialsFile holds the OAuth tokens of MCP servers declared with oauth:
	// (config mcp.credentials_file; written by `starter mcp login`, refreshed here).
	MCPCredentialsFile string
	// MCPIdleTimeout is how long an unused MCP client lives (0: DefaultMCPIdleTimeout).
	MCPIdleTimeout time.Duration
	// LookupEnv resolves the environment variables secrets are named by (an MCP server's
	// token_env): the worker takes its secrets out of the environment at start and
	// answers for them from memory (internal/secrets). nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Notify are the receivers of approval notifications (config approvals.notify), and
	// PageURL the web page's base URL their links point at (config gateway.url; "" for none).
	Notify  []api.NotifyTarget
	PageURL string
	// Outbox hands a run's notifications to its receivers' notifier workflows (platform's,
	// through the Temporal client); nil: runs that notify cannot hand them over here.
	Outbox NotifyOutbox
	// Endpoints are the named model endpoints (config llm.endpoints) by name; LLM is the
	// endpoint "default".
	Endpoints map[string]*LLM
	// ModelQueues maps an endpoint with a request rate limit to the task queue of its
	// model calls (api.ModelTaskQueue); resolved agents carry it (agents.Spec.ModelQueue).
	ModelQueues map[string]string
	// Tokens books the model calls of endpoints with limits.tokens_per_minute with their
	// limiter workflow; nil: such an endpoint's calls fail (retryably) on this worker.
	Tokens TokenLimiter
	// TokenWait, when set, is told how long each call under a token limit waited for its
	// booking (the nexo_model_token_wait_seconds histogram).
	TokenWait func(endpoint string, waited time.Duration)
	// MaxDepth is the worker's bound on delegation depth (config worker.max_depth):
	// every agent it resolves records the smaller of it and its own max_depth
	// (agents.Spec.WithMaxDepth). 0: agents.DefaultMaxDepth.
	MaxDepth int
	// ToolHooks are the worker's tool hooks by name (platform.ToolHook): the tool calls
	// of an agent run the ones its tool_hooks name. A call naming one not here fails.
	ToolHooks ToolHooks
	// Loops are the worker's Go loops by name (platform.WithLoop): an agent with
	// `loop: {type: go, name: N}` runs its turns through the one named N.
	Loops Loops
}

// Activities are the providers of one worker, built together from Deps because some
// lean on others (Tools snapshots through Host; Sandboxes restore through Host).
type Activities struct {
	Model    *Model
	MCP      *MCP
	A2A      *A2A
	Tools    *Tools
	Host     *Host
	Notifier *Notifier
}

// New returns the providers built from d.
func New(d Deps) *Activities {
	byName := map[string]agents.Spec{}
	for _, s := range d.Agents {
		byName[s.Name] = s
	}
	out := outputs{store: d.Store}
	host := &Host{store: d.Store, sandboxes: d.Sandboxes, inlineLimit: d.InlineLimit}
	if d.Sandboxes != nil {
		d.Sandboxes.restoreVirtual = host.restoreVirtual // a restarted worker's virtual sandboxes (hostq.go)
		d.Sandboxes.restoreBase = host.restoreBase       // a sandbox made anew from the run's snapshot (snapshot.go)
	}
	tools := &Tools{store: d.Store, sandboxes: d.Sandboxes, host: host, fetcher: d.Fetcher, searcher: d.Searcher,
		shellTimeout: d.ShellTimeout, skillsPath: d.SkillsPath, out: out, hooks: d.ToolHooks, loops: d.Loops}
	if tools.fetcher == nil {
		tools.fetcher = NewFetcher()
	}
	if tools.shellTimeout <= 0 {
		tools.shellTimeout = 2 * time.Minute
	}
	if tools.skillsPath == "" {
		tools.skillsPath = "skills"
	}
	idle := d.MCPIdleTimeout
	if idle <= 0 {
		idle = DefaultMCPIdleTimeout
	}
	mcp := &MCP{pool: newMCPPool(idle), agents: byName, out: out, hooks: d.ToolHooks}
	mcp.pool.creds = mcpauth.File{Path: d.MCPCredentialsFile}
	mcp.pool.loginHint = mcp.mcpLoginHint
	if d.LookupEnv != nil {
		mcp.pool.lookupEnv = d.LookupEnv
	}
	model := &Model{store: d.Store, sandboxes: d.Sandboxes, llm: d.LLM, agents: byName, threads: newThreadCache(), out: out,
		notify: d.Notify, maxDepth: d.MaxDepth, endpoints: d.Endpoints, modelQueues: d.ModelQueues, tokens: d.Tokens, tokenWait: d.TokenWait,
		signalStream: signalChunk}
	tools.model = model
	return &Activities{
		Model:    model,
		MCP:      mcp,
		A2A:      &A2A{out: out, lookupEnv: d.LookupEnv},
		Tools:    tools,
		Host:     host,
		Notifier: &Notifier{store: d.Store, outbox: d.Outbox, notify: d.Notify, pageURL: strings.TrimRight(d.PageURL, "/"), lookupEnv: d.LookupEnv},
	}
}

// Register registers every activity of every provider under its api name: what a
// worker's shared task queue serves.
func (a *Activities) Register(r Registry) {
	a.Model.Register(r)
	a.MCP.Register(r)
	a.A2A.Register(r)
	a.Tools.Register(r)
	a.Host.Register(r)
	a.Notifier.Register(r)
}

// RegisterSandbox registers only the activities a run sends to its host queue
// (workflows/hostq.go): tool calls, files, artifacts, skill files, snapshots and
// restores. A sandbox host (`worker --sandbox-host`) polls its host queue with these
// alone: it makes no model call, no MCP call and resolves no agent, so it needs none of
// their configuration or secrets.
func (a *Activities) RegisterSandbox(r Registry) {
	a.Tools.RegisterSandbox(r)
	a.Host.RegisterSandbox(r)
}

// Close releases what the providers hold on the worker: every MCP client (stdio servers
// are stopped and reaped). The worker calls it once its Temporal worker has stopped; MCP
// activities run after it fail with ErrMCPClosed.
func (a *Activities) Close() error { return a.MCP.Close() }
