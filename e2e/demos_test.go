package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// The demos the README and docs/ print ship their config and fake-model script under
// examples/ (issue 29, item 6): these tests find them the way a reader does, through the
// `bin/fakellm --script` and `bin/worker --dev --config` lines of the demo's block, and
// run the demo's commands against them.

// shippedDemo returns the config that the docs block of commands containing marker starts
// the worker with (`bin/worker --dev --config C`), its llm.base_url pointed at the fake
// model the block starts (`bin/fakellm --script S`), served for the test. A block that
// names no such files, or files that are not there, fails the test.
func shippedDemo(t *testing.T, marker string) (cfg string, model *fakellm.Server) {
	t.Helper()
	var script, config string
	block := readmeBlock(t, "sh", marker)
	for _, line := range strings.Split(block, "\n") {
		w := shellWords(t, line)
		switch {
		case len(w) == 3 && w[0] == "bin/fakellm" && w[1] == "--script":
			script = w[2]
		case len(w) == 4 && w[0] == "bin/worker" && w[1] == "--dev" && w[2] == "--config":
			config = w[3]
		}
	}
	if script == "" || config == "" {
		t.Fatalf("the demo's block names no shipped script (bin/fakellm --script S) or config (bin/worker --dev --config C):\n%s", block)
	}
	for _, f := range []string{script, config} {
		if !strings.HasPrefix(f, "examples/") {
			t.Errorf("the demo's %s is not shipped under examples/", f)
		}
	}
	return demoConfig(t, config, script)
}

// TestDocsExcerptsMatchExamples: a yaml block of the README or docs/ that opens with
// `# examples/<file> (excerpt)` shows lines of that shipped file as they are there, in
// order, so an excerpt a reader copies cannot drift from the file the demo runs.
func TestDocsExcerptsMatchExamples(t *testing.T) {
	t.Parallel()
	excerpts := 0
	for _, f := range docFiles(t) {
		for _, b := range strings.Split(f.text, "```yaml\n")[1:] {
			b, _, _ = strings.Cut(b, "```")
			lines := strings.Split(strings.TrimSuffix(b, "\n"), "\n")
			name, ok := strings.CutPrefix(lines[0], "# ")
			if !ok || !strings.HasPrefix(name, "examples/") {
				continue
			}
			name, _ = strings.CutSuffix(name, " (excerpt)")
			excerpts++
			shipped, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
			if err != nil {
				t.Errorf("%s: excerpt of %s: %v", f.name, name, err)
				continue
			}
			rest := strings.Split(string(shipped), "\n")
			for _, l := range lines[1:] {
				i := 0
				for i < len(rest) && rest[i] != l {
					i++
				}
				if i == len(rest) {
					t.Errorf("%s: excerpt of %s has a line the file does not have (after the lines before it):\n%s", f.name, name, l)
					break
				}
				rest = rest[i+1:]
			}
		}
	}
	if excerpts == 0 {
		t.Fatal("found no excerpt of a shipped example: the docs' demos name none any more, or the reader is broken")
	}
}

