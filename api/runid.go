package api

import (
	"fmt"
	"strings"
	"unicode"
)

// MaxRunIDLength bounds a run id in bytes. A run id names the run's workspace directory
// and its artifact prefix, so it must stay well under a file name's 255 bytes.
const MaxRunIDLength = 200

// SessionIDPrefix starts the workflow id of every session (SessionID); ordinary runs may
// not take it, or a run could occupy a session's id and block its prompts.
const SessionIDPrefix = "session:"

// ValidateRunID is the one rule for a run id a caller chooses (starter run --id, POST
// /v1/runs, runs.Client.Start): 1 to MaxRunIDLength bytes, not "." or "..", no '/', '\',
// '?', '#' or '%' (it is a path segment of the API and a directory name on the worker), no
// control characters, no spaces at either end, and not in the sessions' "session:" space nor
// the registries' "nexo-registry:" space, nor the token limiters' "nexo-tokens:" space, nor
// the schedules' "nexo-schedule:" space (a run taking a scheduled run's id would make the
// schedule skip that start), nor the notifiers' "nexo-notify:" space.
func ValidateRunID(id string) error {
	want := fmt.Sprintf("want 1-%d characters without '/', '\\', '?', '#', '%%', control characters or spaces at the ends, not \".\" or \"..\"", MaxRunIDLength)
	switch {
	case strings.TrimSpace(id) == "":
		return fmt.Errorf("run id %q is empty: %s", id, want)
	case len(id) > MaxRunIDLength:
		return fmt.Errorf("run id %.40q... is %d bytes: %s", id, len(id), want)
	case id == "." || id == "..":
		return fmt.Errorf("run id %q: %s", id, want)
	case strings.ContainsAny(id, "/\\?#%"), strings.IndexFunc(id, unicode.IsControl) >= 0, strings.TrimSpace(id) != id:
		return fmt.Errorf("run id %q: %s", id, want)
	case strings.HasPrefix(id, SessionIDPrefix):
		return fmt.Errorf("run id %q: ids starting with %q are reserved for sessions (starter session ...)", id, SessionIDPrefix)
	case IsRegistryID(id):
		return fmt.Errorf("run id %q: ids starting with %q are reserved for the task queues' worker registries", id, RegistryIDPrefix)
	case IsTokenLimiterID(id):
		return fmt.Errorf("run id %q: ids starting with %q are reserved for the endpoints' token limiters", id, TokenLimiterIDPrefix)
	case IsScheduleID(id):
		return fmt.Errorf("run id %q: ids starting with %q are reserved for the runs of schedules (starter schedule ...)", id, ScheduleIDPrefix)
	case IsNotifierID(id):
		return fmt.Errorf("run id %q: ids starting with %q are reserved for the receivers' notifiers", id, NotifierIDPrefix)
	}
	return nil
}
