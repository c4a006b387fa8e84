// Package config turns a YAML file, NEXO_* environment variables and command-line flags
// into one typed Config. It is the only importer of viper, and it uses its own viper
// instance, never the global one. Load never logs; Validate names the bad field.
//
// # Sources and precedence
//
// A flag beats an environment variable, which beats the config file, which beats the
// default (see Defaults). Every key below can come from any of the four:
//
//	key                      environment variable             default
//	temporal.address         NEXO_TEMPORAL_ADDRESS            127.0.0.1:7233 (127.0.0.1:base)
//	temporal.namespace       NEXO_TEMPORAL_NAMESPACE          default
//	temporal.task_queue      NEXO_TEMPORAL_TASK_QUEUE         nexo
//	temporal.api_key_env     NEXO_TEMPORAL_API_KEY_ENV        "" (no API key)
//	temporal.tls.enabled     NEXO_TEMPORAL_TLS_ENABLED        false
//	temporal.tls.cert_file   NEXO_TEMPORAL_TLS_CERT_FILE      ""
//	temporal.tls.key_file    NEXO_TEMPORAL_TLS_KEY_FILE       ""
//	temporal.tls.ca_file     NEXO_TEMPORAL_TLS_CA_FILE        ""
//	temporal.tls.server_name NEXO_TEMPORAL_TLS_SERVER_NAME    ""
//	temporal.profile         NEXO_TEMPORAL_PROFILE            "" (TEMPORAL_PROFILE, else "default"; "off": read none)
//	worker.activity_heartbeat_timeout NEXO_WORKER_ACTIVITY_HEARTBEAT_TIMEOUT 10s (at least 1s)
//	worker.registry_ttl      NEXO_WORKER_REGISTRY_TTL         1m (3s to 24h; the worker announces itself every third of it)
//	worker.max_depth         NEXO_WORKER_MAX_DEPTH            3 (1 to 10; how deep delegates go: an agent's max_depth may lower it, not raise it)
//	port_base                NEXO_PORT_BASE                   7233 (moves the keys below marked "base"; 1-64534)
//	dev.ip                   NEXO_DEV_IP                      127.0.0.1
//	dev.frontend_port        NEXO_DEV_FRONTEND_PORT           7233 (base)
//	dev.ui_port              NEXO_DEV_UI_PORT                 8233 (base+1000; 0 disables the UI)
//	dev.db_path              NEXO_DEV_DB_PATH                 .nexo/temporal.db
//	artifacts.url            NEXO_ARTIFACTS_URL               file://.nexo/artifacts
//	artifacts.inline_limit   NEXO_ARTIFACTS_INLINE_LIMIT      32768
//	artifacts.cache_bytes    NEXO_ARTIFACTS_CACHE_BYTES       67108864 (0: no cache)
//	artifacts.retention      NEXO_ARTIFACTS_RETENTION         0 (starter store gc keeps every stored record; a duration lets records of runs closed longer ago go)
//	payloads.offload_threshold NEXO_PAYLOADS_OFFLOAD_THRESHOLD 262144 (256 KiB)
//	sandbox.root             NEXO_SANDBOX_ROOT                .nexo/workspaces
//	sandbox.shell_timeout    NEXO_SANDBOX_SHELL_TIMEOUT       2m
//	sandbox.park_every       NEXO_SANDBOX_PARK_EVERY          5m (0: snapshot only at suspends)
//	sandbox.host_timeout     NEXO_SANDBOX_HOST_TIMEOUT        30s
//	log.level                NEXO_LOG_LEVEL                   info
//	log.format               NEXO_LOG_FORMAT                  text
//	llm.base_url             NEXO_LLM_BASE_URL                "" (required with agents)
//	llm.model                NEXO_LLM_MODEL                   ""
//	llm.api_key_env          NEXO_LLM_API_KEY_ENV             OPENAI_API_KEY
//	llm.timeout              NEXO_LLM_TIMEOUT                 5m
//	llm.retry_for            NEXO_LLM_RETRY_FOR               6h
//	llm.limits.requests_per_minute NEXO_LLM_LIMITS_REQUESTS_PER_MINUTE 0 (no limit)
//	llm.limits.tokens_per_minute   NEXO_LLM_LIMITS_TOKENS_PER_MINUTE   0 (no limit; a limiter workflow per endpoint books every call's tokens)
//	llm.endpoints            NEXO_LLM_ENDPOINTS               none (a map name → {base_url, model, api_key_env, timeout, prices, limits}; set it in the file)
//	llm.prices               NEXO_LLM_PRICES                  none (a map {<model>: {input_per_mtok, output_per_mtok}}; set it in the file)
//	agents                   NEXO_AGENTS                      none (a list; set it in the file)
//	skills_path              NEXO_SKILLS_PATH                 skills
//	mcp.credentials_file     NEXO_MCP_CREDENTIALS_FILE        .nexo/mcp-credentials.json
//	search.url               NEXO_SEARCH_URL                  "" (no web_search backend)
//	search.api_key_env       NEXO_SEARCH_API_KEY_ENV          ""
//	gateway.addr             NEXO_GATEWAY_ADDR                127.0.0.1:8234 (127.0.0.1:base+1001)
//	gateway.max_body_bytes   NEXO_GATEWAY_MAX_BODY_BYTES      1048576
//	gateway.tokens           NEXO_GATEWAY_TOKENS              none (a list; set it in the file)
//	gateway.codec_origins    NEXO_GATEWAY_CODEC_ORIGINS       none (comma-separated in the environment)
//	gateway.temporal_ui      NEXO_GATEWAY_TEMPORAL_UI         "" (no links; worker --dev: its Web UI)
//	gateway.url              NEXO_GATEWAY_URL                 "" (http://<gateway.addr> when it is a loopback address)
//	approvals.notify         NEXO_APPROVALS_NOTIFY            none (a list of {url, secret_env}; set it in the file)
//	telemetry.capture_content NEXO_TELEMETRY_CAPTURE_CONTENT  false (no prompts, completions or tool args on spans)
//	metrics.addr             NEXO_METRICS_ADDR                "" (no /metrics endpoint)
//	metrics.public           NEXO_METRICS_PUBLIC              false (metrics.addr on every interface refused)
//
// port_base moves every key marked "base" that is not set itself (in the file, the
// environment or a flag): NEXO_PORT_BASE=17233 gives 17233, 18233 and 18234, and the
// starter dials 127.0.0.1:17233. A temporal.address it gives counts as set, so a Temporal
// client profile does not override it.
//
// The environment variable of a key is NEXO_ followed by the key in upper case with "."
// replaced by "_". An empty variable counts as unset.
//
// The config file is, in order: LoadOptions.File, the --config flag, NEXO_CONFIG, then
// ./nexo.yaml if it exists. Its format follows its extension (.yaml, .yml, .json, .toml;
// none means YAML). A key in the file that no field reads is an error, so a typo
// ("adress") fails loudly instead of being ignored.
//
// Flags: BindFlags defines the flags the binaries share (--config, --address, --namespace,
// --task-queue, --log-level). Besides those, Load honours any flag in the FlagSet whose
// name is a key above ("temporal.tls.enabled", "dev.ui_port"), so a binary can expose more
// keys without touching this package. Only flags the user set count: a flag's own default
// never overrides the file or the environment; Defaults is the one source of defaults.
//
// Relative paths (db_path, root, file:// artifact URLs, TLS files) are kept as given; the
// binaries resolve them against their working directory.
//
// # Adding a section
//
// Add a field with a mapstructure tag to Config (and its defaults to Defaults). Every
// leaf of the new struct becomes a key with an environment variable and flag name of its
// own, and the file may then contain it; nothing else in Load changes. Map and slice
// fields (agents:, mcp servers) are read from the file as a whole; their inner keys are
// checked against the element struct.
package config

