package config

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Names of the flags BindFlags defines, for binaries that need to refer to them.
const (
	FlagConfig    = "config"
	FlagAddress   = "address"
	FlagNamespace = "namespace"
	FlagTaskQueue = "task-queue"
	FlagLogLevel  = "log-level"
)

// flagKeys maps each short flag BindFlags defines to the config key it sets.
var flagKeys = map[string]string{
	FlagAddress:   "temporal.address",
	FlagNamespace: "temporal.namespace",
	FlagTaskQueue: "temporal.task_queue",
	FlagLogLevel:  "log.level",
}

// BindFlags defines on fs the flags every Nexo binary shares:
//
//	--config PATH        config file (instead of NEXO_CONFIG or ./nexo.yaml)
//	--address HOST:PORT  temporal.address
//	--namespace NAME     temporal.namespace
//	--task-queue NAME    temporal.task_queue
//	--log-level LEVEL    log.level
//
// Pass the parsed fs to Load as LoadOptions.Flags. A flag the user did not set leaves the
// key to the environment, the file or the default; the defaults shown in --help are those
// of Defaults.
func BindFlags(fs *pflag.FlagSet) {
	d := Defaults()
	fs.String(FlagConfig, "", fmt.Sprintf("config file (default ./%s when present; env %s)", DefaultFile, envConfigFile))
	fs.String(FlagAddress, d.Temporal.Address, flagUsage("Temporal frontend host:port", "temporal.address"))
	fs.String(FlagNamespace, d.Temporal.Namespace, flagUsage("Temporal namespace", "temporal.namespace"))
	fs.String(FlagTaskQueue, d.Temporal.TaskQueue, flagUsage("task queue workers poll and starters target", "temporal.task_queue"))
	fs.String(FlagLogLevel, d.Log.Level, flagUsage("log level: debug, info, warn or error", "log.level"))
}

func flagUsage(what, key string) string {
	return fmt.Sprintf("%s (config %s, env %s)", what, key, envName(key))
}
