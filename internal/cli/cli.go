// Package cli holds what both binaries (starter, worker) say the same way: a mistyped flag
// with a suggestion (`unknown flag --inptu (did you mean --input?)`) and the version line.
package cli

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/internal/suggest"
)

// FlagError rewrites an error of fs.Parse for a person: an unknown flag names the known
// one it most likely meant. Other errors (a bad value, a missing argument) are returned as
// pflag words them.
func FlagError(fs *pflag.FlagSet, err error) error {
	msg := err.Error()
	var long, short []string
	fs.VisitAll(func(f *pflag.Flag) {
		long = append(long, f.Name)
		if f.Shorthand != "" {
			short = append(short, f.Shorthand)
		}
	})
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if m := suggest.Nearest(name, long); m != "" {
			return fmt.Errorf("unknown flag --%s (did you mean --%s?)", name, m)
		}
		return fmt.Errorf("unknown flag --%s", name)
	}
	// pflag: unknown shorthand flag: 'x' in -xyz
	if rest, ok := strings.CutPrefix(msg, "unknown shorthand flag: '"); ok {
		c, word, _ := strings.Cut(rest, "' in ")
		// A long flag typed with one dash (-input) reads as shorthands; say what was meant.
		if name := strings.TrimPrefix(word, "-"); len(name) > 1 {
			for _, l := range long {
				if l == name {
					return fmt.Errorf("unknown flag %s (did you mean --%s?)", word, l)
				}
			}
			if m := suggest.Nearest(name, long); m != "" {
				return fmt.Errorf("unknown flag %s (did you mean --%s?)", word, m)
			}
		}
		return fmt.Errorf("unknown flag -%s in %s", c, word)
	}
	return err
}

// Version is the version of the running binary: its module version when built from a
// released module (`go install ...@v1.2.0`), else "(devel)" with the VCS revision and
// whether the tree had local changes, when the build recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if v == "(devel)" && rev != "" {
		v += " " + rev
		if modified == "true" {
			v += " (modified)"
		}
	}
	return v
}
