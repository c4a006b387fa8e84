package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/nexo-temporal/nexo/api"
)

// readmeBlockCommands returns the `bin/starter` commands of the first ```sh block that
// contains marker, in the README or a guide under docs/ (see readmeBlock), each split into
// arguments as a shell would (single and double quotes, a trailing `# comment` dropped),
// without the leading bin/starter. A test runs them as printed, so the docs cannot drift
// from what works.
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

// docFile is one page a user reads: the README or a guide under docs/, by its path from
// the repository's root, with its text.
type docFile struct {
	name, text string
}

// docFiles are the README and every guide page (docs/*.md), README first, read at test
// time: the blocks the tests run as written are found in any of them.
func docFiles(t *testing.T) []docFile {
	t.Helper()
	names := []string{"README.md"}
	guides, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(guides)
	for _, g := range guides {
		names = append(names, filepath.ToSlash(strings.TrimPrefix(g, ".."+string(filepath.Separator))))
	}
	var files []docFile
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		files = append(files, docFile{name: name, text: string(b)})
	}
	return files
}

// docNames lists the files searched, for a failure message.
func docNames(files []docFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// readmeBlock returns the first fenced block of language lang (```yaml, ```sh) that
// contains marker, in the README or a guide under docs/. Within a file the first such block
// counts; a marker found in blocks of two files is ambiguous and fails the test, naming
// both, since which one a test runs must not depend on how the pages are ordered.
func readmeBlock(t *testing.T, lang, marker string) string {
	t.Helper()
	_, block := readmeBlockIn(t, lang, marker)
	return block
}

// readmeBlockIn is readmeBlock that also says which file the block is in.
func readmeBlockIn(t *testing.T, lang, marker string) (file, block string) {
	t.Helper()
	files := docFiles(t)
	for _, f := range files {
		for _, b := range strings.Split(f.text, "```"+lang+"\n")[1:] {
			b, _, _ = strings.Cut(b, "```")
			if !strings.Contains(b, marker) {
				continue
			}
			if file != "" {
				t.Fatalf("```%s blocks of both %s and %s contain %q: use a marker only one of them has", lang, file, f.name, marker)
			}
			file, block = f.name, b
			break
		}
	}
	if file == "" {
		t.Fatalf("no ```%s block containing %q in %s", lang, marker, docNames(files))
	}
	return file, block
}

// readmeText returns the file (README or guide) whose text contains marker, and that text
// from marker on; a marker in two files fails the test, naming both.
func readmeText(t *testing.T, marker string) (file, text string) {
	t.Helper()
	files := docFiles(t)
	for _, f := range files {
		i := strings.Index(f.text, marker)
		if i < 0 {
			continue
		}
		if file != "" {
			t.Fatalf("both %s and %s contain %q: use a marker only one of them has", file, f.name, marker)
		}
		file, text = f.name, f.text[i:]
	}
	if file == "" {
		t.Fatalf("none of %s contains %q", docNames(files), marker)
	}
	return file, text
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
// text) after, in the README or the guide that has it, with its fence line: ("```sh", body).
func readmeFence(t *testing.T, after string) (fence, body string) {
	t.Helper()
	file, s := readmeText(t, after)
	j := strings.Index(s, "\n```")
	if j < 0 {
		t.Fatalf("%s has no fenced block after %q", file, after)
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
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run --wait does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.TrimSpace(r.stdout) != id {
		t.Errorf("run --wait stdout = %q, want the run id alone (events and status on stderr)", r.stdout)
	}
	checks := []struct{ cmd, want string }{
		{"list --status suspended", id},
		{"approve " + id + " --wait", `"done":true`}, // stdout: the result alone
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

// readmeCommandBlocks are the blocks that show commands to type, in the README and every
// guide under docs/: every ```sh block and every transcript (a plain block with `$ `
// lines), indented ones included.
func readmeCommandBlocks(t *testing.T) []docFile {
	t.Helper()
	var blocks []docFile
	for _, f := range docFiles(t) {
		var cur []string
		lang, open := "", false
		for _, line := range strings.Split(f.text, "\n") {
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
					blocks = append(blocks, docFile{name: f.name, text: body})
				}
				continue
			}
			if open {
				cur = append(cur, trimmed)
			}
		}
	}
	return blocks
}

// readmeCommandTests names, for each block of commands of the README or a guide under
// docs/ (found by a line of it), the tests (or benchmarks) that run its commands, or why
// they cannot run here; such a block says so itself ("not run by the tests: ...").
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
	{marker: "go build -o examples/harness-loop/bin/harness-loop ./examples/harness-loop", tests: []string{"TestHarnessLoopExampleAsWritten"}},
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
	{marker: "# RECEIVER                        PENDING  FAILED  DELIVERED", tests: []string{"TestApprovalNotificationsOutliveTheRun"}},
	{marker: "bin/fakellm --script examples/approvals/notify.script.json", tests: []string{"TestNotificationsDemoAsWritten"}},
	{marker: "bin/fakellm --script examples/sandboxes/boxed.script.json", tests: []string{"TestDockerSandboxDemoAsWritten"}},
	{marker: `bin/starter agent scribe "write late.md"`, tests: []string{"TestApprovalDeadlineDenies"}},
	{marker: "bin/starter rerun <id>", tests: []string{"TestDashboardArtifactAndRerun"}},
	{marker: "go run ./examples/custom-worker --dev", tests: []string{"TestCustomWorkerExampleAsWritten"}},
	{marker: "$ starter check-replay", tests: []string{"TestCheckReplayLiveRuns"}},
	{marker: "bin/starter doctor --json", tests: []string{"TestDoctor"}},
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
	{marker: "bin/starter session interrupt assistant opts", tests: []string{"TestSessionPromptOptionsInterruptSteer"}},
	{marker: "worker --sandbox-host --pool gpu      # on each machine of pool gpu", tests: []string{"TestSandboxPoolHostInItsOwnNetworkMovesWithItsFiles"}},
	{marker: `bin/starter agent scribe "Say something." --wait`, tests: []string{"TestRetryingModelCallIsShown"}},
	{marker: `bin/starter agent invoicer "Read the invoice." --wait`, tests: []string{"TestAgentTypedResultAfterARetry"}},
	{marker: "$GW/v1/runs/$KEEPER_RUN", tests: []string{"TestGatewayLimitedTokens"}},
	{marker: "bin/starter schedule create pulse", tests: []string{"TestSchedulesAsWritten"}},
	{marker: "go test ./e2e -run '^$' -bench WallCase", tests: []string{"BenchmarkWallCase", "BenchmarkCompactedRun", "BenchmarkLongSession", "BenchmarkAgentTurns"}}, // docs/performance.md; .ci/run runs every benchmark once
}

// TestEveryReadmeCommandIsExercised: every block of commands in the README and in every
// guide under docs/ is run by a named test (or benchmark) that exists, or says in the block
// why it is not; a block added without either fails here, so no page can grow a command
// nobody runs.
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
			for _, kind := range []string{"Test", "Benchmark"} {
				if rest, ok := strings.CutPrefix(line, "func "+kind); ok {
					name, _, _ := strings.Cut(rest, "(")
					tests[kind+name] = true
				}
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
			if strings.Contains(block.text, e.marker) {
				if matched >= 0 {
					t.Errorf("%s: block matches %q and %q; make the markers distinct:\n%s", block.name, readmeCommandTests[matched].marker, e.marker, block.text)
				}
				matched = i
			}
		}
		if matched < 0 {
			t.Errorf("%s: block of commands is exercised by no test; add one (and an entry in readmeCommandTests), or say in the block why it cannot run here (\"not run by the tests: ...\"):\n%s", block.name, block.text)
			continue
		}
		used[matched] = true
		if e := readmeCommandTests[matched]; e.notRun != "" && !strings.Contains(block.text, "not run by the tests:") {
			t.Errorf("%s: block needs %s and is not run; it must say so (\"not run by the tests: ...\"):\n%s", block.name, e.notRun, block.text)
		}
	}
	for i, e := range readmeCommandTests {
		if !used[i] {
			t.Errorf("no block of the README or docs/ contains %q any more; remove or update its entry", e.marker)
		}
		for _, name := range e.tests {
			if !tests[name] {
				t.Errorf("block %q names test %s, which does not exist", e.marker, name)
			}
		}
	}
}

