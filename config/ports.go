package config

import (
	"net"
	"slices"
	"strconv"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// The three ports a local platform binds (worker --dev) sit at fixed offsets from one base
// (port_base, NEXO_PORT_BASE), so one variable moves them all. The default base 7233 gives
// the ports every example uses: 7233, 8233 and 8234.
const (
	// DefaultPortBase is port_base's default: Temporal's own frontend port.
	DefaultPortBase = 7233
	// UIPortOffset is the Web UI's port (dev.ui_port) less the base.
	UIPortOffset = 1000
	// GatewayPortOffset is the gateway's port (gateway.addr) less the base.
	GatewayPortOffset = 1001
	// MaxPortBase is the highest base whose gateway port is still a port.
	MaxPortBase = 65535 - GatewayPortOffset
)

// PortBaseKey is the config key of the port base; PortBaseEnv its environment variable.
const (
	PortBaseKey = "port_base"
	PortBaseEnv = envPrefix + "_PORT_BASE"
)

// EnvVar is the environment variable of a config key: dev.ui_port → NEXO_DEV_UI_PORT.
func EnvVar(key string) string { return envName(key) }

// keyGiven reports whether key was set by the config file, a NEXO_* variable (both merged
// into v's config by Load) or a flag (spelled as the key or as one of BindFlags' names).
func keyGiven(v *viper.Viper, fs *pflag.FlagSet, key string) bool {
	if v.InConfig(key) || flagSet(fs, key) {
		return true
	}
	for name, k := range flagKeys {
		if k == key && flagSet(fs, name) {
			return true
		}
	}
	return false
}

// applyPortBase sets the keys port_base moves (the embedded server's frontend and Web UI,
// the gateway, and the frontend address the starter dials) that were not given, from a
// port_base that was,
// and notes which (FromPortBase). Explicit settings win over the base. A base out of
// range moves nothing; Validate reports it.
func applyPortBase(v *viper.Viper, fs *pflag.FlagSet, cfg *Config) {
	base := cfg.PortBase
	if !keyGiven(v, fs, PortBaseKey) || base < 1 || base > MaxPortBase {
		return
	}
	set := func(key string, apply func()) {
		if keyGiven(v, fs, key) {
			return
		}
		apply()
		cfg.portBased = append(cfg.portBased, key)
	}
	loopback := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	set("dev.frontend_port", func() { cfg.Dev.FrontendPort = base })
	set("dev.ui_port", func() { cfg.Dev.UIPort = base + UIPortOffset })
	set("gateway.addr", func() { cfg.Gateway.Addr = loopback(base + GatewayPortOffset) })
	set("temporal.address", func() { cfg.Temporal.Address = loopback(base) })
}

// FromPortBase reports whether key (dev.frontend_port, dev.ui_port, gateway.addr or
// temporal.address) has the value port_base gave it, rather than one set on its own or
// its default: for messages that say where a value came from.
func (c Config) FromPortBase(key string) bool { return slices.Contains(c.portBased, key) }
