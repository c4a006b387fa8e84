package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/nexo-temporal/nexo/api"
)

// readmeBlockCommands returns the `bin/starter` commands of the README's first ```sh
// block that contains marker, each split into arguments as a shell would (single and
// double quotes, a trailing `# comment` dropped), without the leading bin/starter. A test
// runs them as printed, so the README cannot drift from what works.
func readmeBlockCommands(t *testing.T, marker string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, line := range strings.Split(readmeBlock(t, "sh", marker), "\n") {
		words := shellWords(t, line)
		if len(words) > 0 && words[0] == "bin/starter" {
			cmds = append(cmds, words[1:])
		}
	}
	return cmds
}

// readmeBlock returns the first fenced block of language lang (```yaml, ```sh) in the
// README that contains marker.
func readmeBlock(t *testing.T, lang, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	for _, block := range strings.Split(string(b), "```"+lang+"\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("README has no ```%s block containing %q", lang, marker)
	return ""
}

// shellWords splits line into words with sh's quoting rules for ' and ", and drops a
// comment that starts a word.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("README line has an unclosed %c: %s", quote, line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// substitute replaces the README's placeholders (<id>, <new-id>) in args.
func substitute(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, k, v)
		}
		out[i] = a
	}
	return out
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	got := shellWords(t, `bin/starter run X --input '{"a":["b c"]}' --wait   # fails "here"`)
	want := []string{"bin/starter", "run", "X", "--input", `{"a":["b c"]}`, "--wait"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellWords = %q, want %q", got, want)
	}
}

// readmeFence returns the first fenced block of any language after the heading (or other
// text) after, with its fence line: ("```sh", body).
func readmeFence(t *testing.T, after string) (fence, body string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	s := string(b)
	i := strings.Index(s, after)
	if i < 0 {
		t.Fatalf("README has no %q", after)
	}
	s = s[i:]
	j := strings.Index(s, "\n```")
	if j < 0 {
		t.Fatalf("README has no fenced block after %q", after)
	}
	s = s[j+1:]
	fence, s, _ = strings.Cut(s, "\n")
	body, _, _ = strings.Cut(s, "\n```")
	return fence, body + "\n"
}

// TestStarterCLITranscriptAsWritten runs each `$ starter ...` line of the README's starter
// CLI transcript and compares what it prints, exactly, with the lines the README shows
// under it, and the exit code with the README's rule (2 for a usage mistake).
func TestStarterCLITranscriptAsWritten(t *testing.T) {
	t.Parallel()
	_, block := readmeFence(t, "## The starter CLI")
	type step struct {
		args []string
		want string
	}
	var steps []step
	for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ starter "); ok {
			steps = append(steps, step{args: shellWords(t, cmd)})
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("README's starter CLI transcript starts with %q, not a $ starter command", line)
		}
		steps[len(steps)-1].want += line + "\n"
	}
	if len(steps) < 3 {
		t.Fatalf("README's starter CLI transcript has %d commands, want at least 3 (lsit, --inptu, docid)", len(steps))
	}
	p := newPlatform(t)
	p.start()
	pollUntil(t, 20*time.Second, "the registry knows DocumentApproval's input", func(context.Context) error {
		if r := p.starter("workflows", "--json"); !strings.Contains(r.stdout, `"doc_id"`) {
			return fmt.Errorf("starter workflows --json: %s %s", r.stdout, r.stderr)
		}
		return nil
	})
	for _, s := range steps {
		r := p.starter(s.args...)
		if got := r.stdout + r.stderr; r.code != 2 || got != s.want {
			t.Errorf("starter %s: exit %d, printed\n%s\nthe README shows (and exit 2)\n%s", strings.Join(s.args, " "), r.code, got, s.want)
		}
	}
}