// readmeMaxLines is how long the README may grow: it is the front door (what Nexo is, the
// set-up, the Quickstart, the offline demos, where to go next); everything else is a guide
// under docs/.
const readmeMaxLines = 400

// TestReadmeIsAFrontDoor: the README stays at most readmeMaxLines lines, keeps the two
// set-up commands (the test command exactly as .ci/run runs it) and links every guide under
// docs/, and each guide opens as a page should: its title, a one-line purpose (one
// paragraph), then a list of its contents.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	files := docFiles(t)
	readme := files[0]
	if n := strings.Count(strings.TrimSuffix(readme.text, "\n"), "\n") + 1; n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the new text to the guide under docs/ it belongs to", n, readmeMaxLines)
	}
	// The two set-up commands stay in the README, the test command as .ci/run runs it.
	setup := strings.Split(strings.TrimSpace(readmeBlock(t, "sh", "GOTOOLCHAIN=go1.27.3 go run ./worker --dev")), "\n")
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range setup {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	if len(cmds) != 2 || !strings.HasSuffix(cmds[0], " go run ./worker --dev") {
		t.Fatalf("README.md's set-up block has %q, want the two commands: go run ./worker --dev, then go test", cmds)
	}
	toolchain, test, _ := strings.Cut(cmds[1], " ")
	if !strings.HasPrefix(toolchain, "GOTOOLCHAIN=") || !strings.HasPrefix(test, "go test ") ||
		!strings.Contains(string(ci), "\nexport "+toolchain+"\n") || !strings.Contains(string(ci), "\n"+test+"\n") {
		t.Errorf("README.md's test command %q is not what .ci/run runs (export %s, then %s on a line of its own)", cmds[1], toolchain, test)
	}
	if len(files) < 2 {
		t.Fatal("docs/ has no guide pages")
	}
	for _, f := range files[1:] {
		if !strings.Contains(readme.text, "]("+f.name+")") {
			t.Errorf("README.md does not link %s (want a link \"](%s)\" under Where to go next)", f.name, f.name)
		}
		paras := strings.Split(strings.TrimSpace(f.text), "\n\n")
		if len(paras) < 3 || !strings.HasPrefix(paras[0], "# ") || strings.Contains(paras[0], "\n") ||
			strings.HasPrefix(paras[1], "#") || strings.HasPrefix(paras[1], "- ") || !strings.HasPrefix(paras[2], "- [") {
			t.Errorf("%s does not open with a title, a one-paragraph purpose and a contents list:\n%s", f.name, strings.Join(paras[:min(3, len(paras))], "\n\n"))
		}
	}
}

