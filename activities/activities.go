package activities

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// Activities are the worker-side implementations. Construct with New.
type Activities struct {
	store        artifacts.Store
	sandboxes    *Sandboxes
	inlineLimit  int
	llm          *LLM
	agents       map[string]agents.Spec
	fetcher      *Fetcher
	searcher     *Searcher
	shellTimeout time.Duration
	skillsPath   string
	threads      *threadCache
	// mcpCredentials is the path of the OAuth credential file of MCP servers.
	mcpCredentials string
	lookupEnv      func(string) (string, bool) // nil: os.LookupEnv
	notify         []api.NotifyTarget          // approvals.notify, given to every resolved agent
	pageURL        string                      // the web page's base URL, for notifications' links
	endpoints      map[string]*LLM             // llm.endpoints by name (the default endpoint is llm)
	modelQueues    map[string]string           // endpoint name → task queue of its rate-limited model calls
	host           *api.SandboxHost            // the host queue this worker polls (hostq.go); nil: none
	tokens         TokenLimiter                // books the calls of endpoints with tokens_per_minute (tokenlimit.go)
	tokenWait      func(endpoint string, waited time.Duration)
}

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
	// LookupEnv resolves the environment variables secrets are named by (an MCP server's
	// token_env): the worker takes its secrets out of the environment at start and
	// answers for them from memory (internal/secrets). nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Notify are the receivers of approval notifications (config approvals.notify), and
	// PageURL the web page's base URL their links point at (config gateway.url; "" for none).
	Notify  []api.NotifyTarget
	PageURL string
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
}

// New returns the activities.
func New(d Deps) *Activities {
	a := &Activities{store: d.Store, sandboxes: d.Sandboxes, inlineLimit: d.InlineLimit, llm: d.LLM,
		agents: map[string]agents.Spec{}, fetcher: d.Fetcher, searcher: d.Searcher, shellTimeout: d.ShellTimeout, skillsPath: d.SkillsPath,
		threads: newThreadCache(), mcpCredentials: d.MCPCredentialsFile, lookupEnv: d.LookupEnv,
		notify: d.Notify, pageURL: strings.TrimRight(d.PageURL, "/"), endpoints: d.Endpoints, modelQueues: d.ModelQueues,
		tokens: d.Tokens, tokenWait: d.TokenWait}
	for _, s := range d.Agents {
		a.agents[s.Name] = s
	}
	if d.Sandboxes != nil {
		d.Sandboxes.restoreVirtual = a.restoreVirtual // a restarted worker's virtual sandboxes (hostq.go)
		d.Sandboxes.restoreBase = a.restoreBase       // a sandbox made anew from the run's snapshot (snapshot.go)
	}
	if a.fetcher == nil {
		a.fetcher = NewFetcher()
	}
	if a.shellTimeout <= 0 {
		a.shellTimeout = 2 * time.Minute
	}
	if a.skillsPath == "" {
		a.skillsPath = "skills"
	}
	return a
}

