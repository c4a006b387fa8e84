package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestUsageErrors: a mistyped command or flag is named with what was meant, the exit code
// is 2, and stderr has the error and the one usage line of the command, not its whole help.
// None of these reach Temporal.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		argv       []string
		err, usage string
	}{
		{[]string{"lsit"}, `starter: unknown command "lsit" (did you mean "list"?)`,
			"Usage: starter <command> [arguments] [flags]   (starter --help lists the commands)"},
		{[]string{"frobnicate"}, `starter: unknown command "frobnicate"`,
			"Usage: starter <command> [arguments] [flags]   (starter --help lists the commands)"},
		{[]string{"--verison"}, `starter: unknown flag --verison (did you mean --version?)`,
			"Usage: starter <command> [arguments] [flags]   (starter --help lists the commands)"},
		{[]string{"run", "DocumentApproval", "--inptu", "{}"}, "starter run: unknown flag --inptu (did you mean --input?)",
			"Usage: starter run <workflow> [flags]   (starter run --help lists the flags)"},
		{[]string{"list", "--limt", "3"}, "starter list: unknown flag --limt (did you mean --limit?)",
			"Usage: starter list [flags]   (starter list --help lists the flags)"},
		{[]string{"list", "--limit", "-1"}, "starter list: --limit -1: want 1 to 1000",
			"Usage: starter list [flags]   (starter list --help lists the flags)"},
		{[]string{"list", "--limit", "0"}, "starter list: --limit 0: want 1 to 1000",
			"Usage: starter list [flags]   (starter list --help lists the flags)"},
		{[]string{"list", "--limit", "100000000"}, "starter list: --limit 100000000: want 1 to 1000",
			"Usage: starter list [flags]   (starter list --help lists the flags)"},
		{[]string{"show"}, "starter show: want a run id, got 0 argument(s)",
			"Usage: starter show <run-id> [flags]   (starter show --help lists the flags)"},
		{[]string{"deny", "r1"}, "starter deny: deny needs --reason",
			"Usage: starter deny <run-id> --reason TEXT [flags]   (starter deny --help lists the flags)"},
		{[]string{"session", "promtp", "scribe", "a"}, `starter session: unknown session subcommand "promtp" (did you mean "prompt"?)`,
			sessionUsage},
		{[]string{"session", "frob"}, `starter session: unknown session subcommand "frob" (want prompt, interrupt, show, watch, fork, list or close)`,
			sessionUsage},
		{[]string{"session", "fork", "scribe", "a", "--at", "two"}, "starter session: --at \"two\" is not a turn number: want 1 for the first turn, as `starter session show scribe a` numbers them",
			sessionUsage},
		{[]string{"session", "fork", "scribe", "a"}, "starter session: session fork needs --at <turn> (the turns are numbered in `starter session show scribe a`)",
			sessionUsage},
		{[]string{"run", "X", "--input", "{nope"}, "starter run: --input is not valid JSON: {nope",
			"Usage: starter run <workflow> [flags]   (starter run --help lists the flags)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.argv, &stdout, &stderr)
		want := tc.err + "\n" + tc.usage + "\n"
		if code != 2 || stderr.String() != want {
			t.Errorf("starter %s: exit %d, stderr\n%s\nwant exit 2, stderr\n%s", strings.Join(tc.argv, " "), code, stderr.String(), want)
		}
		if stdout.Len() != 0 {
			t.Errorf("starter %s: stdout %q, want nothing", strings.Join(tc.argv, " "), stdout.String())
		}
	}
}

const sessionUsage = `Usage: starter session prompt <agent> <instance> "text" | interrupt <agent> <instance> | show <agent> <instance> | watch <agent> <instance> | fork <agent> <instance> --at <turn> | list | close <agent> <instance> [flags]   (starter session --help lists the flags)`

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("starter --version: exit %d, stderr %q", code, stderr.String())
	}
	// A test binary's main module is "(devel)" or a version; either way one line, named.
	if out := stdout.String(); !strings.HasPrefix(out, "starter ") || strings.Count(out, "\n") != 1 || len(out) < len("starter x\n") {
		t.Errorf("starter --version printed %q", out)
	}
}

func TestHelpIsExitZeroOnStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--input") {
		t.Errorf("starter run --help: exit %d stdout %q", code, stdout.String())
	}
}

// TestBuildImageHelpHasNoTemporalFlags: build-image talks to the Docker engine only, so
// its help lists --tag and none of the Temporal or config flags, whichever way help is
// asked for; the sandbox commands that read runs keep them.
func TestBuildImageHelpHasNoTemporalFlags(t *testing.T) {
	for _, argv := range [][]string{
		{"sandbox", "build-image", "--help"},
		{"help", "sandbox", "build-image"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), argv, &stdout, &stderr)
		out := stdout.String()
		if code != 0 || !strings.Contains(out, "Usage: starter sandbox build-image") || !strings.Contains(out, "--tag") {
			t.Errorf("starter %s: exit %d, stdout %q, want build-image's usage with --tag", strings.Join(argv, " "), code, out)
		}
		for _, f := range []string{"--address", "--namespace", "--task-queue", "--config", "--at"} {
			if strings.Contains(out, f) {
				t.Errorf("starter %s lists %s, which build-image does not use:\n%s", strings.Join(argv, " "), f, out)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"sandbox", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--address") {
		t.Errorf("starter sandbox --help (files, cat, diff read runs): exit %d, stdout %q, want the Temporal flags", code, stdout.String())
	}
	stdout.Reset()
	code := run(context.Background(), []string{"sandbox", "build-image", "--address", "x:1"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "unknown flag --address") {
		t.Errorf("starter sandbox build-image --address: exit %d, stderr %q, want a usage error", code, stderr.String())
	}
}

// TestServerDownNamesWhereTheAddressCameFrom: with nothing listening, the error names the
// address and where it was set, so the user knows what to change: here the environment
// variable, not the config key it feeds.
func TestServerDownNamesWhereTheAddressCameFrom(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./nexo.yaml
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{env: addr, want: "connect to Temporal at " + addr + " (from env NEXO_TEMPORAL_ADDRESS;"},
		{args: []string{"--address", addr}, want: "connect to Temporal at " + addr + " (from flag --address;"},
	} {
		t.Setenv("NEXO_TEMPORAL_ADDRESS", tc.env)
		t.Setenv("TEMPORAL_ADDRESS", "")
		t.Setenv("NEXO_TEMPORAL_PROFILE", "off")
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"list"}, tc.args...), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("starter list %v with NEXO_TEMPORAL_ADDRESS=%q: exit %d, stderr %q, want exit 1 and %q", tc.args, tc.env, code, stderr.String(), tc.want)
		}
	}
}