// TestDocsLinksResolve: every relative link of the README and of the guides under docs/
// (outside code) names a file or folder of the repository, and its #anchor, if any, a
// heading of that page as GitHub makes anchors of headings, so a section moved to another
// page cannot leave a link pointing at nothing.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	files := docFiles(t)
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		anchors[f.name] = headingAnchors(f.text)
	}
	links := 0
	for _, f := range files {
		for _, l := range markdownLinks(f.text) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			links++
			path, frag, _ := strings.Cut(l.target, "#")
			target := f.name
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f.name), path)))
				if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", f.name, l.line, l.target, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			a, ok := anchors[target]
			if !ok {
				if !strings.HasSuffix(target, ".md") {
					t.Errorf("%s:%d: link %q has an anchor into %s, which is no page", f.name, l.line, l.target, target)
					continue
				}
				b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(target)))
				if err != nil {
					t.Fatal(err)
				}
				a = headingAnchors(string(b))
				anchors[target] = a
			}
			if !a[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", f.name, l.line, l.target, target, frag)
			}
		}
	}
	if links == 0 {
		t.Fatal("found no relative link at all: the link reader is broken")
	}
}

// mdLink is a link of a Markdown page: its target and the line it is on.
type mdLink struct {
	target string
	line   int
}

// markdownLinks returns the `](target)` links of text outside fenced blocks and inline
// code (a code span may run over lines within a paragraph).
func markdownLinks(text string) []mdLink {
	var links []mdLink
	fence := false
	var para []string
	start := 0
	flush := func() {
		s := stripCodeSpans(strings.Join(para, "\n"))
		for k := 0; ; {
			i := strings.Index(s[k:], "](")
			if i < 0 {
				break
			}
			i += k + 2
			j := strings.IndexAny(s[i:], ") \n\t")
			if j < 0 {
				break
			}
			if s[i+j] == ')' && j > 0 {
				links = append(links, mdLink{target: s[i : i+j], line: start + strings.Count(s[:i], "\n")})
			}
			k = i
		}
		para = nil
	}
	for n, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			flush()
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			start = n + 1
		}
		para = append(para, line)
	}
	flush()
	return links
}

