// Package agents holds agent definitions and the built-in tools' contract: their names,
// capabilities, descriptions (embedded Markdown beside this file) and JSON schemas. It is
// pure data and validation, so workflow code, the worker and the config loader share one
// definition; the tools' implementations are activities.
package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// DefaultMaxTurns bounds an agent's model calls per prompt unless its definition says.
const DefaultMaxTurns = 25

// Spec is an agent definition, declared under `agents:` in the config or in Go. It
// travels in workflow history (the worker resolves a name to a Spec through an activity),
// so it holds no secrets: the model's API key stays with the worker.
type Spec struct {
	// Name addresses the agent (`starter agent NAME`); letters, digits, - and _.
	Name string `json:"name" mapstructure:"name" yaml:"name"`
	// Model overrides llm.model for this agent.
	Model string `json:"model,omitempty" mapstructure:"model" yaml:"model"`
	// LLM names the model endpoint (config llm.endpoints) the agent's model calls and
	// context summaries go to; empty: the endpoint under llm: itself ("default").
	LLM string `json:"llm,omitempty" mapstructure:"llm" yaml:"llm"`
	// ModelQueue is the task queue of the agent's model calls when its endpoint has a
	// request rate limit (api.ModelTaskQueue): the worker fills it when it resolves the
	// agent (not an agent's own key), so the run keeps it across replays.
	ModelQueue string `json:"model_queue,omitempty" mapstructure:"-" yaml:"-"`
	// Instructions start the system prompt.
	Instructions string `json:"instructions,omitempty" mapstructure:"instructions" yaml:"instructions"`
	// Permissions decide the agent's tool calls; the zero value is read_only.
	Permissions permissions.Policy `json:"permissions" mapstructure:"permissions" yaml:"permissions"`
	// Sandbox is where the tools act; empty means a local workspace owned by the run.
	Sandbox api.SandboxSpec `json:"sandbox" mapstructure:"sandbox" yaml:"sandbox"`
	// FetchAllow lists the hosts fetch may reach (subdomains included). Empty: no fetch.
	FetchAllow []string `json:"fetch_allow,omitempty" mapstructure:"fetch_allow" yaml:"fetch_allow"`
	// WebSearch offers the web_search tool (the worker's search backend, search.url),
	// when the permissions can allow the search capability.
	WebSearch bool `json:"web_search,omitempty" mapstructure:"web_search" yaml:"web_search"`
	// ToolConcurrency is how many tool calls of one model reply may run at once (calls
	// that need no approval; a gated call still waits for its own decision). 0 and 1: one
	// after another. Results reach the model in the order it asked for them.
	ToolConcurrency int `json:"tool_concurrency,omitempty" mapstructure:"tool_concurrency" yaml:"tool_concurrency"`
	// Plan offers the update_plan tool: the agent records its plan, which the run's
	// events and the session's stream show as a plan update.
	Plan bool `json:"plan,omitempty" mapstructure:"plan" yaml:"plan"`
	// Produces lists workspace files (globs allowed) recorded as artifacts after the agent
	// runs, also when it fails.
	Produces []string `json:"produces,omitempty" mapstructure:"produces" yaml:"produces"`
	// MaxTurns bounds model calls per prompt (default DefaultMaxTurns).
	MaxTurns int `json:"max_turns,omitempty" mapstructure:"max_turns" yaml:"max_turns"`
	// MCP servers whose tools the agent may use (through the same permission gate).
	MCP []api.MCPServerSpec `json:"mcp,omitempty" mapstructure:"mcp" yaml:"mcp"`
	// Skills names skills (folders under the worker's skills_path): their bodies join the
	// system prompt after the instructions and the sandbox's own, in this order, and their
	// files are copied into the sandbox under skills/<name>/ before the first turn.
	Skills []string `json:"skills,omitempty" mapstructure:"skills" yaml:"skills"`
	// ToolHooks names the tool hooks (registered in Go by a custom worker with
	// platform.ToolHook) that wrap each of the agent's tool calls, built-in and MCP, in
	// this order: before a call they may allow, deny or rewrite its arguments, after it
	// rewrite its result. They run on the worker that runs the call.
	ToolHooks []string `json:"tool_hooks,omitempty" mapstructure:"tool_hooks" yaml:"tool_hooks"`
	// SkillFiles is how skill files reach the sandbox: copy (default: every file is
	// written) or skip_same (a file the sandbox already holds with the same bytes, such as
	// one baked into the image, is left alone).
	SkillFiles string `json:"skill_files,omitempty" mapstructure:"skill_files" yaml:"skill_files"`
	// Requires is what the sandbox must provide (commands, versions, locale); it is
	// probed once before the first turn, and a sandbox that falls short fails the run
	// with every unmet item listed.
	Requires api.Requirements `json:"requires,omitzero" mapstructure:"requires" yaml:"requires"`
	// Context bounds what a model request carries: when the thread's estimated tokens
	// would pass MaxTokens, its oldest turns are summarised (see api.ContextPolicy). Zero:
	// no bound, and a thread that outgrows the model fails with a message naming this
	// setting.
	Context api.ContextPolicy `json:"context,omitzero" mapstructure:"context" yaml:"context"`
	// RetryFor is how long a model call's transient failures (HTTP 408, 429, 5xx, the
	// provider unreachable) are retried before the run fails, e.g. "6h". Zero: the worker's
	// llm.retry_for (default 6h). It is recorded with the spec, so a run keeps the budget it
	// started with.
	RetryFor api.Duration `json:"retry_for,omitempty" mapstructure:"retry_for" yaml:"retry_for"`
	// Notify are the receivers of this agent's approval notifications: the worker fills
	// them from approvals.notify when it resolves the agent (not an agent's own key). Only
	// URLs and the names of the environment variables holding the secrets: the spec is
	// recorded in history.
	Notify []api.NotifyTarget `json:"notify,omitempty" mapstructure:"-" yaml:"-"`
	// Budget bounds the tokens and cost the agent spends before a human decides whether
	// it goes on (see api.Budget). Zero: no bound.
	Budget api.Budget `json:"budget,omitzero" mapstructure:"budget" yaml:"budget"`
	// OutputSchema, when set, is a JSON Schema the agent's final reply must validate
	// against: the run's result is then the validated JSON value, not text. The config
	// may give it inline or as {file: path} (relative to the config file); config loading
	// reads the file, so the recorded spec always holds the schema itself. Runs only:
	// a session's replies stay text.
	OutputSchema map[string]any `json:"output_schema,omitempty" mapstructure:"output_schema" yaml:"output_schema"`
	// OutputRetries is how many times a final reply that is not valid JSON, or does not
	// validate against OutputSchema, is sent back to the model with the errors for a
	// corrected one before the run fails (nil: DefaultOutputRetries).
	OutputRetries *int `json:"output_retries,omitempty" mapstructure:"output_retries" yaml:"output_retries"`
	// Delegates names other agents of the config offered to this one as tools
	// (DelegateToolName: agent_<name>, input {"prompt": string}); a call runs the named agent
	// as a child AgentRun and its final answer is the tool's result. Config loading refuses
	// an unknown name and a cycle.
	Delegates []string `json:"delegates,omitempty" mapstructure:"delegates" yaml:"delegates"`
	// MaxDepth bounds how deep delegation goes from a run of this agent: a run at that
	// depth (the top run is at 0) is offered no delegate tool. Zero: the worker's
	// (worker.max_depth), else DefaultMaxDepth. The worker that resolves the agent records
	// the smaller of the two in the spec (WithMaxDepth), so a run keeps the bound it
	// started with.
	MaxDepth int `json:"max_depth,omitempty" mapstructure:"max_depth" yaml:"max_depth"`
	// A2A names remote Agent2Agent agents offered to this one as tools (A2AToolName:
	// a2a_<name>, input {"message": string, "context_id"?, "task_id"?}); a call sends the
	// message to the remote and its answer is the tool's result. Capability a2a.
	A2A []api.A2ARemote `json:"a2a,omitempty" mapstructure:"a2a" yaml:"a2a"`
	// Loop, when set, replaces the model call of each turn with a step of a pluggable
	// loop: an external harness program run in the run's sandbox (type harness, see
	// docs/harness-protocol.md) or a Go loop the worker registers (type go). Everything
	// else of the built-in loop (permission gate, approvals, budgets, max_turns, events,
	// durable tool calls) applies unchanged.
	Loop *api.LoopSpec `json:"loop,omitempty" mapstructure:"loop" yaml:"loop"`
}