// TestQuickstartAsWritten runs the README's set-up and Quickstart as printed: the worker
// prints the lines the README shows (its ports and Docker line aside), and the Quickstart's
// commands, with the run id in place of 019ad5e3-..., do what their comments say.
func TestQuickstartAsWritten(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()

	// What `worker --dev` prints, as the README shows it, with this platform's ports.
	_, shown := readmeFence(t, "`worker --dev` prints where everything is:")
	ports := strings.NewReplacer("127.0.0.1:7233", fmt.Sprintf("127.0.0.1:%d", p.frontend),
		"127.0.0.1:8233", fmt.Sprintf("127.0.0.1:%d", p.ui), "127.0.0.1:8234", fmt.Sprintf("127.0.0.1:%d", p.gateway),
		"database .nexo/temporal.db", "database "+filepath.Join(p.dir, ".nexo", "temporal.db"))
	printed := p.output()
	for _, line := range strings.Split(strings.TrimSpace(shown), "\n") {
		want := ports.Replace(line)
		if strings.HasPrefix(line, "Docker sandboxes:") && !strings.Contains(printed, "Docker sandboxes: enabled") {
			want = "Docker sandboxes: unavailable (no Docker engine answered)" // no engine on this machine
		}
		if !strings.Contains(printed, want) {
			t.Errorf("worker --dev does not print the README's line %q (as %q here):\n%s", line, want, printed)
		}
	}

	var cmds [][]string
	for _, marker := range []string{"bin/starter list --status suspended", "bin/starter logs 019ad5e3-..."} {
		cmds = append(cmds, readmeBlockCommands(t, marker)...)
	}
	want := []string{"run DocumentApproval --input {\"doc_id\":\"42\"} --wait", "list --status suspended",
		"approve 019ad5e3-... --wait", "show 019ad5e3-...", "logs 019ad5e3-..."}
	var got []string
	for _, c := range cmds {
		got = append(got, strings.Join(c, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the README's Quickstart commands changed; update this test with them:\n%s", strings.Join(got, "\n"))
	}

	r := p.starter(cmds[0]...)
	const started = "started DocumentApproval run "
	i := strings.Index(r.stderr, started)
	if r.code != 0 || i < 0 {
		t.Fatalf("starter %s: exit %d\n%s\n%s", got[0], r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stderr[i+len(started):])[0]
	vars := map[string]string{"019ad5e3-...": id}
	// The README's comments under the run: each event line (#N, type, data) is printed.
	block := readmeBlock(t, "sh", "bin/starter list --status suspended")
	events := 0
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "#"))
		if len(f) < 4 || !strings.HasPrefix(f[0], "#") || !strings.HasPrefix(line, "#     #") {
			continue
		}
		events++
		num, typ, data := f[0], f[2], strings.Join(f[3:], " ")
		found := false
		for _, l := range strings.Split(r.stderr, "\n") {
			lf := strings.Fields(l)
			if len(lf) >= 3 && lf[0] == num && lf[2] == typ && strings.Contains(l, data) {
				found = true
			}
		}
		if !found {
			t.Errorf("run --wait does not print the README's event %s %s %s:\n%s", num, typ, data, r.stderr)
		}
	}
	if events != 3 {
		t.Errorf("found %d event lines in the README's Quickstart comments, want 3", events)
	}
	for _, want := range []string{"run " + id + " is suspended: awaiting approval", "next: starter approve " + id} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run --wait does not say %q:\n%s", want, r.stdout)
		}
	}
	checks := []struct{ cmd, want string }{
		{"list --status suspended", id},
		{"approve " + id + " --wait", "run " + id + " is done"},
		{"show " + id, "done"},
		{"logs " + id, "#1"},
	}
	for k, c := range checks {
		out := p.ok(substitute(cmds[k+1], vars)...)
		if !strings.Contains(out, c.want) {
			t.Errorf("starter %s does not print %q:\n%s", c.cmd, c.want, out)
		}
	}
	if r := p.starter("approve", id); r.code != 1 || !strings.Contains(r.stderr, "run "+id+" is not suspended (done)") {
		t.Errorf("approving the done run again: exit %d, %q; the README promises exit 1 and `is not suspended (done)`", r.code, r.stderr)
	}
}

