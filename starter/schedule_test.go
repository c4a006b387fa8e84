package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestScheduleUsageErrors: a schedule command line that cannot be right is refused with
// exit 2, naming what is wrong, before anything reaches Temporal.
func TestScheduleUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		err  string
	}{
		{[]string{"schedule"}, "want a subcommand: create, list, pause, unpause or delete"},
		{[]string{"schedule", "craete", "x"}, `unknown schedule subcommand "craete" (did you mean "create"?)`},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard"}, "schedule create nightly wants exactly one of --every DURATION or --cron SPEC"},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--every", "1h", "--cron", "0 2 * * *"}, "schedule create nightly wants exactly one of --every DURATION or --cron SPEC"},
		{[]string{"schedule", "create", "nightly", "--every", "1h"}, "schedule create nightly wants --workflow <type> (the workflow its runs are of) or --agent <name> --prompt TEXT"},
		{[]string{"schedule", "create", "nightly", "--agent", "scribe", "--every", "1h"}, "--agent and --prompt go together"},
		{[]string{"schedule", "create", "nightly", "--agent", "scribe", "--prompt", "x", "--workflow", "BuildDashboard", "--every", "1h"}, "--agent is instead of --workflow and --input"},
		{[]string{"schedule", "create", "nightly", "--agent", "scribe", "--prompt", " ", "--every", "1h"}, "--agent and --prompt must not be empty"},
		{[]string{"schedule", "list", "--prompt", "x"}, "--prompt is for schedule create, not schedule list"},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--every", "100ms"}, "--every 100ms: want an interval of at least 1s"},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--every", "-1h"}, "--every -1h0m0s: want an interval of at least 1s"},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--every", "1.5s"}, "--every 1.5s: want a whole number of seconds"},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--cron", ""}, `--cron is empty`},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--cron", "  "}, `--cron is empty`},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--every", "soon"}, `invalid argument "soon" for "--every"`},
		{[]string{"schedule", "create", "my nightly", "--workflow", "BuildDashboard", "--every", "1h"}, `schedule name "my nightly"`},
		{[]string{"schedule", "create", "--workflow", "BuildDashboard", "--every", "1h"}, "schedule create wants a schedule name, got 0 argument(s)"},
		{[]string{"schedule", "create", "nightly", "--workflow", "BuildDashboard", "--every", "1h", "--input", "{nope"}, "--input is not valid JSON"},
		{[]string{"schedule", "pause"}, "schedule pause wants a schedule name, got 0 argument(s)"},
		{[]string{"schedule", "delete", "a", "b"}, "schedule delete wants a schedule name, got 2 argument(s)"},
		{[]string{"schedule", "list", "x"}, `schedule list takes no arguments`},
		{[]string{"schedule", "pause", "nightly", "--every", "1h"}, "--every is for schedule create, not schedule pause"},
		{[]string{"schedule", "delete", "nightly", "--note", "why"}, "--note is for schedule pause and unpause, not schedule delete"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.argv, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.err) || !strings.Contains(stderr.String(), "Usage: starter schedule ") {
			t.Errorf("starter %q: exit %d, stderr\n%s\nwant exit 2 and %q with the usage line", tc.argv, code, stderr.String(), tc.err)
		}
		if stdout.Len() != 0 {
			t.Errorf("starter %q: stdout %q, want nothing", tc.argv, stdout.String())
		}
	}
}