import (
	"net"
	"os"
	"strings"
	"time"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// DefaultFile is the config file Load reads from the working directory when no file is
// named.
const DefaultFile = "nexo.yaml"

// Defaults returns the configuration used for every key that no file, environment
// variable or flag sets.
func Defaults() Config {
	return Config{
		Temporal: Temporal{
			Address:   "127.0.0.1:7233",
			Namespace: api.DefaultNamespace,
			TaskQueue: api.DefaultTaskQueue,
		},
		Worker: Worker{
			ActivityHeartbeatTimeout: 10 * time.Second,
			RegistryTTL:              time.Minute,
			MaxDepth:                 agents.DefaultMaxDepth,
		},
		Dev: Dev{
			IP:           "127.0.0.1",
			FrontendPort: 7233,
			UIPort:       8233,
			DBPath:       ".nexo/temporal.db",
		},
		Artifacts: Artifacts{
			URL:         "file://.nexo/artifacts",
			InlineLimit: 32768,
			CacheBytes:  64 << 20,
		},
		Payloads: Payloads{
			OffloadThreshold: 256 << 10,
		},
		Sandbox: Sandbox{
			Root:         ".nexo/workspaces",
			ShellTimeout: 2 * time.Minute,
			ParkEvery:    5 * time.Minute,
			HostTimeout:  30 * time.Second,
		},
		Log: Log{
			Level:  "info",
			Format: "text",
		},
		LLM: LLM{
			APIKeyEnv: "OPENAI_API_KEY",
			Timeout:   5 * time.Minute,
			RetryFor:  6 * time.Hour,
		},
		Gateway: Gateway{
			Addr:         "127.0.0.1:8234",
			MaxBodyBytes: 1 << 20,
		},
		SkillsPath: "skills",
		MCP:        MCP{CredentialsFile: ".nexo/mcp-credentials.json"},
		PortBase:   DefaultPortBase,
	}
}

// Config is everything a worker or starter needs. Every key has a default (see
// Defaults), so an environment override such as NEXO_TEMPORAL_ADDRESS always reaches it.
type Config struct {
	// notes are Load's warnings (Warnings, config/strict.go).
	notes []string
	// portBased are the keys port_base set (FromPortBase, config/ports.go).
	portBased []string

	Temporal  Temporal  `mapstructure:"temporal"`
	Worker    Worker    `mapstructure:"worker"`
	Dev       Dev       `mapstructure:"dev"`
	Artifacts Artifacts `mapstructure:"artifacts"`
	// Payloads is Temporal's External Storage: where payloads too large for history go.
	Payloads Payloads `mapstructure:"payloads"`
	Sandbox  Sandbox  `mapstructure:"sandbox"`
	Log      Log      `mapstructure:"log"`
	LLM      LLM      `mapstructure:"llm"`
	// Agents are the agent definitions this worker can run (`starter agent NAME`).
	Agents []agents.Spec `mapstructure:"agents"`
	// Gateway is the HTTP API and web page (`starter serve`, `worker --dev`).
	Gateway Gateway `mapstructure:"gateway"`
	// SkillsPath is the folder holding skills, one folder each (<name>/SKILL.md), that
	// agents name in skills: (default "skills", relative to the working directory).
	SkillsPath string `mapstructure:"skills_path"`
	// Search is the web_search tool's backend.
	Search Search `mapstructure:"search"`
	// MCP holds what the worker and the starter share about MCP servers.
	MCP MCP `mapstructure:"mcp"`
	// Approvals configures what happens around a call that waits for a human.
	Approvals Approvals `mapstructure:"approvals"`
	// Telemetry is what traces may carry (config/telemetry.go); OTEL_* says where they go.
	Telemetry Telemetry `mapstructure:"telemetry"`
	// Metrics is the worker's Prometheus endpoint (config/telemetry.go).
	Metrics Metrics `mapstructure:"metrics"`
	// PortBase moves the local platform's three ports at once (config/ports.go): the
	// embedded frontend (dev.frontend_port) to it, the Web UI (dev.ui_port) to base+1000,
	// the gateway (gateway.addr) to base+1001, and temporal.address to 127.0.0.1:base,
	// each unless set itself. Default 7233: 7233, 8233, 8234.
	PortBase int `mapstructure:"port_base"`
}

// Approvals configures approvals beyond the agents' permissions.
type Approvals struct {
	// Notify are the receivers of a signed HTTP POST for every requested, escalated and
	// decided approval of every agent this worker resolves. Each names the environment
	// variable holding its HMAC secret (secret_env), never the secret.
	Notify []api.NotifyTarget `mapstructure:"notify"`
}

// MCP configures what is common to the agents' MCP servers.
type MCP struct {
	// CredentialsFile holds the OAuth tokens of remote MCP servers: written by `starter
	// mcp login`, read and refreshed by the worker, mode 0600, never in history. Workers
	// on other machines need the same file (shared or copied).
	CredentialsFile string `mapstructure:"credentials_file"`
}

// Search configures the web_search backend: a search service with a SearXNG-style JSON
// API (GET <url>?q=...&format=json). Agents opt in with web_search: true.
type Search struct {
	// URL of the search endpoint, e.g. http://127.0.0.1:8888/search. Empty: no backend.
	URL string `mapstructure:"url"`
	// APIKeyEnv names the environment variable holding a bearer token for it, if any.
	APIKeyEnv string `mapstructure:"api_key_env"`
}

// Gateway configures the HTTP API and web page served by `starter serve` and `worker --dev`.
type Gateway struct {
	// Addr is host:port to listen on (default 127.0.0.1:8234). A non-loopback address is
	// refused unless Tokens are configured.
	Addr string `mapstructure:"addr"`
	// MaxBodyBytes caps a request body (default 1 MiB); a larger one gets 413.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// Tokens are the bearer tokens the gateway accepts. None: the gateway is open, which
	// it allows on a loopback address only.
	Tokens []GatewayToken `mapstructure:"tokens"`
	// CodecOrigins are the browser origins (scheme://host:port) of Temporal Web UIs
	// allowed to call the codec endpoint /codec, e.g. https://temporal-ui.example.com.
	// `worker --dev` adds its embedded UI's origin itself.
	CodecOrigins []string `mapstructure:"codec_origins"`
	// TemporalUI is the base URL of the Temporal Web UI (e.g. http://127.0.0.1:8233): the
	// web page links each run to its page there. `worker --dev` sets its embedded UI.
	TemporalUI string `mapstructure:"temporal_ui"`
	// URL is the base URL users open the web page at (https://nexo.example.com): each run
	// started links back to its page there from the Temporal Web UI (PageURL).
	URL string `mapstructure:"url"`
}

// PageURL is the base URL of the web page, without a trailing slash: URL when set, else
// http://<Addr> when Addr is a loopback address (the page is then reachable only there,
// at exactly that address); "" when neither says where users reach it (a wildcard
// address behind a proxy: set URL).
func (g Gateway) PageURL() string {
	if g.URL != "" {
		return strings.TrimRight(g.URL, "/")
	}
	host, _, err := net.SplitHostPort(g.Addr)
	if err != nil {
		return ""
	}
	if loopbackHost(host) {
		return "http://" + g.Addr
	}
	return ""
}

// GatewayToken is one bearer token of the gateway. The secret itself is never a config
// value: TokenEnv names the environment variable that holds it.
type GatewayToken struct {
	// Name identifies the token in decisions ("approved by ci") and logs; never secret.
	Name string `mapstructure:"name"`
	// TokenEnv names the environment variable holding the secret.
	TokenEnv string `mapstructure:"token_env"`
	// Scopes the token grants: read, operate, approve.
	Scopes []string `mapstructure:"scopes"`
	// Agents and Workflows limit the token to the runs and sessions of these agents and
	// workflow types: names or path.Match globs ("support-*"). Absent means all; a run
	// whose agent cannot be known is seen by tokens without Agents only.
	Agents    []string `mapstructure:"agents"`
	Workflows []string `mapstructure:"workflows"`
}

// Secret reads the token's secret from the environment variable TokenEnv names; "" when
// it is unset. getenv nil means os.Getenv.
func (t GatewayToken) Secret(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv(t.TokenEnv)
}

// LLM configures the model endpoint agents call: any OpenAI-compatible chat completions
// API (OpenAI, Ollama, vLLM, ...).
type LLM struct {
	// BaseURL of the API, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1.
	BaseURL string `mapstructure:"base_url"`
	// Model used unless an agent names its own.
	Model string `mapstructure:"model"`
	// APIKeyEnv names the environment variable holding the API key (default
	// OPENAI_API_KEY); the key itself is never a config value. Unset is fine for local
	// servers that need no key.
	APIKeyEnv string `mapstructure:"api_key_env"`
	// Timeout bounds one model request (default 5m).
	Timeout time.Duration `mapstructure:"timeout"`
	// RetryFor is how long a model call's transient failures (HTTP 408, 429, 5xx, the
	// provider unreachable) are retried before the run fails (default 6h), for agents
	// whose definition sets no retry_for. Other 4xx fail at once.
	RetryFor time.Duration `mapstructure:"retry_for"`
	// Limits are this (default) endpoint's provider rate limits (see Limits).
	Limits Limits `mapstructure:"limits"`
	// Endpoints are further model endpoints by name (see Endpoint); an agent picks one
	// with `llm: <name>`. These keys (llm.base_url, ...) are the endpoint "default".
	Endpoints map[string]Endpoint `mapstructure:"endpoints"`
	// Prices are what each model costs (USD per million tokens), by model name as the
	// agents and llm.model name it: the worker prices every model call with them (usage
	// and cost in the run record, budgets' max_cost). A model with no price has its
	// tokens counted and no cost. See prices.go.
	Prices map[string]api.ModelPrice `mapstructure:"prices"`
}

// APIKey reads the model API key from the environment variable LLM.APIKeyEnv names.
func (l LLM) APIKey(getenv func(string) string) string {
	if l.APIKeyEnv == "" {
		return ""
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv(l.APIKeyEnv)
}

// Worker is what a worker decides for the runs it executes, beyond where it polls.
type Worker struct {
	// ActivityHeartbeatTimeout caps the heartbeat timeout of every activity the worker's
	// runs schedule (default 10s): an activity on a worker that died is retried elsewhere
	// this long after its last heartbeat. Not part of any history, so workers may differ.
	ActivityHeartbeatTimeout time.Duration `mapstructure:"activity_heartbeat_timeout"`
	// RegistryTTL is how long the task queue's registry keeps this worker after each
	// announcement (default 1m); the worker announces itself every third of it, so a
	// worker killed without a word drops out of the registry within RegistryTTL.
	RegistryTTL time.Duration `mapstructure:"registry_ttl"`
	// MaxDepth bounds how deep delegation (agents' delegates) goes in the runs this worker
	// resolves an agent for, from 1 to MaxDelegateDepth (default agents.DefaultMaxDepth):
	// it is the max_depth of an agent that sets none, and a ceiling an agent's own
	// max_depth may lower but not raise (config loading refuses one above it). The smaller
	// wins because each level is a child run with its own sandbox and approvals: the
	// operator of the workers bounds what a definition may fan out to.
	MaxDepth int `mapstructure:"max_depth"`
}

// Temporal says how to reach the Temporal frontend.
type Temporal struct {
	// Address is host:port of the frontend (default 127.0.0.1:7233).
	Address string `mapstructure:"address"`
	// Namespace (default "default").
	Namespace string `mapstructure:"namespace"`
	// TaskQueue the worker polls and the starter targets (default "nexo").
	TaskQueue string `mapstructure:"task_queue"`
	TLS       TLS    `mapstructure:"tls"`
	// APIKeyEnv names the environment variable holding an API key (Temporal Cloud). The
	// key itself is never a config value, so it cannot end up in a file or a log.
	APIKeyEnv string `mapstructure:"api_key_env"`
	// Profile is the Temporal client profile (the `temporal` CLI's TOML file, see package
	// connect) whose settings fill the keys above that are not given: "" is
	// TEMPORAL_PROFILE, else "default"; "off" reads no profile and no TEMPORAL_* variable.
	Profile string `mapstructure:"profile"`

	// givenAtDefault holds the keys above that were set (file, NEXO_*, flag) to their
	// default value, the one case Given cannot tell from the value; see sources.go.
	givenAtDefault map[string]bool
	// sources names, for each of the keys above that Load saw given, where it came from
	// (flag, NEXO_* variable or the config file); see Source.
	sources map[string]string
	// noProfile: the connection is fixed (the embedded server of `worker --dev`).
	noProfile bool
}

// TLS configures the client's TLS. Enabled with no files uses the system roots.
type TLS struct {
	Enabled    bool   `mapstructure:"enabled"`
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	CAFile     string `mapstructure:"ca_file"`
	ServerName string `mapstructure:"server_name"`
}

// Dev configures the embedded Temporal server started by `worker --dev`.
type Dev struct {
	// IP the frontend and UI bind to (default 127.0.0.1).
	IP string `mapstructure:"ip"`
	// FrontendPort (default 7233).
	FrontendPort int `mapstructure:"frontend_port"`
	// UIPort (default 8233); 0 disables the Web UI.
	UIPort int `mapstructure:"ui_port"`
	// DBPath is the SQLite file (default .nexo/temporal.db) so runs survive a restart.
	DBPath string `mapstructure:"db_path"`
}

// Artifacts configures the artifact store.
type Artifacts struct {
	// URL of the store: a directory path, or a file://, mem://, s3://, gs:// or azblob://
	// URL (default file://.nexo/artifacts). Every worker, the starter and the gateway of a
	// deployment must name the same store.
	URL string `mapstructure:"url"`
	// InlineLimit is the largest artifact (bytes) whose content is also kept inline in
	// the run record (default 32768).
	InlineLimit int `mapstructure:"inline_limit"`
	// CacheBytes bounds each process's in-memory cache of blob reads (default 64 MiB;
	// 0 turns the cache off).
	CacheBytes int64 `mapstructure:"cache_bytes"`
	// Retention is how long starter store gc keeps the stored record of a closed run, and
	// what only that record references (thread, snapshots, artifacts), counted from the
	// run's close. 0 (the default) keeps every stored record; what open runs and the runs
	// still inside the namespace's Temporal retention reference is kept either way, unless
	// they closed longer ago than a non-zero Retention.
	Retention time.Duration `mapstructure:"retention"`
}

// Payloads configures Temporal's External Storage on every client and worker: a payload
// of OffloadThreshold bytes or more (activity input or result, signal, update, query
// result, workflow or continue-as-new input) is stored in the blob store at artifacts.url
// and history keeps a reference to it.
type Payloads struct {
	// OffloadThreshold in bytes of the serialized payload (default 262144, 256 KiB).
	OffloadThreshold int `mapstructure:"offload_threshold"`
}

// Sandbox configures sandboxes the worker creates.
type Sandbox struct {
	// Root holds the per-run workspaces of local sandboxes (default .nexo/workspaces).
	Root string `mapstructure:"root"`
	// ShellTimeout bounds a command unless the caller gives less (default 2m).
	ShellTimeout time.Duration `mapstructure:"shell_timeout"`
	// ParkEvery: a working run snapshots its workspace to the artifact store after a
	// write_file or shell call once its last snapshot is older than this (default 5m; 0:
	// only at suspends). What a lost host held since the last snapshot is lost.
	ParkEvery time.Duration `mapstructure:"park_every"`
	// HostTimeout: a sandbox activity no worker of the run's host picks up within this long
	// means the host is gone, and the run moves to another (default 30s).
	HostTimeout time.Duration `mapstructure:"host_timeout"`
}

// Log configures the binaries' slog output.
type Log struct {
	// Level is debug, info, warn or error (default info).
	Level string `mapstructure:"level"`
	// Format is text or json (default text).
	Format string `mapstructure:"format"`
}

// APIKey returns the Temporal API key from the environment variable named by APIKeyEnv,
// or "" when APIKeyEnv is empty or the variable is unset. getenv is usually os.Getenv;
// nil means os.Getenv.
func (t Temporal) APIKey(getenv func(string) string) string {
	if t.APIKeyEnv == "" {
		return ""
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv(t.APIKeyEnv)
}

// APIKey is shorthand for c.Temporal.APIKey(getenv).
func (c Config) APIKey(getenv func(string) string) string {
	return c.Temporal.APIKey(getenv)
}

// LocalDir returns the directory of a local artifact store: URL itself when it is a plain
// path, the rest after "file://" otherwise (so "file://.nexo/artifacts" is the relative
// directory .nexo/artifacts, and "file:///var/nexo" is /var/nexo). ok is false for any
// other scheme, which names a remote store.
func (a Artifacts) LocalDir() (dir string, ok bool) {
	if rest, found := strings.CutPrefix(a.URL, "file://"); found {
		return rest, true
	}
	if strings.Contains(a.URL, "://") {
		return "", false
	}
	return a.URL, true
}
