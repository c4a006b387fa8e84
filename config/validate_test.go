package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // the whole message of the one FieldError expected
	}{
		{"address without port", func(c *Config) { c.Temporal.Address = "foo" }, `temporal.address "foo": want host:port`},
		{"address without host", func(c *Config) { c.Temporal.Address = ":7233" }, `temporal.address ":7233": want host:port`},
		{"address port out of range", func(c *Config) { c.Temporal.Address = "h:70000" }, `temporal.address "h:70000": want a port in 1-65535`},
		{"address port not a number", func(c *Config) { c.Temporal.Address = "h:http" }, `temporal.address "h:http": want a port in 1-65535`},
		{"empty namespace", func(c *Config) { c.Temporal.Namespace = "" }, `temporal.namespace "": must not be empty`},
		{"empty task queue", func(c *Config) { c.Temporal.TaskQueue = " " }, `temporal.task_queue " ": must not be empty`},
		{"api key pasted instead of a variable name", func(c *Config) { c.Temporal.APIKeyEnv = "eyJhbGciOi.J9" },
			`temporal.api_key_env "eyJhbGciOi.J9": want the name of an environment variable, such as TEMPORAL_API_KEY (the key itself never goes in config)`},
		{"cert without key", func(c *Config) { c.Temporal.TLS = TLS{Enabled: true, CertFile: "c.pem"} },
			`temporal.tls.key_file: required when temporal.tls.cert_file is set`},
		{"key without cert", func(c *Config) { c.Temporal.TLS = TLS{Enabled: true, KeyFile: "k.pem"} },
			`temporal.tls.cert_file: required when temporal.tls.key_file is set`},
		{"tls files while disabled", func(c *Config) { c.Temporal.TLS = TLS{CAFile: "ca.pem"} },
			`temporal.tls.enabled false: cert_file, key_file, ca_file or server_name is set; set enabled: true or remove them`},
		{"heartbeat timeout under a second", func(c *Config) { c.Worker.ActivityHeartbeatTimeout = 500 * time.Millisecond },
			`worker.activity_heartbeat_timeout 500ms: want at least 1s (the worker heartbeats every 200ms)`},
		{"registry ttl too short", func(c *Config) { c.Worker.RegistryTTL = time.Second },
			`worker.registry_ttl 1s: want whole seconds from 3s to 24h0m0s (the worker announces itself every third of it; a killed worker counts that long)`},
		{"registry ttl not whole seconds", func(c *Config) { c.Worker.RegistryTTL = 4500 * time.Millisecond },
			`worker.registry_ttl 4.5s: want whole seconds from 3s to 24h0m0s (the worker announces itself every third of it; a killed worker counts that long)`},
		{"dev ip not an IP", func(c *Config) { c.Dev.IP = "localhost" }, `dev.ip "localhost": want an IP address, such as 127.0.0.1`},
		{"frontend port zero", func(c *Config) { c.Dev.FrontendPort = 0 }, `dev.frontend_port 0: want a port in 1-65535`},
		{"frontend port too big", func(c *Config) { c.Dev.FrontendPort = 65536 }, `dev.frontend_port 65536: want a port in 1-65535`},
		{"ui port negative", func(c *Config) { c.Dev.UIPort = -1 }, `dev.ui_port -1: want a port in 1-65535, or 0 to disable the UI`},
		{"ui port equals frontend", func(c *Config) { c.Dev.UIPort = 7233 }, `dev.ui_port 7233: same as dev.frontend_port`},
		{"empty artifacts url", func(c *Config) { c.Artifacts.URL = "" },
			`artifacts.url "": want a directory or a URL with one of the schemes file://, mem://, s3://, gs://, azblob://`},
		{"file url without path", func(c *Config) { c.Artifacts.URL = "file://" }, `artifacts.url "file://": file:// URL without a path`},
		{"unknown artifacts scheme", func(c *Config) { c.Artifacts.URL = "ftp://host/artifacts" },
			`artifacts.url "ftp://host/artifacts": scheme "ftp" is not supported; want a directory or a URL with one of the schemes file://, mem://, s3://, gs://, azblob://`},
		{"bucket url without a bucket", func(c *Config) { c.Artifacts.URL = "gs://" }, `artifacts.url "gs://": no bucket; want gs://<bucket>`},
		{"negative cache", func(c *Config) { c.Artifacts.CacheBytes = -1 }, `artifacts.cache_bytes -1: must not be negative (0 turns the cache off)`},
		{"negative inline limit", func(c *Config) { c.Artifacts.InlineLimit = -1 }, `artifacts.inline_limit -1: must not be negative (0 keeps no content inline)`},
		{"inline limit above the payload budget", func(c *Config) { c.Artifacts.InlineLimit = MaxInlineLimit + 1 },
			`artifacts.inline_limit 1048577: want at most 1048576: inline content travels in the run record, which must stay under Temporal's 2 MB payload limit`},
		{"offload threshold too small", func(c *Config) { c.Payloads.OffloadThreshold = 0 },
			`payloads.offload_threshold 0: want 1024 to 2097152 bytes: a payload under the threshold stays in history, where Temporal refuses one over 2 MB`},
		{"offload threshold above Temporal's limit", func(c *Config) { c.Payloads.OffloadThreshold = 3 << 20 },
			`payloads.offload_threshold 3145728: want 1024 to 2097152 bytes: a payload under the threshold stays in history, where Temporal refuses one over 2 MB`},
		{"codec origin with a path", func(c *Config) { c.Gateway.CodecOrigins = []string{"http://127.0.0.1:8233/namespaces"} },
			`gateway.codec_origins[0] "http://127.0.0.1:8233/namespaces": want a browser origin: scheme://host[:port], such as http://127.0.0.1:8233`},
		{"codec origin without a scheme", func(c *Config) { c.Gateway.CodecOrigins = []string{"temporal-ui.example.com"} },
			`gateway.codec_origins[0] "temporal-ui.example.com": want a browser origin: scheme://host[:port], such as http://127.0.0.1:8233`},
		{"negative artifacts retention", func(c *Config) { c.Artifacts.Retention = -time.Hour },
			`artifacts.retention -1h0m0s: want 0 (keep every stored record) or a positive duration, such as 720h`},
		{"artifacts retention of minutes", func(c *Config) { c.Artifacts.Retention = 5 * time.Minute },
			`artifacts.retention 5m0s: want 0 (keep every stored record) or at least 1h0m0s: a shorter one would collect the files of runs that closed minutes ago`},
		{"empty sandbox root", func(c *Config) { c.Sandbox.Root = "" }, `sandbox.root "": must not be empty`},
		{"shell timeout below a second", func(c *Config) { c.Sandbox.ShellTimeout = 120 }, `sandbox.shell_timeout 120ns: want at least 1s`},
		{"model retry budget under a minute", func(c *Config) { c.LLM.RetryFor = 30 * time.Second }, `llm.retry_for 30s: want at least 1m (a budget such as 6h)`},
		{"unknown log level", func(c *Config) { c.Log.Level = "verbose" }, `log.level "verbose": want one of debug, info, warn, error`},
		{"unknown log format", func(c *Config) { c.Log.Format = "xml" }, `log.format "xml": want one of text, json`},
		{"temporal ui without a scheme", func(c *Config) { c.Gateway.TemporalUI = "127.0.0.1:8233" },
			`gateway.temporal_ui "127.0.0.1:8233": want the Web UI's base URL, such as http://127.0.0.1:8233`},
		{"gateway url without a scheme", func(c *Config) { c.Gateway.URL = "nexo.example.com" },
			`gateway.url "nexo.example.com": want the web page's base URL, such as https://nexo.example.com`},
		{"gateway address without port", func(c *Config) { c.Gateway.Addr = "localhost" }, `gateway.addr "localhost": want host:port`},
		{"gateway body limit too small", func(c *Config) { c.Gateway.MaxBodyBytes = 100 }, `gateway.max_body_bytes 100: want 1024 to 67108864 bytes`},
		{"gateway token secret pasted instead of a variable name", func(c *Config) {
			c.Gateway.Tokens = []GatewayToken{{Name: "ci", TokenEnv: "s3cr3t-value!", Scopes: []string{"read"}}}
		}, `gateway.tokens[ci].token_env "s3cr3t-value!": want the name of an environment variable, such as NEXO_CI_TOKEN (the token itself never goes in config)`},
		{"notify url without a scheme", func(c *Config) {
			c.Approvals.Notify = []api.NotifyTarget{{URL: "hooks.example.com/nexo", SecretEnv: "HOOK_SECRET"}}
		}, `approvals.notify[0].url "hooks.example.com/nexo": want the http(s) URL notifications are POSTed to, such as https://hooks.example.com/nexo (or url_env, the variable holding it)`},
		{"notify url and url_env", func(c *Config) {
			c.Approvals.Notify = []api.NotifyTarget{{URL: "https://hooks.example.com/nexo", URLEnv: "HOOK_URL", SecretEnv: "HOOK_SECRET"}}
		}, `approvals.notify[0].url_env "HOOK_URL": give url or url_env, not both`},
		{"notify url pasted into url_env", func(c *Config) {
			c.Approvals.Notify = []api.NotifyTarget{{URLEnv: "https://hooks.slack.com/services/T0/B0/x", SecretEnv: "HOOK_SECRET"}}
		}, `approvals.notify[0].url_env "https://hooks.slack.com/services/T0/B0/x": want the name of the environment variable holding the receiver's URL, such as NEXO_NOTIFY_URL`},
		{"notify secret pasted instead of a variable name", func(c *Config) {
			c.Approvals.Notify = []api.NotifyTarget{{URL: "https://hooks.example.com/nexo", SecretEnv: "whsec_abc123!"}}
		}, `approvals.notify[0].secret_env "whsec_abc123!": want the name of the environment variable holding the HMAC secret, such as NEXO_NOTIFY_SECRET (the secret itself never goes in config)`},
		{"notify without a secret", func(c *Config) {
			c.Approvals.Notify = []api.NotifyTarget{{URL: "https://hooks.example.com/nexo"}}
		}, `approvals.notify[0].secret_env "": want the name of the environment variable holding the HMAC secret, such as NEXO_NOTIFY_SECRET (the secret itself never goes in config)`},
		{"gateway token without scopes", func(c *Config) {
			c.Gateway.Tokens = []GatewayToken{{Name: "ci", TokenEnv: "CI_TOKEN"}}
		}, `gateway.tokens[ci].scopes: want at least one of read, operate, approve`},
		{"gateway token with an unknown scope", func(c *Config) {
			c.Gateway.Tokens = []GatewayToken{{Name: "ci", TokenEnv: "CI_TOKEN", Scopes: []string{"read", "admin"}}}
		}, `gateway.tokens[ci].scopes[1] "admin": want one of read, operate, approve`},
		{"gateway token without a name", func(c *Config) {
			c.Gateway.Tokens = []GatewayToken{{TokenEnv: "CI_TOKEN", Scopes: []string{"read"}}}
		}, `gateway.tokens[0].name "": want letters, digits, '.', '-' or '_' (it is recorded as who decided)`},
		{"gateway token defined twice", func(c *Config) {
			c.Gateway.Tokens = []GatewayToken{{Name: "a", TokenEnv: "A", Scopes: []string{"read"}}, {Name: "a", TokenEnv: "B", Scopes: []string{"read"}}}
		}, `gateway.tokens[a].name "a": defined twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			tt.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Validate() = %q\nwant          %q", err, tt.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate() = %T, want it to wrap a *FieldError", err)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
	}{
		{"defaults", func(*Config) {}},
		{"ui disabled", func(c *Config) { c.Dev.UIPort = 0 }},
		{"ipv6 address", func(c *Config) { c.Temporal.Address = "[::1]:7233"; c.Dev.IP = "::1" }},
		{"cloud with mTLS and api key env", func(c *Config) {
			c.Temporal.Address = "ns.acct.tmprl.cloud:7233"
			c.Temporal.APIKeyEnv = "TEMPORAL_API_KEY"
			c.Temporal.TLS = TLS{Enabled: true, CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", ServerName: "x"}
		}},
		{"tls with system roots", func(c *Config) { c.Temporal.TLS = TLS{Enabled: true} }},
		{"plain directory for artifacts, nothing inline", func(c *Config) { c.Artifacts = Artifacts{URL: "data/artifacts", InlineLimit: 0} }},
		{"artifacts in s3, no cache", func(c *Config) {
			c.Artifacts.URL = "s3://nexo-artifacts?region=eu-west-1&prefix=prod/"
			c.Artifacts.CacheBytes = 0
		}},
		{"artifacts in gcs", func(c *Config) { c.Artifacts.URL = "gs://nexo-artifacts" }},
		{"artifacts in azure blob", func(c *Config) { c.Artifacts.URL = "azblob://nexo-artifacts" }},
		{"artifacts in memory", func(c *Config) { c.Artifacts.URL = "mem://" }},
		{"log level in capitals", func(c *Config) { c.Log.Level = "WARN" }},
		{"one second shell timeout", func(c *Config) { c.Sandbox.ShellTimeout = time.Second }},
		{"model retry budget of three days", func(c *Config) { c.LLM.RetryFor = 72 * time.Hour }},
		{"codec origins, lowest offload threshold", func(c *Config) {
			c.Gateway.CodecOrigins = []string{"http://127.0.0.1:8233", "https://ui.example.com/"}
			c.Payloads.OffloadThreshold = MinOffloadThreshold
		}},
		{"gateway on all interfaces with tokens", func(c *Config) {
			c.Gateway.Addr = "0.0.0.0:8234"
			c.Gateway.Tokens = []GatewayToken{{Name: "ci", TokenEnv: "NEXO_CI_TOKEN", Scopes: []string{"read", "operate", "approve"}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			tt.change(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

// TestValidateListsAllProblems: a user fixing a config sees every problem in one run.
func TestValidateListsAllProblems(t *testing.T) {
	c := Defaults()
	c.Temporal.Address = "foo"
	c.Log.Level = "loud"
	c.Artifacts.InlineLimit = -5
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want three problems")
	}
	for _, field := range []string{"temporal.address", "log.level", "artifacts.inline_limit"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %q, missing %s", err, field)
		}
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Errorf("Validate() joined %d errors, want 3", n)
	}
}

// TestArtifactSchemesMatchTheStore: config accepts exactly the schemes the store opens.
func TestArtifactSchemesMatchTheStore(t *testing.T) {
	if !slices.Equal(artifactSchemes, artifacts.Schemes) {
		t.Errorf("config accepts artifacts.url schemes %v, the store opens %v", artifactSchemes, artifacts.Schemes)
	}
}

// TestGatewayPageURL: the Temporal UI links back to the page at gateway.url, or at the
// loopback address the gateway listens on; a wildcard address says nothing about where
// users reach it, so there is no link.
func TestGatewayPageURL(t *testing.T) {
	for _, tt := range []struct {
		g    Gateway
		want string
	}{
		{Gateway{Addr: "127.0.0.1:8234"}, "http://127.0.0.1:8234"},
		{Gateway{Addr: "localhost:9000"}, "http://localhost:9000"},
		{Gateway{Addr: "[::1]:8234"}, "http://[::1]:8234"},
		{Gateway{Addr: "0.0.0.0:8234"}, ""},
		{Gateway{Addr: "0.0.0.0:8234", URL: "https://nexo.example.com/"}, "https://nexo.example.com"},
	} {
		if got := tt.g.PageURL(); got != tt.want {
			t.Errorf("%+v.PageURL() = %q, want %q", tt.g, got, tt.want)
		}
	}
}

// TestCheckReceiverURLs: a URL held in url_env is checked when the worker starts as a url
// is at load, naming the field and the variable, never the URL (a credential).
func TestCheckReceiverURLs(t *testing.T) {
	t.Parallel()
	var c Config
	c.Approvals.Notify = []api.NotifyTarget{
		{URLEnv: "PUBLIC", SecretEnv: "S"}, {URLEnv: "LOOPBACK", SecretEnv: "S"}, {URLEnv: "META", SecretEnv: "S", AllowPrivate: true},
		{URLEnv: "INTERNAL", SecretEnv: "S", AllowPrivate: true}, {URLEnv: "NOTURL", SecretEnv: "S"}, {URLEnv: "UNSET", SecretEnv: "S"},
	}
	env := map[string]string{"PUBLIC": "https://hooks.slack.com/services/T0/B0/tok-1", "LOOPBACK": "http://127.0.0.1:9/tok-2",
		"META": "http://169.254.169.254/tok-3", "INTERNAL": "http://10.0.0.7/tok-4", "NOTURL": "tok-5"}
	err := c.CheckReceiverURLs(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"approvals.notify[1].url_env LOOPBACK: the URL it holds: a loopback or private address is refused",
		"approvals.notify[2].url_env META: the URL it holds: a link-local or cloud metadata address is never a receiver",
		"approvals.notify[4].url_env NOTURL: the variable does not hold an http(s) URL",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, leak := range []string{"tok-", "[0]", "[3]", "[5]"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q holds %q", err, leak)
		}
	}
}
