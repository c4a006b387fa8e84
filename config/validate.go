package config

import (
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/netguard"

	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MinRetention is the shortest non-zero artifacts.retention.
const MinRetention = time.Hour

// MaxInlineLimit caps artifacts.inline_limit. An inline artifact travels in the run record
// (a query result) base64-encoded, so 1 MiB becomes ~1.4 MB, which still fits under
// Temporal's 2 MB payload limit with room for the rest of the record.
const MaxInlineLimit = 1 << 20

// artifactSchemes are the URL schemes of artifacts.url, the ones artifacts.Open accepts
// (artifacts.Schemes; a test keeps the two lists equal without config linking the blob
// drivers). A store in a bucket names the bucket: s3://<bucket>.
var (
	artifactSchemes       = []string{"file", "mem", "s3", "gs", "azblob"}
	artifactBucketSchemes = []string{"s3", "gs", "azblob"}
)

// Bounds of payloads.offload_threshold: below 1 KiB nearly every payload would make a trip
// to the store; at 2 MiB a payload just under it is one Temporal already refuses.
const (
	MinOffloadThreshold = 1 << 10
	MaxOffloadThreshold = 2 << 20
)

// Bounds of worker.registry_ttl: under 3 s the announcements (every third of it) would be
// a steady load on the registry; over a day a killed worker would count for longer than
// the registry's entries of workers older than the rule.
const (
	MinRegistryTTL = 3 * time.Second
	MaxRegistryTTL = 24 * time.Hour
)

// Accepted values of log.level and log.format.
var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// Bounds of gateway.max_body_bytes. A run's input over payloads.offload_threshold goes to
// the blob store rather than to Temporal, so its 2 MB limit no longer bounds a body; the
// gateway still holds a whole body in memory, so the cap stays modest.
const (
	MinBodyBytes = 1 << 10
	MaxBodyBytes = 64 << 20
)

// tokenName matches a gateway token name: it is shown as who decided an approval.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// envVarName matches a POSIX environment variable name.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// FieldError is one invalid field: its config key, the value found, and what was wanted.
type FieldError struct {
	// Field is the config key, e.g. "temporal.address".
	Field string
	// Value is the offending value; nil when the problem is an absence.
	Value any
	// Problem says what is wrong or wanted, e.g. "want host:port".
	Problem string
}

func (e *FieldError) Error() string {
	switch v := e.Value.(type) {
	case nil:
		return fmt.Sprintf("%s: %s", e.Field, e.Problem)
	case string:
		return fmt.Sprintf("%s %q: %s", e.Field, v, e.Problem)
	default:
		return fmt.Sprintf("%s %v: %s", e.Field, v, e.Problem)
	}
}

// Validate checks every field and returns all problems at once (errors.Join of
// *FieldError), or nil. It does not touch the file system: TLS files and paths are
// checked by whoever opens them.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, value any, problem string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: value, Problem: fmt.Sprintf(problem, args...)})
	}

	// temporal
	t := c.Temporal
	if err := checkHostPort(t.Address); err != "" {
		bad("temporal.address", t.Address, "%s", err)
	}
	if strings.TrimSpace(t.Namespace) == "" {
		bad("temporal.namespace", t.Namespace, "must not be empty")
	}
	if strings.TrimSpace(t.TaskQueue) == "" {
		bad("temporal.task_queue", t.TaskQueue, "must not be empty")
	}
	if t.APIKeyEnv != "" && !envVarName.MatchString(t.APIKeyEnv) {
		bad("temporal.api_key_env", t.APIKeyEnv,
			"want the name of an environment variable, such as TEMPORAL_API_KEY (the key itself never goes in config)")
	}
	tls := t.TLS
	if tls.CertFile != "" && tls.KeyFile == "" {
		bad("temporal.tls.key_file", nil, "required when temporal.tls.cert_file is set")
	}
	if tls.KeyFile != "" && tls.CertFile == "" {
		bad("temporal.tls.cert_file", nil, "required when temporal.tls.key_file is set")
	}
	if !tls.Enabled && (tls.CertFile != "" || tls.KeyFile != "" || tls.CAFile != "" || tls.ServerName != "") {
		bad("temporal.tls.enabled", false, "cert_file, key_file, ca_file or server_name is set; set enabled: true or remove them")
	}

	// port_base, before the ports it moves: a bad base moved none of them
	if c.PortBase < 1 || c.PortBase > MaxPortBase {
		bad(PortBaseKey, c.PortBase, "want 1-%d: the gateway takes base+%d, which must be a port too (set by %s or %s)",
			MaxPortBase, GatewayPortOffset, PortBaseKey, PortBaseEnv)
	}

	// dev
	d := c.Dev
	if net.ParseIP(d.IP) == nil {
		bad("dev.ip", d.IP, "want an IP address, such as 127.0.0.1")
	}
	if d.FrontendPort < 1 || d.FrontendPort > 65535 {
		bad("dev.frontend_port", d.FrontendPort, "want a port in 1-65535")
	}
	switch {
	case d.UIPort < 0 || d.UIPort > 65535:
		bad("dev.ui_port", d.UIPort, "want a port in 1-65535, or 0 to disable the UI")
	case d.UIPort != 0 && d.UIPort == d.FrontendPort:
		bad("dev.ui_port", d.UIPort, "same as dev.frontend_port")
	}

	// artifacts
	a := c.Artifacts
	if problem := a.urlProblem(); problem != "" {
		bad("artifacts.url", a.URL, "%s", problem)
	}
	if a.CacheBytes < 0 {
		bad("artifacts.cache_bytes", a.CacheBytes, "must not be negative (0 turns the cache off)")
	}
	if a.Retention < 0 {
		bad("artifacts.retention", a.Retention, "want 0 (keep every stored record) or a positive duration, such as 720h")
	} else if a.Retention > 0 && a.Retention < MinRetention {
		bad("artifacts.retention", a.Retention, "want 0 (keep every stored record) or at least %s: a shorter one would collect the files of runs that closed minutes ago", MinRetention)
	}
	if a.InlineLimit < 0 {
		bad("artifacts.inline_limit", a.InlineLimit, "must not be negative (0 keeps no content inline)")
	} else if a.InlineLimit > MaxInlineLimit {
		bad("artifacts.inline_limit", a.InlineLimit,
			"want at most %d: inline content travels in the run record, which must stay under Temporal's 2 MB payload limit", MaxInlineLimit)
	}

	// payloads
	if th := c.Payloads.OffloadThreshold; th < MinOffloadThreshold || th > MaxOffloadThreshold {
		bad("payloads.offload_threshold", th,
			"want %d to %d bytes: a payload under the threshold stays in history, where Temporal refuses one over 2 MB", MinOffloadThreshold, MaxOffloadThreshold)
	}

	// worker
	if c.Worker.ActivityHeartbeatTimeout < time.Second {
		bad("worker.activity_heartbeat_timeout", c.Worker.ActivityHeartbeatTimeout, "want at least 1s (the worker heartbeats every 200ms)")
	}
	if t := c.Worker.RegistryTTL; t < MinRegistryTTL || t > MaxRegistryTTL || t%time.Second != 0 {
		bad("worker.registry_ttl", t, "want whole seconds from %s to %s (the worker announces itself every third of it; a killed worker counts that long)", MinRegistryTTL, MaxRegistryTTL)
	}

	// sandbox
	s := c.Sandbox
	if strings.TrimSpace(s.Root) == "" {
		bad("sandbox.root", s.Root, "must not be empty")
	}
	if s.ShellTimeout < time.Second {
		bad("sandbox.shell_timeout", s.ShellTimeout, "want at least 1s")
	}
	if s.ParkEvery < 0 {
		bad("sandbox.park_every", s.ParkEvery, "want 0 (only at suspends) or more")
	}
	if s.HostTimeout < time.Second {
		bad("sandbox.host_timeout", s.HostTimeout, "want at least 1s")
	}

	// llm
	l := c.LLM
	if l.BaseURL != "" {
		if u, err := url.Parse(l.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("llm.base_url", l.BaseURL, "want an http(s) URL such as http://127.0.0.1:11434/v1")
		}
	}
	if l.APIKeyEnv != "" && !envVarName.MatchString(l.APIKeyEnv) {
		bad("llm.api_key_env", l.APIKeyEnv,
			"want the name of an environment variable, such as OPENAI_API_KEY (the key itself never goes in config)")
	}
	if l.RetryFor < time.Minute {
		bad("llm.retry_for", l.RetryFor, "want at least 1m (a budget such as 6h)")
	}
	if l.Timeout < time.Second {
		bad("llm.timeout", l.Timeout, "want at least 1s")
	}
	errs = append(errs, c.validateEndpoints()...)
	validatePrices("llm.prices", l.Prices, bad)
	validateBudgetPrices(c, bad)

	// agents
	seen := map[string]bool{}
	for i, ag := range c.Agents {
		field := fmt.Sprintf("agents[%d]", i)
		if ag.Name != "" {
			field = fmt.Sprintf("agents[%s]", ag.Name)
		}
		if err := ag.Validate(); err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, fmt.Errorf("%s.%w", field, e))
			}
		}
		if ag.OutputSchema != nil {
			if err := checkOutputSchema(ag.OutputSchema); err != nil {
				errs = append(errs, fmt.Errorf("%s.output_schema: %w", field, err))
			}
		}
		if seen[ag.Name] {
			bad(field+".name", ag.Name, "defined twice")
		}
		seen[ag.Name] = true
	}
	if strings.TrimSpace(c.SkillsPath) == "" {
		bad("skills_path", c.SkillsPath, "must not be empty (default: skills)")
	}
	if strings.TrimSpace(c.MCP.CredentialsFile) == "" {
		bad("mcp.credentials_file", c.MCP.CredentialsFile, "must not be empty (default: .nexo/mcp-credentials.json)")
	}
	if c.Search.URL != "" {
		if u, err := url.Parse(c.Search.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("search.url", c.Search.URL, "want an http(s) URL such as http://127.0.0.1:8888/search")
		}
	}
	if c.Search.APIKeyEnv != "" && !envVarName.MatchString(c.Search.APIKeyEnv) {
		bad("search.api_key_env", c.Search.APIKeyEnv, "want the name of an environment variable (the key itself never goes in config)")
	}
	errs = append(errs, c.validateDelegates()...)
	for i, ag := range c.Agents {
		if ag.WebSearch && c.Search.URL == "" {
			bad(fmt.Sprintf("agents[%s].web_search", orIndex(ag.Name, i)), true, "needs a search backend: set search.url")
		}
	}
	if c.usesDefaultEndpoint() && l.BaseURL == "" {
		bad("llm.base_url", l.BaseURL, "required when agents are configured (an agent without llm: calls the default endpoint)")
	}

	// gateway
	g := c.Gateway
	if err := checkHostPort(g.Addr); err != "" {
		bad("gateway.addr", g.Addr, "%s", err)
	}
	if g.MaxBodyBytes < MinBodyBytes || g.MaxBodyBytes > MaxBodyBytes {
		bad("gateway.max_body_bytes", g.MaxBodyBytes, "want %d to %d bytes", MinBodyBytes, MaxBodyBytes)
	}
	for i, o := range g.CodecOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			bad(fmt.Sprintf("gateway.codec_origins[%d]", i), o, "want a browser origin: scheme://host[:port], such as http://127.0.0.1:8233")
		}
	}
	if g.TemporalUI != "" {
		if u, err := url.Parse(g.TemporalUI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.RawQuery != "" || u.Fragment != "" {
			bad("gateway.temporal_ui", g.TemporalUI, "want the Web UI's base URL, such as http://127.0.0.1:8233")
		}
	}
	if g.URL != "" {
		if u, err := url.Parse(g.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			bad("gateway.url", g.URL, "want the web page's base URL, such as https://nexo.example.com")
		}
	}
	names := map[string]bool{}
	for i, tok := range g.Tokens {
		field := fmt.Sprintf("gateway.tokens[%d]", i)
		if tok.Name != "" {
			field = fmt.Sprintf("gateway.tokens[%s]", tok.Name)
		}
		switch {
		case !tokenName.MatchString(tok.Name):
			bad(field+".name", tok.Name, "want letters, digits, '.', '-' or '_' (it is recorded as who decided)")
		case names[tok.Name]:
			bad(field+".name", tok.Name, "defined twice")
		}
		names[tok.Name] = true
		if !envVarName.MatchString(tok.TokenEnv) {
			bad(field+".token_env", tok.TokenEnv,
				"want the name of an environment variable, such as NEXO_CI_TOKEN (the token itself never goes in config)")
		}
		if len(tok.Scopes) == 0 {
			bad(field+".scopes", nil, "want at least one of %s", strings.Join(api.Scopes, ", "))
		}
		for j, sc := range tok.Scopes {
			if !slices.Contains(api.Scopes, sc) {
				bad(fmt.Sprintf("%s.scopes[%d]", field, j), sc, "want one of %s", strings.Join(api.Scopes, ", "))
			}
		}
		for _, lim := range []struct {
			key  string
			list []string
		}{{"agents", tok.Agents}, {"workflows", tok.Workflows}} {
			if lim.list != nil && len(lim.list) == 0 {
				bad(field+"."+lim.key, nil, "an empty list matches nothing; leave the key out for all %s", lim.key)
			}
			for j, pat := range lim.list {
				if pat == "" {
					bad(fmt.Sprintf("%s.%s[%d]", field, lim.key, j), pat, "want a name or a glob such as support-*")
				} else if _, err := path.Match(pat, ""); err != nil {
					bad(fmt.Sprintf("%s.%s[%d]", field, lim.key, j), pat, "not a glob (path.Match syntax: *, ?, [a-z]): %v", err)
				}
			}
		}
	}

	// approvals
	for i, n := range c.Approvals.Notify {
		field := fmt.Sprintf("approvals.notify[%d]", i)
		switch {
		case n.URL != "" && n.URLEnv != "":
			bad(field+".url_env", n.URLEnv, "give url or url_env, not both")
		case n.URLEnv != "":
			if !envVarName.MatchString(n.URLEnv) {
				bad(field+".url_env", n.URLEnv, "want the name of the environment variable holding the receiver's URL, such as NEXO_NOTIFY_URL")
			}
		default:
			u, err := url.Parse(n.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
				bad(field+".url", api.RedactURL(n.URL), "want the http(s) URL notifications are POSTed to, such as https://hooks.example.com/nexo (or url_env, the variable holding it)")
			} else if problem := receiverAddress(u.Hostname(), n.AllowPrivate); problem != "" {
				bad(field+".url", api.RedactURL(n.URL), "%s", problem)
			}
		}
		if !envVarName.MatchString(n.SecretEnv) {
			bad(field+".secret_env", n.SecretEnv,
				"want the name of the environment variable holding the HMAC secret, such as NEXO_NOTIFY_SECRET (the secret itself never goes in config)")
		}
	}

	// metrics
	if m := c.Metrics; m.Addr != "" {
		host, port, err := net.SplitHostPort(m.Addr)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil || perr != nil || n < 0 || n > 65535:
			bad("metrics.addr", m.Addr, "want host:port, such as 127.0.0.1:9464 (port 0 picks a free one)")
		case !m.Public && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()):
			bad("metrics.addr", m.Addr, "serves /metrics, which has no authentication, on every interface; give one address, such as 127.0.0.1:9464, or set metrics.public: true")
		}
	}

	// log
	if !slices.Contains(logLevels, strings.ToLower(c.Log.Level)) {
		bad("log.level", c.Log.Level, "want one of %s", strings.Join(logLevels, ", "))
	}
	if !slices.Contains(logFormats, strings.ToLower(c.Log.Format)) {
		bad("log.format", c.Log.Format, "want one of %s", strings.Join(logFormats, ", "))
	}

	return errors.Join(errs...)
}

