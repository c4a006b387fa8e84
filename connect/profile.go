package connect

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/nexo-temporal/nexo/config"
)

// The standard Temporal client profile (go.temporal.io/sdk/contrib/envconfig), the one the
// `temporal` CLI and every SDK read: a TOML file (TEMPORAL_CONFIG_FILE, else
// ~/.config/temporalio/temporal.toml) holding named profiles (TEMPORAL_PROFILE, else
// "default"), overridden by TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_TLS_* and TEMPORAL_GRPC_META_*. So the worker, the starter and the gateway reach
// the same Temporal as the user's CLI with nothing configured twice.
//
// Precedence, key by key (address, namespace, API key, TLS as a whole): a temporal.* key
// given in the config file, a NEXO_* variable or a flag beats the profile; the profile
// beats Nexo's defaults. temporal.profile: off reads none.

// ProfileSecretEnvNames are the profile's variables that hold secrets: the worker takes
// them out of its environment with its own (internal/secrets), so a command it runs
// cannot read them.
var ProfileSecretEnvNames = []string{"TEMPORAL_API_KEY", "TEMPORAL_TLS_CLIENT_KEY_DATA"}

const (
	envConfigFile = "TEMPORAL_CONFIG_FILE"
	envProfile    = "TEMPORAL_PROFILE"
)

// Settings is the connection Dial makes, each value with where it came from.
type Settings struct {
	Address, AddressFrom     string
	Namespace, NamespaceFrom string
	// APIKeyFrom names where the API key came from ("" for none). The key itself sits
	// behind a pointer, so even %+v of Settings prints an address, never the key.
	APIKeyFrom string
	apiKey     *secret
	// TLS is the TLS configuration (nil: plain), TLSFrom where it came from.
	TLS     *tls.Config
	TLSFrom string
	// Profile describes the profile read ("" for none), for messages.
	Profile string

	// fromProfile holds the profile's gRPC headers (grpc_meta) and authority.
	fromProfile client.Options
}

// lookupFunc is os.LookupEnv over the worker's secrets.
type lookupFunc func(string) (string, bool)

// secret is a value no print shows.
type secret struct{ v string }

func (s *secret) value() string {
	if s == nil {
		return ""
	}
	return s.v
}

// envLookup adapts a lookupFunc to envconfig.EnvLookup.
type envLookup lookupFunc

func (l envLookup) LookupEnv(k string) (string, bool) { return l(k) }
func (envLookup) Environ() []string                   { return os.Environ() }

