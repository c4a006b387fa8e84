package connect

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/config"
)

const testKey = "key-sekrit-0123456789"

// load is config.Load with only env set, in an empty directory (no ./nexo.yaml).
func load(t *testing.T, env ...string) config.Config {
	t.Helper()
	t.Chdir(t.TempDir())
	cfg, err := config.Load(config.LoadOptions{Env: env})
	if err != nil {
		t.Fatalf("config.Load(%q): %v", env, err)
	}
	return cfg
}

// lookupOf serves exactly the pairs given, nothing from the process environment.
func lookupOf(env ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	// No user config dir: the default profile path is not this machine's.
	if _, ok := m["HOME"]; !ok {
		m["HOME"] = "/nonexistent"
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeTOML(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "temporal.toml")
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

const profiles = `
[profile.default]
address = "file.example:7233"
namespace = "file-ns"

[profile.cloud]
address = "acct.tmprl.cloud:7233"
namespace = "prod.acct"
api_key = "` + testKey + `"
`

// TestResolvePrecedence: explicit Nexo keys (file, NEXO_*, flag; here NEXO_*) beat the
// profile, even when set to the default value; the profile (TOML, then TEMPORAL_*) beats
// the defaults.
func TestResolvePrecedence(t *testing.T) {
	toml := writeTOML(t, profiles)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no ~/.config/temporalio/temporal.toml here
	tests := []struct {
		name           string
		nexo, env      []string
		addr, addrFrom string
		ns, nsFrom     string
		tls            bool
		apiKeyFrom     string
	}{
		{name: "defaults", addr: "127.0.0.1:7233", addrFrom: "the default temporal.address", ns: "default", nsFrom: "the default temporal.namespace"},
		{name: "TEMPORAL_ADDRESS beats the default", env: []string{"TEMPORAL_ADDRESS=env.example:7233"},
			addr: "env.example:7233", addrFrom: "TEMPORAL_ADDRESS", ns: "default", nsFrom: "the default temporal.namespace"},
		{name: "NEXO_TEMPORAL_ADDRESS beats TEMPORAL_ADDRESS", nexo: []string{"NEXO_TEMPORAL_ADDRESS=nexo.example:7233"}, env: []string{"TEMPORAL_ADDRESS=env.example:7233", "TEMPORAL_NAMESPACE=env-ns"},
			addr: "nexo.example:7233", addrFrom: "env NEXO_TEMPORAL_ADDRESS", ns: "env-ns", nsFrom: "TEMPORAL_NAMESPACE"},
		{name: "an explicit default value still beats the profile", nexo: []string{"NEXO_TEMPORAL_ADDRESS=127.0.0.1:7233"}, env: []string{"TEMPORAL_ADDRESS=env.example:7233"},
			addr: "127.0.0.1:7233", addrFrom: "env NEXO_TEMPORAL_ADDRESS", ns: "default", nsFrom: "the default temporal.namespace"},
		{name: "the default profile of TEMPORAL_CONFIG_FILE", env: []string{"TEMPORAL_CONFIG_FILE=" + toml},
			addr: "file.example:7233", addrFrom: `profile "default" of ` + toml + " (TEMPORAL_CONFIG_FILE)", ns: "file-ns", nsFrom: `profile "default" of ` + toml + " (TEMPORAL_CONFIG_FILE)"},
		{name: "TEMPORAL_ADDRESS beats the file", env: []string{"TEMPORAL_CONFIG_FILE=" + toml, "TEMPORAL_ADDRESS=env.example:7233"},
			addr: "env.example:7233", addrFrom: "TEMPORAL_ADDRESS", ns: "file-ns", nsFrom: `profile "default" of ` + toml + " (TEMPORAL_CONFIG_FILE)"},
		{name: "TEMPORAL_PROFILE with an API key turns TLS on", env: []string{"TEMPORAL_CONFIG_FILE=" + toml, "TEMPORAL_PROFILE=cloud"},
			addr: "acct.tmprl.cloud:7233", addrFrom: `profile "cloud" of ` + toml + " (TEMPORAL_CONFIG_FILE)", ns: "prod.acct", nsFrom: `profile "cloud" of ` + toml + " (TEMPORAL_CONFIG_FILE)",
			tls: true, apiKeyFrom: `profile "cloud" of ` + toml + " (TEMPORAL_CONFIG_FILE)"},
		{name: "temporal.profile picks the profile", nexo: []string{"NEXO_TEMPORAL_PROFILE=cloud"}, env: []string{"TEMPORAL_CONFIG_FILE=" + toml, "TEMPORAL_PROFILE=default"},
			addr: "acct.tmprl.cloud:7233", addrFrom: `profile "cloud" of ` + toml + " (TEMPORAL_CONFIG_FILE)", ns: "prod.acct", nsFrom: `profile "cloud" of ` + toml + " (TEMPORAL_CONFIG_FILE)",
			tls: true, apiKeyFrom: `profile "cloud" of ` + toml + " (TEMPORAL_CONFIG_FILE)"},
		{name: "TEMPORAL_API_KEY alone", env: []string{"TEMPORAL_ADDRESS=acct.tmprl.cloud:7233", "TEMPORAL_API_KEY=" + testKey},
			addr: "acct.tmprl.cloud:7233", addrFrom: "TEMPORAL_ADDRESS", ns: "default", nsFrom: "the default temporal.namespace", tls: true, apiKeyFrom: "TEMPORAL_API_KEY"},
		{name: "temporal.api_key_env beats TEMPORAL_API_KEY", nexo: []string{"NEXO_TEMPORAL_API_KEY_ENV=MY_KEY"}, env: []string{"MY_KEY=" + testKey, "TEMPORAL_API_KEY=other"},
			addr: "127.0.0.1:7233", addrFrom: "the default temporal.address", ns: "default", nsFrom: "the default temporal.namespace", apiKeyFrom: "MY_KEY (temporal.api_key_env)"},
		{name: "temporal.profile off reads nothing", nexo: []string{"NEXO_TEMPORAL_PROFILE=off"}, env: []string{"TEMPORAL_CONFIG_FILE=" + toml, "TEMPORAL_ADDRESS=env.example:7233", "TEMPORAL_API_KEY=" + testKey},
			addr: "127.0.0.1:7233", addrFrom: "the default temporal.address", ns: "default", nsFrom: "the default temporal.namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := load(t, tt.nexo...)
			s, err := Resolve(cfg.Temporal, lookupOf(tt.env...))
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if s.Address != tt.addr || s.AddressFrom != tt.addrFrom {
				t.Errorf("address %q from %q, want %q from %q", s.Address, s.AddressFrom, tt.addr, tt.addrFrom)
			}
			if s.Namespace != tt.ns || s.NamespaceFrom != tt.nsFrom {
				t.Errorf("namespace %q from %q, want %q from %q", s.Namespace, s.NamespaceFrom, tt.ns, tt.nsFrom)
			}
			if (s.TLS != nil) != tt.tls {
				t.Errorf("TLS %v, want %v", s.TLS != nil, tt.tls)
			}
			if s.APIKeyFrom != tt.apiKeyFrom {
				t.Errorf("API key from %q, want %q", s.APIKeyFrom, tt.apiKeyFrom)
			}
			for _, verb := range []string{"%v", "%+v", "%#v"} {
				if out := fmt.Sprintf(verb, s); strings.Contains(out, testKey) {
					t.Errorf("fmt %s of the settings shows the API key: %s", verb, out)
				}
			}
		})
	}
}

// TestResolvePinned: `worker --dev` dials its embedded server whatever the profile says.
func TestResolvePinned(t *testing.T) {
	cfg := load(t)
	cfg.Temporal.Pin()
	s, err := Resolve(cfg.Temporal, lookupOf("TEMPORAL_ADDRESS=cloud.example:7233", "TEMPORAL_API_KEY="+testKey))
	if err != nil {
		t.Fatal(err)
	}
	if s.Address != "127.0.0.1:7233" || s.TLS != nil || s.APIKeyFrom != "" {
		t.Errorf("pinned settings took the profile: %+v", s)
	}
}

// TestResolveErrors: a profile that cannot be read is an error naming what to fix, and
// never carries a secret.
func TestResolveErrors(t *testing.T) {
	toml := writeTOML(t, profiles)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	tests := []struct {
		name string
		nexo []string
		env  []string
		want string
	}{
		{"missing TEMPORAL_CONFIG_FILE", nil, []string{"TEMPORAL_CONFIG_FILE=/nonexistent/temporal.toml"}, "TEMPORAL_CONFIG_FILE=/nonexistent/temporal.toml"},
		{"unknown TEMPORAL_PROFILE", nil, []string{"TEMPORAL_CONFIG_FILE=" + toml, "TEMPORAL_PROFILE=staging"}, `Temporal client profile "staging" is not in ` + toml},
		{"temporal.profile without a file", []string{"NEXO_TEMPORAL_PROFILE=cloud"}, nil, `temporal.profile "cloud": no Temporal client profile file`},
		{"bad TOML", nil, []string{"TEMPORAL_CONFIG_FILE=" + writeTOML(t, "[profile.default\napi_key = \""+testKey+"\"")}, "Temporal client profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(load(t, tt.nexo...).Temporal, lookupOf(tt.env...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resolve error = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error shows the API key: %v", err)
			}
		})
	}
}