// Registry is the part of a Temporal worker Register needs.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers every activity under its api name, each kept alive by heartbeats
// while it runs (keepAliveRegistry).
func (a *Activities) Register(r Registry) {
	r = keepAliveRegistry{r}
	for name, fn := range map[string]any{
		api.ActivityWriteArtifact:    a.WriteArtifact,
		api.ActivityStageFiles:       a.StageFiles,
		api.ActivityReleaseSandbox:   a.ReleaseSandbox,
		api.ActivityParkSandbox:      a.ParkSandbox,
		api.ActivityRestoreSandbox:   a.RestoreSandbox,
		api.ActivityResolveAgent:     a.ResolveAgent,
		api.ActivityCompleteChat:     a.CompleteChat,
		api.ActivityCompactThread:    a.CompactThread,
		api.ActivityRunTool:          a.RunTool,
		api.ActivityCollectOutputs:   a.CollectOutputs,
		api.ActivityRestoreArtifacts: a.RestoreArtifacts,
		api.ActivityListMCPTools:     a.ListMCPTools,
		api.ActivityCallMCPTool:      a.CallMCPTool,
		api.ActivityCloseMCP:         a.CloseMCP,
		api.ActivityStoreRecord:      a.StoreRecord,
		api.ActivityNotifyApproval:   a.NotifyApproval,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	a.registerSkills(r)
	a.registerHost(r)
}

// MaxArtifactBytes bounds an artifact read from a sandbox file (it is held in memory).
const MaxArtifactBytes = api.MaxArtifactBytes

// WriteArtifact stores an artifact's bytes and returns its metadata, with the content
// inline when it is at most the inline limit (base64 when it is not UTF-8).
func (a *Activities) WriteArtifact(ctx context.Context, req api.WriteArtifactRequest) (api.Artifact, error) {
	body := req.Content
	if req.Path != "" {
		sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
		if err != nil {
			return api.Artifact{}, classify(fmt.Errorf("artifact %s: %w", req.Name, err))
		}
		// The file is read whole into the worker's memory: refuse one that would not fit
		// before reading it, rather than letting it take the worker down.
		if fi, err := sb.Stat(ctx, req.Path); err == nil && fi.Size > MaxArtifactBytes {
			return api.Artifact{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("artifact %s: %s is %d bytes, over the %d an artifact may hold", req.Name, req.Path, fi.Size, MaxArtifactBytes),
				api.ErrTypeTooLarge, nil)
		}
		body, err = sb.Read(ctx, req.Path)
		if err != nil {
			return api.Artifact{}, classify(fmt.Errorf("artifact %s: read %s from the run's sandbox: %w", req.Name, req.Path, err))
		}
	}
	if err := a.store.Put(ctx, req.RunID, req.Name, body); err != nil {
		return api.Artifact{}, fmt.Errorf("write artifact %s of run %s: %w", req.Name, req.RunID, err)
	}
	sum := sha256.Sum256(body)
	meta := api.Artifact{
		Name:   req.Name,
		At:     time.Now().UTC(),
		Size:   int64(len(body)),
		SHA256: hex.EncodeToString(sum[:]),
	}
	text := utf8.Valid(body)
	if !text {
		meta.Encoding = api.EncodingBase64
	}
	if len(body) <= a.inlineLimit {
		content := string(body)
		if !text {
			content = base64.StdEncoding.EncodeToString(body)
		}
		meta.Content = &content
	}
	return meta, nil
}

// StageFiles writes files into the run's sandbox.
func (a *Activities) StageFiles(ctx context.Context, req api.StageFilesRequest) (api.StageFilesResult, error) {
	sb, _, err := a.sandboxes.OpenFrom(ctx, req.RunID, req.Sandbox, req.Base)
	if err != nil {
		return api.StageFilesResult{}, classify(fmt.Errorf("stage files: %w", err))
	}
	var res api.StageFilesResult
	for _, f := range req.Files {
		p, err := sb.Write(ctx, f.Path, f.Content)
		if err != nil {
			return api.StageFilesResult{}, classify(fmt.Errorf("stage %s: %w", f.Path, err))
		}
		res.Paths = append(res.Paths, p)
	}
	if req.Snapshot && snapshotEligible(req.Sandbox) {
		ref, err := a.snapshotWorkspace(ctx, req.RunID, req.Sandbox, sb)
		if err != nil {
			return api.StageFilesResult{}, classifyArchive(fmt.Errorf("stage files: snapshot the workspace: %w", err))
		}
		res.Snapshot = &ref
	}
	return res, nil
}

// ReleaseSandbox closes the run's sandbox and removes it when the run owns it.
func (a *Activities) ReleaseSandbox(ctx context.Context, req api.ReleaseSandboxRequest) error {
	return a.sandboxes.Release(ctx, req.RunID, req.Sandbox)
}

// classify turns errors that retrying cannot fix into non-retryable application errors.
func classify(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrEscape):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeEscape, err)
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, artifacts.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeNotFound, err)
	case errors.Is(err, ErrSandboxUnavailable), errors.Is(err, docker.ErrImageNotFound), errors.Is(err, docker.ErrInvalidOptions),
		errors.Is(err, sandbox.ErrNotRegular): // a FIFO stays a FIFO: retrying cannot help
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, err)
	}
	return err
}
