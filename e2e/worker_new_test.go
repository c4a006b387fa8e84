package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// readmeWorkerNewSteps are the commands of the README's "Your own worker, outside this
// repository" block: each line split at && into its commands' words.
func readmeWorkerNewSteps(t *testing.T) [][]string {
	t.Helper()
	var steps [][]string
	for _, line := range strings.Split(readmeBlock(t, "sh", "bin/starter worker new"), "\n") {
		for _, part := range strings.Split(line, "&&") {
			if w := shellWords(t, part); len(w) > 0 {
				steps = append(steps, w)
			}
		}
	}
	return steps
}

// goIn runs the go command as the README does (go -C dir ...), in the test's environment
// plus env, and returns its combined output; a failure is the test's unless allowFail.
func goIn(t *testing.T, env []string, args []string, allowFail bool) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil && !allowFail {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), err
}

// TestWorkerNewAsWritten runs the README's block for a worker of your own outside this
// repository as printed, with the real bin/starter: the scaffolded module (go.mod
// replacing Nexo with this checkout) builds and its replay test passes; its worker, run
// against its embedded dev server with the module's nexo.yaml (the fake model on a port
// of the test's), runs DraftReview once to completion through bin/starter run and
// approve; cmd/record writes that run as a fixture the replay test then replays; and a
// change to the workflow that would break recorded runs fails the module's go test.
func TestWorkerNewAsWritten(t *testing.T) {
	t.Parallel()
	steps := readmeWorkerNewSteps(t)
	want := [][]string{
		{"export", "GOTOOLCHAIN=go1.27.3"},
		{"go", "build", "-o", "bin/", "./starter", "./cmd/fakellm"},
		{"bin/starter", "worker", "new", "../acme", "--module", "example.com/acme", "--replace", "."},
		{"go", "-C", "../acme", "build", "./..."},
		{"go", "-C", "../acme", "test", "./..."},
		{"bin/fakellm", "--script", "../acme/writer.script.json"},
		{"go", "-C", "../acme", "run", ".", "--dev", "--config", "nexo.yaml"},
		{"bin/starter", "run", "DraftReview", "--input", `{"topic": "the spring sale"}`, "--wait"},
		{"bin/starter", "artifact", "<id>", "draft.md"},
		{"bin/starter", "approve", "<id>", "--wait"},
		{"go", "-C", "../acme", "run", "./cmd/record", "--id", "<id>"},
		{"go", "-C", "../acme", "test", "./..."},
	}
	if !slices.EqualFunc(steps, want, slices.Equal[[]string]) {
		t.Fatalf("the README's worker new block is\n%q\nthis test runs\n%q: update the test", steps, want)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	acme := filepath.Join(p.dir, "acme")
	vars := map[string]string{"../acme": acme}
	goStep := func(i int, allowFail bool) (string, error) {
		t.Helper()
		return goIn(t, p.env(), substitute(steps[i][1:], vars), allowFail)
	}

	// bin/starter worker new ../acme --module example.com/acme --replace . (run in the
	// checkout, so "." is the repository's root)
	args := substitute(steps[2][1:], vars)
	args[len(args)-1] = root
	r := p.starter(args...)
	if r.code != 0 {
		t.Fatalf("worker new: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "go.sum filled in by go mod tidy") {
		t.Errorf("worker new --replace did not say go.sum was filled in:\n%s", r.stdout)
	}
	gomod, err := os.ReadFile(filepath.Join(acme, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "replace github.com/nexo-temporal/nexo => "+root+"\n") {
		t.Errorf("go.mod does not replace Nexo with %s:\n%s", root, gomod)
	}
	pseudo := regexp.MustCompile(`(?m)^\tgithub.com/nexo-temporal/nexo (v0\.0\.0-\d{14}-([0-9a-f]{12}))$`).FindStringSubmatch(string(gomod))
	if pseudo == nil {
		t.Errorf("go.mod does not require Nexo at a pseudo-version:\n%s", gomod)
	} else if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil && !strings.HasPrefix(string(head), pseudo[2]) {
		t.Errorf("go.mod requires Nexo %s, want the checkout's commit %s", pseudo[1], head)
	}

	// go -C ../acme build ./... && go -C ../acme test ./...
	goStep(3, false)
	if out, _ := goStep(4, false); !strings.Contains(out, "ok  \texample.com/acme/review") {
		t.Errorf("go test ./... of the new module does not pass its replay test:\n%s", out)
	}

	// The worker of go -C ../acme run . --dev --config nexo.yaml, built once, run in the
	// module's directory (the platform's) with its nexo.yaml, the model on the test's port.
	run := steps[6]
	bin := filepath.Join(t.TempDir(), "acme")
	goIn(t, nil, []string{"-C", acme, "build", "-o", bin, "."}, false)
	script := filepath.Join(acme, strings.TrimPrefix(steps[5][2], "../acme/"))
	model, err := fakellm.Load(script)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(acme, "nexo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = regexp.MustCompile(`(?m)^  base_url: .*$`).ReplaceAll(cfg, []byte("  base_url: "+model.Start(t)))
	if err := os.WriteFile(filepath.Join(acme, "nexo.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	p.dir = acme // the worker's and the starters' directory; .nexo/ lands there, as for a user
	p.bin, p.args = bin, run[6:]
	p.start()

	if out := p.ok("workflows"); !strings.Contains(out, "DraftReview") || !strings.Contains(out, "writer") {
		t.Errorf("starter workflows does not list DraftReview and the agent writer:\n%s", out)
	}
	id := ""
	starter := func(i int) result {
		t.Helper()
		r := p.starter(substitute(steps[i][1:], map[string]string{"<id>": id})...)
		if r.code != 0 {
			t.Fatalf("starter %s: exit %d\n%s\n%s\nworker:\n%s", strings.Join(steps[i][1:], " "), r.code, r.stdout, r.stderr, p.output())
		}
		return r
	}
	r = starter(7)
	if k := strings.Index(r.stderr, "started DraftReview run "); k >= 0 {
		id = strings.Fields(r.stderr[k+len("started DraftReview run "):])[0]
	}
	if id == "" || !strings.Contains(r.stdout+r.stderr, "is suspended: review the note about the spring sale (draft.md)") {
		t.Fatalf("run --wait did not stop at the review:\n%s\n%s", r.stdout, r.stderr)
	}
	var replies []struct{ Content string }
	if b, err := os.ReadFile(script); err != nil || json.Unmarshal(b, &replies) != nil || len(replies) != 1 {
		t.Fatalf("%s: %v, %d replies", script, err, len(replies))
	}
	if out := starter(8).stdout; out != replies[0].Content+"\n" {
		t.Errorf("artifact draft.md = %q, want the agent's draft %q", out, replies[0].Content+"\n")
	}
	if out := starter(9).stdout; !strings.Contains(out, `"published":true`) {
		t.Errorf("approve --wait does not print the published note:\n%s", out)
	}
	rec := p.record(id)
	if rec.Status != api.StatusDone {
		t.Fatalf("DraftReview run %s: status %s, want done", id, rec.Status)
	}
	for _, k := range []string{"outline", "agent", "draft", "publish"} {
		if rec.State[k] == nil {
			t.Errorf("DraftReview run: no checkpoint %s in state %v", k, rec.State)
		}
	}
	waitRunClosed(t, p.dial(), id, "")

	// go -C ../acme run ./cmd/record --id <id>: the run becomes a fixture, replayed by go test.
	vars["<id>"] = id
	out, _ := goStep(10, false)
	fixture := filepath.Join("testdata", "DraftReview-"+id+".json")
	if !strings.Contains(out, "recorded "+fixture+": ") {
		t.Errorf("record did not write %s:\n%s", fixture, out)
	}
	if out, err := goStep(10, true); err == nil || !strings.Contains(out, "file exists") {
		t.Errorf("record of the same run again: %v, want a refusal to overwrite the fixture:\n%s", err, out)
	}
	if out, _ := goIn(t, p.env(), []string{"-C", acme, "test", "-count=1", "-v", "./review"}, false); !strings.Contains(out, "3 recorded histories replayed") {
		t.Errorf("go test ./review does not replay the recorded run beside the shipped fixtures:\n%s", out)
	}
	goStep(11, false)
	if out := p.runBin(bin, "check-replay", "--histories", "testdata"); out.code != 0 || !strings.Contains(out.stdout, "3 replayed: 3 ok, 0 failed") {
		t.Errorf("acme check-replay --histories testdata: exit %d\n%s\n%s", out.code, out.stdout, out.stderr)
	}

	// A workflow change that drops the outline checkpoint breaks every recorded run.
	src := filepath.Join(acme, "review", "review.go")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), `workflows.Checkpoint[Outline](ctx, "outline", desk.OutlineTopic, in.Topic)`, `Outline{Topic: in.Topic}, error(nil)`, 1)
	if changed == string(b) {
		t.Fatal("review.go has no outline checkpoint to change")
	}
	if err := os.WriteFile(src, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := goIn(t, nil, []string{"-C", acme, "test", "-count=1", "./review"}, true); err == nil || !strings.Contains(out, "draft_review_approved.json") || !strings.Contains(out, "FAIL") {
		t.Errorf("go test after a change to the command sequence: %v, want a replay failure naming the fixture:\n%s", err, out)
	}
}

// TestWorkerNewRefusesBadInput: the real bin/starter refuses, with exit 2 and what was
// wrong, a directory that holds files, a module path Go refuses, and a --replace that is
// no checkout of Nexo, writing nothing.
func TestWorkerNewRefusesBadInput(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	full := filepath.Join(p.dir, "full")
	other := filepath.Join(p.dir, "other")
	for _, d := range []string{full, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(full, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"non-empty dir", []string{"worker", "new", full, "--module", "example.com/acme"}, "full: directory is not empty (it holds main.go)"},
		{"bad module path", []string{"worker", "new", "acme", "--module", "example.com/Acme Corp"}, `--module "example.com/Acme Corp": bad module path: invalid char ' '`},
		{"no module", []string{"worker", "new", "acme"}, "--module is required"},
		{"replace not a checkout", []string{"worker", "new", "acme", "--module", "example.com/acme", "--replace", other}, "not a checkout of github.com/nexo-temporal/nexo (its go.mod says module example.com/other)"},
		{"replace without go.mod", []string{"worker", "new", "acme", "--module", "example.com/acme", "--replace", t.TempDir()}, "(it has no go.mod; give the root of your Nexo checkout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p.starter(tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, "Usage: starter worker new") {
				t.Errorf("starter %s: exit %d, want 2 saying %q and the usage line:\n%s%s", strings.Join(tc.args, " "), r.code, tc.says, r.stdout, r.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(p.dir, "acme")); err == nil {
		t.Error("a refused worker new created acme/")
	}
	// It talks to no Temporal: its help lists its own flags, not the server's.
	if h := p.starter("worker", "--help"); h.code != 0 || !strings.Contains(h.stdout, "--module") || !strings.Contains(h.stdout, "--replace") || strings.Contains(h.stdout, "--address") {
		t.Errorf("starter worker --help: exit %d\n%s", h.code, h.stdout)
	}
	if ents, _ := os.ReadDir(full); len(ents) != 1 {
		t.Errorf("a refused worker new wrote into the non-empty directory: %d entries", len(ents))
	}
}

// TestCustomWorkerReadmeRunsTheTestedCommands: every command of examples/custom-worker's
// README is one of the README's (run as written by TestCustomWorkerExampleAsWritten and
// TestWorkerNewAsWritten), so the example's page cannot drift from what the tests run.
func TestCustomWorkerReadmeRunsTheTestedCommands(t *testing.T) {
	t.Parallel()
	tested := map[string]bool{}
	for _, block := range readmeCommandBlocks(t) {
		for _, line := range strings.Split(block.text, "\n") {
			if w := shellWords(t, line); len(w) > 0 {
				tested[strings.Join(w, "\x00")] = true
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "examples", "custom-worker", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(b), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for _, line := range strings.Split(block, "\n") {
			w := shellWords(t, line)
			if len(w) == 0 {
				continue
			}
			n++
			if !tested[strings.Join(w, "\x00")] {
				t.Errorf("examples/custom-worker/README.md runs %q, which no README block the tests run has: use the README's command", line)
			}
		}
	}
	if n < 6 {
		t.Errorf("examples/custom-worker/README.md has %d commands, want its build, run and worker new commands", n)
	}
}

// TestWorkerNewWithoutReplaceFollowsItsReadme: without --replace, worker new says what is
// missing, and the new module's README's two commands (the replace line to a checkout and
// go mod tidy), run as written with this checkout, make it build and pass its tests.
func TestWorkerNewWithoutReplaceFollowsItsReadme(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	dir := filepath.Join(p.dir, "plain")
	r := p.starter("worker", "new", dir, "--module", "example.com/plain")
	if r.code != 0 || !strings.Contains(r.stdout, "go mod edit -replace github.com/nexo-temporal/nexo=/path/to/nexo && go mod tidy") {
		t.Fatalf("worker new without --replace: exit %d, want the replace and tidy named as the next step:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		t.Error("worker new without --replace wrote a go.sum")
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range strings.Split(string(readme), "```sh\n")[1:] {
		if b, _, _ = strings.Cut(b, "```"); strings.Contains(b, "go mod edit -replace") {
			block = b
		}
	}
	var cmds [][]string
	for _, line := range strings.Split(block, "\n") {
		if w := shellWords(t, line); len(w) > 0 {
			cmds = append(cmds, w)
		}
	}
	want := [][]string{{"go", "mod", "edit", "-replace", "github.com/nexo-temporal/nexo=/path/to/your/nexo/checkout"}, {"go", "mod", "tidy"}}
	if !slices.EqualFunc(cmds, want, slices.Equal[[]string]) {
		t.Fatalf("the new module's README says %q, this test runs %q: update the test", cmds, want)
	}
	for _, c := range cmds {
		goIn(t, nil, append([]string{"-C", dir}, substitute(c[1:], map[string]string{"/path/to/your/nexo/checkout": root})...), false)
	}
	if out, _ := goIn(t, nil, []string{"-C", dir, "test", "-count=1", "./..."}, false); !strings.Contains(out, "ok  \texample.com/plain/review") {
		t.Errorf("go test ./... after the README's replace and tidy:\n%s", out)
	}
}