// DefaultMaxDepth is Spec.MaxDepth when neither the agent nor the worker sets it.
const DefaultMaxDepth = 3

// DelegatePrefix starts the name of every delegate tool.
const DelegatePrefix = "agent_"

// DelegateToolName is the tool that runs agent as a delegate: agent_<name>.
func DelegateToolName(agent string) string { return DelegatePrefix + agent }

// Depth is MaxDepth or the default.
func (s Spec) Depth() int {
	if s.MaxDepth > 0 {
		return s.MaxDepth
	}
	return DefaultMaxDepth
}

// WithMaxDepth is s bounded by a worker's max_depth (0: none set, DefaultMaxDepth): an
// agent without its own bound takes the worker's, and one with a deeper bound is cut to
// it. The smaller wins: each level of delegation is a child run with its own sandbox and
// approvals, and the worker's operator bounds how far a definition may fan out.
func (s Spec) WithMaxDepth(worker int) Spec {
	if worker <= 0 {
		worker = DefaultMaxDepth
	}
	if s.MaxDepth <= 0 || s.MaxDepth > worker {
		s.MaxDepth = worker
	}
	return s
}

// DelegateTool is the tool that runs agent as a child run. It has capability agent, so
// the delegating agent's permissions decide it like any other privileged call.
func DelegateTool(agent string) Tool {
	return Tool{Name: DelegateToolName(agent), Capability: permissions.CapAgent,
		Description: strings.ReplaceAll(describe("delegate"), "{{agent}}", agent),
		Parameters:  json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"the whole task for the agent: it sees nothing of this conversation"}},"required":["prompt"],"additionalProperties":false}`)}
}

// DefaultOutputRetries is Spec.OutputRetries when unset.
const DefaultOutputRetries = 2

// MaxOutputRetries bounds Spec.OutputRetries: each retry is a model call.
const MaxOutputRetries = 10

// MaxOutputSchemaBytes bounds Spec.OutputSchema as JSON: the schema travels in the
// recorded spec and joins every model call's instructions.
const MaxOutputSchemaBytes = 64 << 10

// OutputRetryCount is OutputRetries or the default.
func (s Spec) OutputRetryCount() int {
	if s.OutputRetries != nil {
		return *s.OutputRetries
	}
	return DefaultOutputRetries
}

// MaxWarm bounds sandbox.warm: each pooled container holds its memory and processes while
// it waits for a run. The Docker tier refuses more (docker.MaxWarm) too.
const MaxWarm = 64

func specTypeName(t string) string {
	if t == "" {
		return api.SandboxLocal
	}
	return t
}

// Turns is MaxTurns or the default.
func (s Spec) Turns() int {
	if s.MaxTurns > 0 {
		return s.MaxTurns
	}
	return DefaultMaxTurns
}

// Validate reports every problem of the definition, each naming its field.
func (s Spec) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if s.Name == "" {
		bad("name", "is empty")
	} else if strings.Trim(s.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		bad("name", "%q may hold only letters, digits, - and _", s.Name)
	}
	if err := s.Permissions.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("permissions.%w", err))
	}
	switch s.Sandbox.Type {
	case "", api.SandboxLocal, api.SandboxVirtual, api.SandboxDocker, api.SandboxBubblewrap:
	default:
		bad("sandbox.type", "%q is not one of local, virtual, bubblewrap, docker", s.Sandbox.Type)
	}
	if s.Sandbox.Type == api.SandboxBubblewrap && s.Sandbox.CPUs != 0 {
		bad("sandbox.cpus", "a bubblewrap sandbox has no CPU limit (memory and pids_limit apply)")
	}
	if s.Sandbox.Type != api.SandboxDocker && (s.Sandbox.Image != "" || s.Sandbox.Network != "" || len(s.Sandbox.RWBinds) > 0 || len(s.Sandbox.ROBinds) > 0 || s.Sandbox.Runtime != "") {
		bad("sandbox.type", "image, network, binds and runtime apply to docker sandboxes only (type %q)", s.Sandbox.Type)
	}
	// Limits and identity a tier cannot apply are refused, not silently dropped
	// (hardening round two, item 13): the local and virtual tiers run as the worker with no
	// limits, and bubblewrap runs every command as the worker's user with no capabilities.
	if t := s.Sandbox.Type; t != api.SandboxDocker {
		var ignored []string
		if t != api.SandboxBubblewrap {
			if len(s.Sandbox.Env) > 0 {
				ignored = append(ignored, "env")
			}
			if s.Sandbox.Memory != "" {
				ignored = append(ignored, "memory")
			}
			if s.Sandbox.PidsLimit != 0 {
				ignored = append(ignored, "pids_limit")
			}
			if s.Sandbox.CPUs != 0 {
				ignored = append(ignored, "cpus")
			}
		}
		if s.Sandbox.User != "" {
			ignored = append(ignored, "user")
		}
		if len(s.Sandbox.CapAdd) > 0 {
			ignored = append(ignored, "cap_add")
		}
		if s.Sandbox.Workdir != "" {
			ignored = append(ignored, "workdir")
		}
		if s.Sandbox.ReadonlyRootfs != nil {
			ignored = append(ignored, "readonly_rootfs")
		}
		if len(ignored) > 0 {
			bad("sandbox."+ignored[0], "a %s sandbox cannot apply %s (they apply to docker sandboxes; bubblewrap takes env, memory and pids_limit)", specTypeName(t), strings.Join(ignored, ", "))
		}
	}
	if w := s.Sandbox.Warm; w != 0 && s.Sandbox.Type != api.SandboxDocker {
		bad("sandbox.warm", "warm pools are of docker sandboxes only (type %q)", specTypeName(s.Sandbox.Type))
	} else if w < 0 || w > MaxWarm {
		bad("sandbox.warm", "%d is not between 0 and %d", w, MaxWarm)
	}
	if e := s.Sandbox.Egress; e != nil {
		switch t := s.Sandbox.Type; {
		case t == api.SandboxBubblewrap:
		case t == api.SandboxDocker:
			bad("sandbox.egress", "the egress proxy is not available on docker sandboxes yet; use type bubblewrap, or network: for the whole network")
		default:
			bad("sandbox.egress", "a %s sandbox cannot apply egress: its commands run with the worker's own network (use type bubblewrap)", specTypeName(t))
		}
		if n := s.Sandbox.Network; n != "" && n != "none" {
			bad("sandbox.network", "%q together with egress: egress keeps the sandbox off every network but the proxy's, and neither wins; leave network out", n)
		}
		errs = append(errs, e.Validate("sandbox.egress")...)
	}
	if s.Sandbox.Type == api.SandboxDocker && s.Sandbox.Dir != "" {
		bad("sandbox.dir", "a docker sandbox has no host directory; mount one with rw_binds or ro_binds")
	}
	if s.Sandbox.Type == api.SandboxVirtual && s.Sandbox.Dir != "" {
		bad("sandbox.dir", "a virtual sandbox has no directory")
	}
	if d := s.Sandbox.Dir; d != "" && path.Clean(d) == "/" {
		bad("sandbox.dir", "%q is the root of the file system: the agent would write anywhere the worker can; give it a folder of its own", d)
	}
	if p := s.Sandbox.Pool; p != "" {
		if err := api.ValidatePoolName(p); err != nil {
			bad("sandbox.pool", "%v", err)
		} else if s.Sandbox.Type == api.SandboxVirtual {
			// A virtual sandbox is memory of the worker that runs the agent's loop; a
			// pool names the machines a sandbox lives on, which only a local directory
			// or a container has.
			bad("sandbox.pool", "a virtual sandbox lives in the worker's memory and cannot run on a pool's hosts; use type local or docker")
		}
	}
	for i, h := range s.FetchAllow {
		if h == "" || strings.ContainsAny(h, "/:*@ ") {
			bad(fmt.Sprintf("fetch_allow[%d]", i), "%q is not a host name (no scheme, port, path or wildcard; subdomains are included)", h)
		}
	}
	hooks := map[string]bool{}
	for i, h := range s.ToolHooks {
		switch {
		case strings.TrimSpace(h) == "":
			bad(fmt.Sprintf("tool_hooks[%d]", i), "is empty; name a hook the worker registers (platform.ToolHook)")
		case hooks[h]:
			bad(fmt.Sprintf("tool_hooks[%d]", i), "%q is named twice", h)
		}
		hooks[h] = true
	}
	for i, p := range s.Produces {
		if p == "" || path.IsAbs(p) || strings.HasPrefix(path.Clean(p), "..") {
			bad(fmt.Sprintf("produces[%d]", i), "%q must be a path inside the workspace", p)
		}
	}
	names := map[string]bool{}
	for i, m := range s.MCP {
		field := fmt.Sprintf("mcp[%d]", i)
		switch {
		case m.Name == "":
			bad(field+".name", "is empty")
		case strings.Trim(m.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "":
			bad(field+".name", "%q may hold only letters, digits and - (it prefixes tool names: %s%stool)", m.Name, m.Name, api.MCPToolSeparator)
		case names[m.Name]:
			bad(field+".name", "%q is declared twice", m.Name)
		}
		names[m.Name] = true
		switch m.Transport {
		case api.MCPStdio:
			if m.Command == "" {
				bad(field+".command", "required for transport stdio")
			}
		case api.MCPSSE, api.MCPHTTP:
			if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(field+".url", "want an http(s) URL for transport %s", m.Transport)
			}
		default:
			bad(field+".transport", "%q is not one of stdio, sse, http", m.Transport)
		}
		for k := range m.Headers {
			if strings.EqualFold(k, "Authorization") {
				bad(field+".headers", "do not put credentials in headers (they would be stored in workflow history); name the variable holding the token in token_env")
			}
		}
		if m.OAuth != nil {
			validateOAuth(field+".oauth", m, bad)
		}
		validateMCPLimits(field, m, bad)
	}
	validateA2A(s.A2A, bad)
	seenSkill := map[string]bool{}
	for i, name := range s.Skills {
		field := fmt.Sprintf("skills[%d]", i)
		if err := api.ValidateSkillName(name); err != nil {
			bad(field, "%v", err)
		} else if seenSkill[name] {
			bad(field, "%q is listed twice", name)
		}
		seenSkill[name] = true
	}
	switch s.SkillFiles {
	case "", api.SkillFilesCopy, api.SkillFilesSkipSame:
		if s.SkillFiles != "" && len(s.Skills) == 0 {
			bad("skill_files", "is set but the agent has no skills")
		}
	default:
		bad("skill_files", "%q is not one of %s, %s", s.SkillFiles, api.SkillFilesCopy, api.SkillFilesSkipSame)
	}
	validateRequires(s.Requires, s.Sandbox.Type, bad)
	if s.ToolConcurrency < 0 || s.ToolConcurrency > MaxToolConcurrency {
		bad("tool_concurrency", "%d is not between 1 and %d (0 or 1: one call at a time)", s.ToolConcurrency, MaxToolConcurrency)
	}
	if s.LLM != "" && strings.Trim(s.LLM, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		bad("llm", "%q is not an endpoint name (letters, digits, - and _; the names under llm.endpoints)", s.LLM)
	}
	if r := s.OutputRetries; r != nil && (*r < 0 || *r > MaxOutputRetries) {
		bad("output_retries", "%d is not between 0 and %d", *r, MaxOutputRetries)
	}
	if r := s.OutputRetries; r != nil && s.OutputSchema == nil {
		bad("output_retries", "applies only with an output_schema")
	}
	if s.OutputSchema != nil {
		if b, err := json.Marshal(s.OutputSchema); err != nil {
			bad("output_schema", "is not JSON: %v", err)
		} else if len(b) > MaxOutputSchemaBytes {
			bad("output_schema", "is %d bytes as JSON, over the %d a schema may take (it joins every model call)", len(b), MaxOutputSchemaBytes)
		}
		if f, ok := s.OutputSchema["file"]; ok && len(s.OutputSchema) == 1 {
			bad("output_schema", "{file: %v} is read by config loading only; give a Go-defined agent its schema inline", f)
		}
	}
	if s.MaxTurns < 0 {
		bad("max_turns", "%d is negative", s.MaxTurns)
	}
	if s.RetryFor != 0 && time.Duration(s.RetryFor) < time.Minute {
		bad("retry_for", "%s is under a minute (want a budget such as 6h; leave it out for llm.retry_for)", time.Duration(s.RetryFor))
	}
	switch c := s.Context; {
	case c.MaxTokens < 0:
		bad("context.max_tokens", "%d is negative", c.MaxTokens)
	case c.MaxTokens > 0 && c.MaxTokens < api.MinContextTokens:
		bad("context.max_tokens", "%d is too small to hold a summary and a turn (at least %d)", c.MaxTokens, api.MinContextTokens)
	case c.MaxTokens > api.MaxContextTokens:
		bad("context.max_tokens", "%d is above any model's context window (at most %d)", c.MaxTokens, api.MaxContextTokens)
	case c.KeepRecent < 0:
		bad("context.keep_recent", "%d is negative", c.KeepRecent)
	case c.KeepRecent > api.MaxKeepRecent:
		bad("context.keep_recent", "%d messages is more than a context holds (at most %d)", c.KeepRecent, api.MaxKeepRecent)
	case c.KeepRecent > 0 && c.MaxTokens == 0:
		bad("context.keep_recent", "is set but context.max_tokens is not")
	}
	if s.Loop != nil {
		validateLoop(*s.Loop, s.Sandbox.Type, bad)
	}
	for _, msg := range s.Budget.Validate() {
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateMCPLimits checks a server's result: block and timeout (field is "mcp[i]"):
// every redact pattern must compile here, at config load, not at the first call.
func validateMCPLimits(field string, m api.MCPServerSpec, bad func(field, format string, a ...any)) {
	if t := time.Duration(m.Timeout); t != 0 && (t < api.MinMCPTimeout || t > api.MaxMCPTimeout) {
		bad(field+".timeout", "server %s: %s is not between %s and %s", m.Name, t, api.MinMCPTimeout, api.MaxMCPTimeout)
	}
	r := m.Result
	if r == nil {
		return
	}
	if r.MaxBytes < 0 || r.MaxBytes > api.MaxMCPResultBytes || (r.MaxBytes == 0 && len(r.Redact) == 0) {
		bad(field+".result.max_bytes", "server %s: %d is not between 1 and %d (64 MiB)", m.Name, r.MaxBytes, api.MaxMCPResultBytes)
	}
	for i, p := range r.Redact {
		if p == "" {
			bad(fmt.Sprintf("%s.result.redact[%d]", field, i), "server %s: the pattern is empty", m.Name)
		} else if _, err := regexp.Compile(p); err != nil {
			bad(fmt.Sprintf("%s.result.redact[%d]", field, i), "server %s: pattern %q does not compile: %v", m.Name, p, err)
		}
	}
}

// validateOAuth checks a server's oauth: block (field is "mcp[i].oauth").
func validateOAuth(field string, m api.MCPServerSpec, bad func(field, format string, a ...any)) {
	o := m.OAuth
	if m.Transport != api.MCPHTTP && m.Transport != api.MCPSSE {
		bad(field, "only for transport http or sse")
	}
	if m.TokenEnv != "" {
		bad(field, "token_env and oauth are exclusive (oauth tokens come from the worker's credential file)")
	}
	if strings.TrimSpace(o.ClientID) == "" {
		bad(field+".client_id", "is empty (want the client id registered with the authorization server)")
	}
	for i, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\"\\") {
			bad(fmt.Sprintf("%s.scopes[%d]", field, i), "%q is not a scope (no spaces or quotes)", sc)
		}
	}
	if o.AuthorizationServer != "" {
		if u, err := url.Parse(o.AuthorizationServer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad(field+".authorization_server", "want the issuer URL of the authorization server (http(s), no query or fragment)")
		}
	}
	if o.ClientSecretEnv != "" && !envName.MatchString(o.ClientSecretEnv) {
		bad(field+".client_secret_env", "want the name of an environment variable (the secret itself never goes in config)")
	}
}

// validateLoop checks an agent's loop: block.
func validateLoop(l api.LoopSpec, sandboxType string, bad func(field, format string, a ...any)) {
	switch l.Type {
	case api.LoopHarness:
		if len(l.Command) == 0 {
			bad("loop.command", "is empty; give the harness's argv, e.g. [./bin/harness]")
		}
		for i, w := range l.Command {
			if strings.ContainsRune(w, 0) || (i == 0 && strings.TrimSpace(w) == "") {
				bad(fmt.Sprintf("loop.command[%d]", i), "%q is not a word of a command", w)
			}
		}
		if l.Name != "" {
			bad("loop.name", "names a Go loop; a harness loop runs loop.command (use type go for a registered loop)")
		}
		switch sandboxType {
		case api.SandboxVirtual:
			bad("loop.type", "a harness runs as a process in the run's sandbox, and a virtual sandbox runs no processes; use sandbox type local or bubblewrap")
		case api.SandboxDocker:
			bad("loop.type", "a harness cannot run in a docker sandbox yet (its binary would have to be in the image and commands there have no stdin); use sandbox type local or bubblewrap")
		}
	case api.LoopGo:
		if strings.TrimSpace(l.Name) == "" {
			bad("loop.name", "is empty; name the Go loop the worker registers (platform.WithLoop)")
		}
		if len(l.Command) > 0 {
			bad("loop.command", "applies to type harness only (a Go loop runs in the worker)")
		}
	case "":
		bad("loop.type", "is empty; want %s (a program speaking docs/harness-protocol.md) or %s (a registered Go loop)", api.LoopHarness, api.LoopGo)
	default:
		bad("loop.type", "%q is not one of %s, %s", l.Type, api.LoopHarness, api.LoopGo)
	}
	if t := time.Duration(l.Timeout); t < 0 || t > api.MaxHarnessTimeout {
		bad("loop.timeout", "%s is not between 0 (the default, %s) and %s", t, api.DefaultHarnessTimeout, api.MaxHarnessTimeout)
	}
}