// TestApproveWithTheTemporalCLIAsWritten runs the README's `temporal workflow signal`
// command as printed (TEMPORAL_ADDRESS points it at this platform) and the run it resumes
// ends approved by ada. It needs the temporal CLI, which nothing else here does: it skips
// without it (TestApproveWithRawSignal sends the same signal through the SDK).
func TestApproveWithTheTemporalCLIAsWritten(t *testing.T) {
	t.Parallel()
	bin := temporalCLI()
	if bin == "" {
		t.Skip("the temporal CLI is not installed (go install github.com/temporalio/cli/cmd/temporal@v1.5.1): the README's temporal command is not run here")
	}
	block := readmeBlock(t, "sh", "temporal workflow signal")
	args := shellWords(t, strings.ReplaceAll(block, "\\\n", " "))
	if len(args) < 3 || args[0] != "temporal" || args[1] != "workflow" || args[2] != "signal" {
		t.Fatalf("README's temporal block = %q", args)
	}
	p := newPlatform(t)
	p.start()
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"42"}`))
	p.waitStatus(id, api.StatusSuspended)
	cmd := exec.Command(bin, substitute(args[1:], map[string]string{"019ad5e3-...": id})...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", p.frontend))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	rec := p.waitStatus(id, api.StatusDone)
	var res map[string]any
	if err := json.Unmarshal(rec.Result, &res); err != nil || res["approver"] != "ada" || res["done"] != true {
		t.Errorf("result after the temporal CLI's signal = %s", rec.Result)
	}
}

// readmeCommandBlocks are the README's blocks that show commands to type: every ```sh
// block and every transcript (a plain block with `$ ` lines), indented ones included.
func readmeCommandBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	var blocks []string
	var cur []string
	lang, open := "", false
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(trimmed, "```"); ok {
			if !open {
				lang, open, cur = rest, true, nil
				continue
			}
			open = false
			body := strings.Join(cur, "\n")
			transcript := lang == "" && slices.ContainsFunc(cur, func(l string) bool { return strings.HasPrefix(l, "$ ") })
			if lang == "sh" || transcript {
				blocks = append(blocks, body)
			}
			continue
		}
		if open {
			cur = append(cur, trimmed)
		}
	}
	return blocks
}

// readmeCommandTests names, for each README block of commands (found by a line of it),
// the tests that run its commands, or why they cannot run here; such a block says so
// itself ("not run by the tests: ...").
var readmeCommandTests = []struct {
	marker string
	tests  []string // in this repository's *_test.go files
	notRun string
}{
	{marker: "GOTOOLCHAIN=go1.27.3 go run ./worker --dev", tests: []string{"TestQuickstartAsWritten"}}, // go test ./... is what .ci/run runs
	{marker: "bin/starter list --status suspended", tests: []string{"TestQuickstartAsWritten"}},
	{marker: "bin/starter logs 019ad5e3-...", tests: []string{"TestQuickstartAsWritten"}},
	{marker: "temporal workflow signal --workflow-id", tests: []string{"TestApproveWithTheTemporalCLIAsWritten", "TestApproveWithRawSignal"}},
	{marker: "bin/fakellm --script examples/agents/scribe.script.json", tests: []string{"TestOfflineAgentDemoAsWritten"}},
	{marker: `bin/starter deny <id> --reason "not now"`, tests: []string{"TestOfflineAgentDemoAsWritten"}},
	{marker: "bin/starter approve <id> --always --wait", tests: []string{"TestOfflineAgentDemoAsWritten"}},
	{marker: "bin/starter answer <id> --call 2.1", tests: []string{"TestDecideAsWritten"}},
	{marker: "export OPENAI_API_KEY=sk-...", tests: []string{"TestRealModelSectionAsWritten"}},
	{marker: "export TICKETS_MCP_TOKEN=...", notRun: "your MCP servers"},
	{marker: "bin/fakellm --script examples/mcp/librarian.script.json", tests: []string{"TestMCPExampleAsWritten"}},
	{marker: "go run ./starter mcp login researcher docs", tests: []string{"TestMCPLoginStatusLogout", "TestAgentMCPOAuth"}},
	{marker: "bin/fakellm --script examples/skills/reporter.script.json", tests: []string{"TestSkillsExampleAsWritten", "TestSkillExampleEndToEnd"}},
	{marker: "bin/fakellm --script examples/sessions/assistant.script.json", tests: []string{"TestSessionExampleAsWritten"}},
	{marker: `$ bin/starter session prompt scribe u42 "Write it down."`, tests: []string{"TestSessionApprovalPromptApproveWatch"}},
	{marker: "$ starter lsit", tests: []string{"TestStarterCLITranscriptAsWritten"}},
	{marker: "curl -s -X POST $GW/v1/runs", tests: []string{"TestAPIAsWritten"}},
	{marker: "export NEXO_ADA_TOKEN=$(openssl rand -hex 32)", tests: []string{"TestAccessControlAsWritten"}},
	{marker: "bin/starter approvals --agent keeper", tests: []string{"TestApprovalsInbox"}},
	{marker: `bin/starter agent scribe "write late.md"`, tests: []string{"TestApprovalDeadlineDenies"}},
	{marker: "bin/starter rerun <id>", tests: []string{"TestDashboardArtifactAndRerun"}},
	{marker: "go run ./examples/custom-worker --dev", tests: []string{"TestCustomWorkerExampleAsWritten"}},
	{marker: "$ starter check-replay", tests: []string{"TestCheckReplayLiveRuns"}},
	{marker: "go run ./examples/custom-worker check-replay --config", tests: []string{"TestCustomWorkerExampleAsWritten"}},
	{marker: "bin/starter worker new ../acme --module example.com/acme", tests: []string{"TestWorkerNewAsWritten"}},
	{marker: "bin/starter show <run-id>", tests: []string{"TestFinishedRunsWithoutAWorker"}},
	{marker: "bin/starter store gc --dry-run", tests: []string{"TestStoreGCRemovesOnlyWhatNoRunNeeds"}},
	{marker: "bin/starter store verify --json", tests: []string{"TestChangedThreadSegmentFailsTheRunAtOnce"}},
	{marker: "bin/starter check-replay --histories workflows/testdata", tests: []string{"TestCheckReplayRecordedHistories"}},
	{marker: "temporal operator search-attribute create", notRun: "the temporal CLI and a cluster"},
	{marker: "docker compose -f docker-compose.temporal.yml up -d", notRun: "images from Docker Hub"},
	{marker: "go test ./e2e -run TestFleetRateLimit", tests: []string{"TestFleetRateLimit"}},
	{marker: "go test ./e2e -run TestFleetTokenLimit", tests: []string{"TestFleetTokenLimit"}},
	{marker: "bin/starter approve <id> --budget +50000", tests: []string{"TestBudgetEndToEnd"}},
	{marker: "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", notRun: "your OpenTelemetry collector"},
	{marker: "-f docker-compose.docker-sandbox.yml up -d", notRun: "images from Docker Hub and a Docker engine"},
	{marker: "TEMPORAL_ADDRESS=my-ns.a1b2c.tmprl.cloud:7233", notRun: "a Temporal Cloud namespace"},
	{marker: "go run ./bench chaos --server embedded", notRun: "minutes of SIGKILLs on several workers"},
	{marker: "starter sandbox files <run> [--at <call-id>]", tests: []string{"TestWorkspaceFilesAtEveryCall"}},
	{marker: "bin/starter session fork scribe src --at 2 --id fork1", tests: []string{"TestSessionForkAtTurn"}},
	{marker: "worker --sandbox-host --pool gpu      # on each machine of pool gpu", tests: []string{"TestSandboxPoolHostInItsOwnNetworkMovesWithItsFiles"}},
	{marker: `bin/starter agent scribe "Say something." --wait`, tests: []string{"TestRetryingModelCallIsShown"}},
	{marker: "$GW/v1/runs/$KEEPER_RUN", tests: []string{"TestGatewayLimitedTokens"}},
	{marker: "bin/starter schedule create pulse", tests: []string{"TestSchedulesAsWritten"}},
}

