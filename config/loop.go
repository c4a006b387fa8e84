package config

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// resolveLoopCommands makes a harness command's first word that starts with ./ or ../
// absolute, against the config file's folder (the working directory without a config
// file), so `command: [./bin/harness]` names the binary beside the config wherever the
// worker was started, and the recorded spec names one file. Any other first word is left
// as written: an absolute path, or a name looked up on the sandbox's PATH.
func resolveLoopCommands(file string, cfg *Config) {
	base := "."
	if file != "" {
		base = filepath.Dir(file)
	}
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	} else if wd, err := os.Getwd(); err == nil {
		base = wd
	}
	for i := range cfg.Agents {
		l := cfg.Agents[i].Loop
		if l == nil || l.Type != api.LoopHarness || len(l.Command) == 0 {
			continue
		}
		first := l.Command[0]
		if strings.HasPrefix(first, "./") || strings.HasPrefix(first, "../") {
			cmd := append([]string(nil), l.Command...)
			cmd[0] = filepath.Join(base, first)
			loop := *l
			loop.Command = cmd
			cfg.Agents[i].Loop = &loop
		}
	}
}