// checkHostPort returns "" when addr is host:port with a port in 1-65535, else the problem.
func checkHostPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return "want host:port"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "want a port in 1-65535"
	}
	return ""
}

// unjoin splits an errors.Join result into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func orIndex(name string, i int) string {
	if name != "" {
		return name
	}
	return fmt.Sprint(i)
}

// urlProblem says what is wrong with URL, or "".
func (a Artifacts) urlProblem() string {
	want := "want a directory or a URL with one of the schemes " + strings.Join(artifactSchemes, "://, ") + "://"
	if strings.TrimSpace(a.URL) == "" {
		return want
	}
	if dir, ok := a.LocalDir(); ok {
		if dir == "" {
			return "file:// URL without a path"
		}
		return ""
	}
	u, err := url.Parse(a.URL)
	switch {
	case err != nil:
		return fmt.Sprintf("not a URL (%v); %s", err, want)
	case !slices.Contains(artifactSchemes, u.Scheme):
		return fmt.Sprintf("scheme %q is not supported; %s", u.Scheme, want)
	case slices.Contains(artifactBucketSchemes, u.Scheme) && u.Host == "":
		return fmt.Sprintf("no bucket; want %s://<bucket>", u.Scheme)
	}
	return ""
}

// CheckReceiverURLs checks the URLs the receivers' url_env variables hold, as Validate
// checks a url: an http(s) URL whose host, when it is an address, is public (or, with
// allow_private, not link-local or metadata). lookup reads the variables (the worker's, once
// it took its secrets out of its environment); one that is unset is left to the send path,
// which says so. The error names the field and the variable, never the URL, which is a
// credential.
func (c Config) CheckReceiverURLs(lookup func(string) (string, bool)) error {
	var errs []error
	for i, n := range c.Approvals.Notify {
		if n.URLEnv == "" {
			continue
		}
		raw, ok := lookup(n.URLEnv)
		if !ok || raw == "" {
			continue
		}
		field := fmt.Sprintf("approvals.notify[%d].url_env", i)
		u, err := url.Parse(raw)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, fmt.Errorf("%s %s: the variable does not hold an http(s) URL", field, n.URLEnv))
		default:
			if problem := receiverAddress(u.Hostname(), n.AllowPrivate); problem != "" {
				errs = append(errs, fmt.Errorf("%s %s: the URL it holds: %s", field, n.URLEnv, problem))
			}
		}
	}
	return errors.Join(errs...)
}

// receiverAddress is what is wrong with a notification receiver's host, or "": an
// address (or localhost) that is loopback or private needs allow_private, a link-local or
// metadata one is refused whatever it says. A name is resolved only when a notification is
// sent, where the worker checks the address it dials.
func receiverAddress(host string, allowPrivate bool) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	ip := net.ParseIP(h)
	if ip == nil && (h == "localhost" || strings.HasSuffix(h, ".localhost")) {
		ip = net.IPv4(127, 0, 0, 1)
	}
	switch {
	case ip == nil:
		return ""
	case netguard.Metadata(ip):
		return "a link-local or cloud metadata address is never a receiver (refused even with allow_private)"
	case !allowPrivate && !netguard.Public(ip):
		return "a loopback or private address is refused: if the receiver is yours, say allow_private: true on it"
	}
	return ""
}