// stripCodeSpans blanks out inline code (a run of N backticks up to the next run of N) so
// that code such as Checkpoint[T](ctx, ...) is not read as a link; newlines are kept for
// line numbers.
func stripCodeSpans(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '`' {
			b.WriteByte(s[i])
			i++
			continue
		}
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		ticks := strings.Repeat("`", n)
		end := -1
		for k := i + n; k < len(s); {
			j := strings.Index(s[k:], ticks)
			if j < 0 {
				break
			}
			j += k
			m := 0
			for j+m < len(s) && s[j+m] == '`' {
				m++
			}
			if m == n {
				end = j
				break
			}
			k = j + m
		}
		if end < 0 { // an unclosed run is plain text
			b.WriteString(ticks)
			i += n
			continue
		}
		b.WriteString(strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s[i:end+n]))
		i = end + n
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown page (outside
// fenced blocks): lower case, punctuation but - and _ dropped, spaces as -, and -1, -2 ...
// after a repeated one.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if fence || hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
			continue
		}
		slug := headingSlug(line[hashes+1:])
		if n, ok := seen[slug]; ok {
			seen[slug] = n + 1
			slug = fmt.Sprintf("%s-%d", slug, n+1)
		} else {
			seen[slug] = 0
		}
		anchors[slug] = true
	}
	return anchors
}

// headingSlug is GitHub's anchor of one heading's text.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestHeadingSlug(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"A changed or corrupt store: `store corrupt` and `store verify`": "a-changed-or-corrupt-store-store-corrupt-and-store-verify",
		"Every sandbox belongs to its run's host, on any fleet":          "every-sandbox-belongs-to-its-runs-host-on-any-fleet",
		"Example workflows (registered by the shipped worker)":           "example-workflows-registered-by-the-shipped-worker",
		"Set-up: two commands": "set-up-two-commands",
	} {
		if got := headingSlug(heading); got != want {
			t.Errorf("headingSlug(%q) = %q, want %q", heading, got, want)
		}
	}
	links := markdownLinks("see [a](docs/a.md#x) and `Checkpoint[T](ctx, \"n\")`,\n`x\n[b](c.md)` [d](e.md)\n```sh\n[f](g.md)\n```\n")
	var got []string
	for _, l := range links {
		got = append(got, fmt.Sprintf("%s@%d", l.target, l.line))
	}
	if want := "docs/a.md#x@1 e.md@3"; strings.Join(got, " ") != want {
		t.Errorf("markdownLinks = %q, want %q", strings.Join(got, " "), want)
	}
}

// printedSummary is the check-replay summary line ("12 replayed: 12 ok, 0 failed") that the
// README or docs block containing marker prints as its output, without its "#": "" when
// the block prints none. A figure that depends on what is committed or on the user's
// server is printed with N ("N replayed: N ok, 0 failed"), which any count satisfies.
func printedSummary(t *testing.T, marker string) string {
	t.Helper()
	for _, line := range strings.Split(readmeBlock(t, "sh", marker), "\n") {
		if l := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")); strings.Contains(l, " replayed: ") {
			return l
		}
	}
	return ""
}

// checkPrintedSummary fails the test when the block's printed summary line is not the one
// the command printed (out), N standing for any count: a figure in the docs that drifts
// from what the command prints (45 printed, 88 replayed) is caught here.
func checkPrintedSummary(t *testing.T, marker, out string) {
	t.Helper()
	want := printedSummary(t, marker)
	if want == "" {
		t.Fatalf("the block with %q prints no summary line (N replayed: ...)", marker)
	}
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(want), "N", `[0-9]+`) + "$")
	for _, line := range strings.Split(out, "\n") {
		if re.MatchString(strings.TrimSpace(line)) {
			return
		}
	}
	t.Errorf("the docs print %q after %q; the command printed no such line:\n%s", want, marker, out)
}
