package config

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// ProfileKeys are the temporal.* keys a Temporal client profile can also supply (package
// connect reads the profile). A key given in the config file, a NEXO_* variable or a flag
// beats the profile; a key left at its default takes the profile's value.
var ProfileKeys = []string{
	"temporal.address", "temporal.namespace", "temporal.api_key_env",
	"temporal.tls.enabled", "temporal.tls.cert_file", "temporal.tls.key_file",
	"temporal.tls.ca_file", "temporal.tls.server_name",
}

// Given reports whether key (one of ProfileKeys) was set by the config file, a NEXO_*
// variable or a flag, rather than left at its default.
func (t Temporal) Given(key string) bool {
	return t.givenAtDefault[key] || t.value(key) != Defaults().Temporal.value(key)
}

// Source names where key (one of ProfileKeys) got its value, for a message that tells the
// user what to change: "flag --address", "env NEXO_TEMPORAL_ADDRESS", "temporal.address in
// nexo.yaml", or "the default temporal.address". A Config built by hand with the key set
// says just the key.
func (t Temporal) Source(key string) string {
	if s, ok := t.sources[key]; ok {
		return s
	}
	if t.Given(key) {
		return key
	}
	return "the default " + key
}

// TLSGiven reports whether any temporal.tls.* key was given: then the TLS settings are
// the config's as a whole, never mixed with a profile's.
func (t Temporal) TLSGiven() bool {
	for _, k := range ProfileKeys {
		if strings.HasPrefix(k, "temporal.tls.") && t.Given(k) {
			return true
		}
	}
	return false
}

// Pin fixes the connection to these settings: no profile is read (`worker --dev` dials
// the server it embeds, whatever the user's `temporal` CLI points at).
func (t *Temporal) Pin() { t.noProfile = true }

// ProfileOff reports whether no Temporal client profile may be read: temporal.profile is
// "off", or Pin was called.
func (t Temporal) ProfileOff() bool { return t.noProfile || t.Profile == ProfileOff }

// ProfileOff is the temporal.profile value that reads no profile.
const ProfileOff = "off"

func (t Temporal) value(key string) string {
	switch key {
	case "temporal.address":
		return t.Address
	case "temporal.namespace":
		return t.Namespace
	case "temporal.api_key_env":
		return t.APIKeyEnv
	case "temporal.tls.enabled":
		return strconv.FormatBool(t.TLS.Enabled)
	case "temporal.tls.cert_file":
		return t.TLS.CertFile
	case "temporal.tls.key_file":
		return t.TLS.KeyFile
	case "temporal.tls.ca_file":
		return t.TLS.CAFile
	case "temporal.tls.server_name":
		return t.TLS.ServerName
	}
	return ""
}

// givenAtDefault returns the ProfileKeys that the file, the environment (merged into v's
// config by Load) or a flag set to exactly their default value: nil when none, so a
// Config loaded with nothing of the kind equals one built by hand.
func givenAtDefault(v *viper.Viper, fs *pflag.FlagSet, t Temporal) map[string]bool {
	var out map[string]bool
	for _, key := range ProfileKeys {
		if t.value(key) != Defaults().Temporal.value(key) {
			continue // Given sees it from the value
		}
		if keyGiven(v, fs, key) {
			if out == nil {
				out = map[string]bool{}
			}
			out[key] = true
		}
	}
	return out
}

// sources returns where each given ProfileKey came from, by Load's precedence (flag, then
// NEXO_* variable, then the config file); nil when none was given, so a Config loaded
// with nothing of the kind equals one built by hand.
func sources(v *viper.Viper, fs *pflag.FlagSet, env map[string]string, file string) map[string]string {
	var out map[string]string
	set := func(key, src string) {
		if out == nil {
			out = map[string]string{}
		}
		out[key] = src
	}
	for _, key := range ProfileKeys {
		switch {
		case flagSet(fs, key):
			set(key, "flag --"+key)
		case shortFlag(fs, key) != "":
			set(key, "flag --"+shortFlag(fs, key))
		case env[envName(key)] != "":
			set(key, "env "+envName(key))
		case file != "" && v.InConfig(key):
			set(key, key+" in "+file)
		}
	}
	return out
}

// shortFlag returns the name of the set flag of BindFlags that sets key ("address" for
// temporal.address), or "".
func shortFlag(fs *pflag.FlagSet, key string) string {
	for name, k := range flagKeys {
		if k == key && flagSet(fs, name) {
			return name
		}
	}
	return ""
}