// TestDockerSandboxDemoAsWritten runs docs/sandboxes.md's Docker demo as printed, with the
// shipped examples/sandboxes config and script: the shell command waits for a human, runs
// in the container once approved (not root, loopback only), notes.md outlives the
// container as an artifact, and the model's last word says what happened; a second run
// denied instead ends with the model saying nothing ran, and no notes.
func TestDockerSandboxDemoAsWritten(t *testing.T) {
	requireSandboxImage(t)
	const marker = "bin/fakellm --script examples/sandboxes/boxed.script.json"
	var lines []string
	cmds := readmeBlockCommands(t, marker)
	for _, c := range cmds {
		lines = append(lines, strings.Join(c, " "))
	}
	want := []string{
		"sandbox build-image",
		"agent boxed Look around the box and keep notes. --wait",
		"approve <id> --wait",
		"artifact <id> notes.md",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the Docker demo's commands changed; update this test with them:\n%s", strings.Join(lines, "\n"))
	}
	cfg, _ := shippedDemo(t, marker)
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	id := ""
	run := func(i int) result {
		t.Helper()
		r := p.starter(substitute(cmds[i], map[string]string{"<id>": id})...)
		if r.code != 0 {
			t.Fatalf("starter %s: exit %d\n%s\n%s\nworker:\n%s", lines[i], r.code, r.stdout, r.stderr, p.output())
		}
		t.Logf("$ starter %s\n%s%s", lines[i], r.stdout, r.stderr)
		if k := strings.Index(r.stdout+r.stderr, "started agent boxed run "); k >= 0 {
			id = strings.Fields((r.stdout + r.stderr)[k+len("started agent boxed run "):])[0]
		}
		return r
	}
	run(0) // the image is there already (TestMain built it the same way): building it again is quick
	if r := run(1); !strings.Contains(r.stdout+r.stderr, "suspended: approval of shell (call 1.1)") {
		t.Fatalf("not suspended on the shell call 1.1:\n%s\n%s", r.stdout, r.stderr)
	}
	const done = "I looked around the box and wrote notes.md: a non-root user, no network but loopback."
	if r := run(2); !strings.Contains(r.stdout, done) {
		t.Errorf("approve --wait does not end with the model's notes:\n%s\n%s", r.stdout, r.stderr)
	}
	rec := p.waitStatus(id, api.StatusDone)
	if out := toolResults(t, rec); len(out) != 2 || !strings.HasSuffix(out["shell"], "uid 1000; network interfaces: lo") {
		t.Errorf("tool results = %q, want the command run in the container as uid 1000 with loopback only", out)
	}
	if got := run(3).stdout; got != "Written in a container: a non-root user, loopback only.\n" {
		t.Errorf("artifact notes.md = %q", got)
	}
	waitNoContainers(t, id)

	// Denied: the model says so, and nothing was written.
	denied := strings.TrimSpace(p.ok("agent", "boxed", "Look around the box and keep notes."))
	p.waitStatus(denied, api.StatusSuspended)
	p.ok("deny", denied, "--reason", "not now")
	rec = p.waitStatus(denied, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "You said no, so nothing ran in the box and I wrote no notes." {
		t.Errorf("denied run's result = %s (%v), want the model saying nothing ran", rec.Result, err)
	}
	if _, ok := rec.FindArtifact("notes.md"); ok {
		t.Errorf("the denied run recorded notes.md: %+v", rec.Artifacts)
	}
	waitNoContainers(t, denied)
}

// waitNoContainers waits (bounded) until the done run's container is removed.
func waitNoContainers(t *testing.T, runID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(runContainers(t, runID)) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("run %s is done and its containers %q are still there after 30s", runID, runContainers(t, runID))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNotificationsDemoAsWritten runs docs/approvals.md's Notifications demo as printed:
// the shipped receiver (examples/approvals/receiver, on a free port instead of 8802), the
// shipped config and script, the secret the block exports. The receiver prints the
// request and the decision of a denied call, whose run ends with the model saying it wrote
// nothing; an approved run's model says it wrote the note, which is its artifact.
func TestNotificationsDemoAsWritten(t *testing.T) {
	t.Parallel()
	const marker = "bin/fakellm --script examples/approvals/notify.script.json"
	block := readmeBlock(t, "sh", marker)
	var cmds [][]string
	secret := ""
	receiverRun := false
	for _, line := range strings.Split(block, "\n") {
		w := shellWords(t, line)
		switch {
		case len(w) == 2 && w[0] == "export" && strings.HasPrefix(w[1], "NOTIFY_SECRET="):
			secret = strings.TrimPrefix(w[1], "NOTIFY_SECRET=")
		case len(w) == 3 && w[0] == "go" && w[1] == "run" && w[2] == "./examples/approvals/receiver":
			receiverRun = true
		case len(w) > 0 && w[0] == "bin/starter":
			cmds = append(cmds, w[1:])
		}
	}
	var lines []string
	for _, c := range cmds {
		lines = append(lines, strings.Join(c, " "))
	}
	want := []string{
		"agent scribe Write the launch note. --wait",
		"deny <id> --reason not before the launch --wait",
	}
	if secret == "" || !receiverRun || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the Notifications demo changed (secret %q, receiver run %v); update this test with it:\n%s", secret, receiverRun, block)
	}

	bin := filepath.Join(t.TempDir(), "receiver")
	build := exec.Command("go", "build", "-o", bin, "./examples/approvals/receiver")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/approvals/receiver: %v\n%s", err, out)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	got := startReceiver(t, bin, addr, secret)

	cfg, _ := shippedDemo(t, marker)
	const shippedURL = `"http://127.0.0.1:8802/nexo"`
	if !strings.Contains(cfg, shippedURL) {
		t.Fatalf("examples/approvals/notify.yaml does not notify the receiver's default %s:\n%s", shippedURL, cfg)
	}
	p := newPlatform(t)
	p.writeConfig(strings.Replace(cfg, shippedURL, `"http://`+addr+`/nexo"`, 1))
	p.extraEnv = []string{"NOTIFY_SECRET=" + secret}
	p.start()

	id := ""
	run := func(i int) result {
		t.Helper()
		r := p.starter(substitute(cmds[i], map[string]string{"<id>": id})...)
		if r.code != 0 {
			t.Fatalf("starter %s: exit %d\n%s\n%s\nworker:\n%s", lines[i], r.code, r.stdout, r.stderr, p.output())
		}
		t.Logf("$ starter %s\n%s%s", lines[i], r.stdout, r.stderr)
		if k := strings.Index(r.stdout+r.stderr, "started agent scribe run "); k >= 0 {
			id = strings.Fields((r.stdout + r.stderr)[k+len("started agent scribe run "):])[0]
		}
		return r
	}
	if r := run(0); !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 1.1)") {
		t.Fatalf("not suspended on call 1.1:\n%s\n%s", r.stdout, r.stderr)
	}
	got.wait(t, "approval_requested  run "+id+"  call 1.1  write_file notes.md")
	if r := run(1); !strings.Contains(r.stdout, "You said no, so notes.md is not written.") {
		t.Errorf("deny --wait does not end with the model saying it wrote nothing:\n%s\n%s", r.stdout, r.stderr)
	}
	got.wait(t, "approval_decided  run "+id+"  call 1.1  write_file notes.md  deny by ")
	got.wait(t, ": not before the launch")

	approved := strings.TrimSpace(p.ok("agent", "scribe", "Write the launch note."))
	got.wait(t, "approval_requested  run "+approved+"  call 1.1")
	p.ok("approve", approved)
	got.wait(t, "approval_decided  run "+approved+"  call 1.1  write_file notes.md  approve by ")
	rec := p.waitStatus(approved, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "I wrote the launch note to notes.md." {
		t.Errorf("approved run's result = %s (%v)", rec.Result, err)
	}
	if a := p.ok("artifact", approved, "notes.md"); a != "launch on Monday\n" {
		t.Errorf("artifact notes.md = %q", a)
	}
}

// receiverLines are the lines a running receiver printed, as they come.
type receiverLines struct {
	lines chan string
	seen  []string
}

// startReceiver runs the receiver binary on addr with secret until the test ends, once it
// listens.
func startReceiver(t *testing.T, bin, addr, secret string) *receiverLines {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--addr", addr)
	cmd.Env = append(os.Environ(), "NOTIFY_SECRET="+secret)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			select {
			case ready <- s.Text():
			default:
			}
		}
	}()
	select {
	case l := <-ready:
		if !strings.Contains(l, "receiver: listening on http://"+addr+"/nexo") {
			t.Fatalf("the receiver said %q, want it listening on %s", l, addr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver did not say it listens within 30s")
	}
	r := &receiverLines{lines: make(chan string, 64)}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			r.lines <- s.Text()
		}
	}()
	return r
}

// wait waits (bounded) for a printed line containing want, keeping the lines it passes.
func (r *receiverLines) wait(t *testing.T, want string) {
	t.Helper()
	for _, l := range r.seen {
		if strings.Contains(l, want) {
			return
		}
	}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-r.lines:
			r.seen = append(r.seen, l)
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("the receiver printed no line with %q within 60s; it printed:\n%s", want, strings.Join(r.seen, "\n"))
		}
	}
}