// TestEveryReadmeCommandIsExercised: every block of commands in the README is run by a
// named test that exists, or says in the README why it is not; a block added without
// either fails here, so the README cannot grow a command nobody runs.
func TestEveryReadmeCommandIsExercised(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "func Test"); ok {
				name, _, _ := strings.Cut(rest, "(")
				tests["Test"+name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	used := make([]bool, len(readmeCommandTests))
	for _, block := range readmeCommandBlocks(t) {
		matched := -1
		for i, e := range readmeCommandTests {
			if strings.Contains(block, e.marker) {
				if matched >= 0 {
					t.Errorf("README block matches %q and %q; make the markers distinct:\n%s", readmeCommandTests[matched].marker, e.marker, block)
				}
				matched = i
			}
		}
		if matched < 0 {
			t.Errorf("README block of commands is exercised by no test; add one (and an entry in readmeCommandTests), or say in the block why it cannot run here (\"not run by the tests: ...\"):\n%s", block)
			continue
		}
		used[matched] = true
		if e := readmeCommandTests[matched]; e.notRun != "" && !strings.Contains(block, "not run by the tests:") {
			t.Errorf("README block needs %s and is not run; it must say so (\"not run by the tests: ...\"):\n%s", e.notRun, block)
		}
	}
	for i, e := range readmeCommandTests {
		if !used[i] {
			t.Errorf("no README block contains %q any more; remove or update its entry", e.marker)
		}
		for _, name := range e.tests {
			if !tests[name] {
				t.Errorf("README block %q names test %s, which does not exist", e.marker, name)
			}
		}
	}
}