// Resolve merges cfg's temporal.* keys with the Temporal client profile of the
// environment that lookup reads (nil: the process environment). It never returns a
// secret in an error.
func Resolve(cfg config.Temporal, lookup func(string) (string, bool)) (Settings, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s := Settings{
		Address: cfg.Address, AddressFrom: from(cfg, "temporal.address"),
		Namespace: cfg.Namespace, NamespaceFrom: from(cfg, "temporal.namespace"),
	}
	if key := cfg.APIKey(func(n string) string { v, _ := lookup(n); return v }); key != "" {
		s.apiKey, s.APIKeyFrom = &secret{key}, cfg.APIKeyEnv+" (temporal.api_key_env)"
	}
	if cfg.TLS.Enabled {
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return Settings{}, err
		}
		s.TLS, s.TLSFrom = tc, "temporal.tls"
	}
	if cfg.ProfileOff() {
		return s, nil
	}

	file, fileFrom := "", ""
	if f, ok := lookup(envConfigFile); ok && f != "" {
		file, fileFrom = f, envConfigFile
		if _, err := os.Stat(f); err != nil {
			return Settings{}, fmt.Errorf("Temporal client profile: %s=%s: %w", envConfigFile, f, err)
		}
	} else if f := envconfig.DefaultConfigFilePath(); f != "" {
		if _, err := os.Stat(f); err == nil {
			file = f
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Settings{}, fmt.Errorf("Temporal client profile %s: %w", f, err)
		}
	}
	name := cfg.Profile
	if name == "" {
		name, _ = lookup(envProfile)
	}
	explicitName := name != ""
	if name == "" {
		name = envconfig.DefaultConfigFileProfile
	}
	var fromFile envconfig.ClientConfigProfile
	if file != "" {
		conf, err := envconfig.LoadClientConfig(envconfig.LoadClientConfigOptions{ConfigFilePath: file, EnvLookup: envLookup(lookup)})
		if err != nil {
			return Settings{}, fmt.Errorf("Temporal client profile %s: %w", file, err)
		}
		if p := conf.Profiles[name]; p != nil {
			fromFile = *p
			s.Profile = fmt.Sprintf("profile %q of %s", name, file)
			if fileFrom != "" {
				s.Profile += " (" + fileFrom + ")"
			}
		} else if explicitName {
			return Settings{}, fmt.Errorf("Temporal client profile %q is not in %s (profiles: %v)", name, file, profileNames(conf))
		}
	} else if explicitName && cfg.Profile != "" {
		return Settings{}, fmt.Errorf("temporal.profile %q: no Temporal client profile file (%s, or %s)", name, envConfigFile, envconfig.DefaultConfigFilePath())
	}
	prof := fromFile
	if err := prof.ApplyEnvVars(envLookup(lookup)); err != nil {
		return Settings{}, fmt.Errorf("Temporal client environment: %w", err)
	}
	// where names the source of one value: the environment variable when it is set, else
	// the profile file.
	where := func(env string) string {
		if _, ok := lookup(env); ok {
			return env
		}
		return s.Profile
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return Settings{}, fmt.Errorf("Temporal client profile (%s): %w", orEnv(s.Profile), err)
	}
	if !cfg.Given("temporal.address") && prof.Address != "" {
		s.Address, s.AddressFrom = prof.Address, where("TEMPORAL_ADDRESS")
	}
	if !cfg.Given("temporal.namespace") && prof.Namespace != "" {
		s.Namespace, s.NamespaceFrom = prof.Namespace, where("TEMPORAL_NAMESPACE")
	}
	profileKey := !cfg.Given("temporal.api_key_env") && prof.APIKey != ""
	if profileKey {
		s.apiKey, s.APIKeyFrom = &secret{prof.APIKey}, where("TEMPORAL_API_KEY")
	}
	if !cfg.TLSGiven() {
		switch {
		case opts.ConnectionOptions.TLSDisabled:
			s.TLS, s.TLSFrom = nil, where("TEMPORAL_TLS")
		case prof.TLS != nil:
			s.TLS, s.TLSFrom = opts.ConnectionOptions.TLS, orEnv(s.Profile)
		case profileKey:
			// A profile's API key without TLS settings means TLS with the system roots
			// (Temporal Cloud), as the CLI does.
			s.TLS, s.TLSFrom = &tls.Config{MinVersion: tls.VersionTLS12}, s.APIKeyFrom
		}
	}
	s.fromProfile.HeadersProvider = opts.HeadersProvider
	s.fromProfile.ConnectionOptions.Authority = opts.ConnectionOptions.Authority
	return s, nil
}

// from names where a temporal.* key's value came from in Nexo's own config: the flag,
// the NEXO_* variable, the config file's key, or the default.
func from(cfg config.Temporal, key string) string { return cfg.Source(key) }

func orEnv(profile string) string {
	if profile == "" {
		return "TEMPORAL_* environment"
	}
	return profile
}

func profileNames(c envconfig.ClientConfig) []string {
	out := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		out = append(out, n)
	}
	return out
}

// apply sets the connection of s on opts.
func (s Settings) apply(opts *client.Options) {
	opts.HostPort, opts.Namespace = s.Address, s.Namespace
	if s.TLS != nil {
		opts.ConnectionOptions.TLS = s.TLS
	}
	if key := s.apiKey.value(); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	if s.fromProfile.HeadersProvider != nil {
		opts.HeadersProvider = s.fromProfile.HeadersProvider
	}
	opts.ConnectionOptions.Authority = s.fromProfile.ConnectionOptions.Authority
}
