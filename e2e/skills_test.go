package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// exampleSkills is the repository's example skills folder.
func exampleSkills(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "examples", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// logoSum is the sha256 of the example skill's binary asset.
func logoSum(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(exampleSkills(t), "report-kit", "assets", "logo.png"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func artifactSum(rec api.Record, name string) string {
	for _, a := range rec.Artifacts {
		if a.Name == name {
			return a.SHA256
		}
	}
	return ""
}

// TestSkillExampleEndToEnd runs the README's skills example as written (its config and
// its fake-model script), against the real worker and starter: the skill's text reaches
// the system prompt once per request, after the instructions and the sandbox's own; its
// script runs in the workspace and copies the binary logo intact into the report.
// exampleConfig reads examples/<dir>/nexo.yaml with its llm.base_url pointed at the
// example's scripted model (examples/<dir>/<script>), served for the test.
func exampleConfig(t *testing.T, dir, script string) (string, *fakellm.Server) {
	t.Helper()
	return demoConfig(t, path.Join("examples", dir, "nexo.yaml"), path.Join("examples", dir, script))
}

// demoConfig reads the config file config (a path from the repository's root) with its
// llm.base_url pointed at the fake model that plays script (another such path), served for
// the test.
func demoConfig(t *testing.T, config, script string) (string, *fakellm.Server) {
	t.Helper()
	model, err := fakellm.Load(filepath.Join("..", filepath.FromSlash(script)))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(config)))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^  base_url: .*$`).ReplaceAllString(string(cfg), "  base_url: "+model.Start(t)), model
}

// skillExample is a platform (not started) configured as examples/skills says, with the
// example's scripted model.
func skillExample(t *testing.T) (*platform, *fakellm.Server) {
	t.Helper()
	y, model := exampleConfig(t, "skills", "reporter.script.json")
	y = regexp.MustCompile(`(?m)^skills_path: .*$`).ReplaceAllString(y, "skills_path: "+exampleSkills(t))
	p := newPlatform(t)
	p.writeConfig(y)
	return p, model
}

func TestSkillExampleEndToEnd(t *testing.T) {
	t.Parallel()
	p, model := skillExample(t)

	// What a worker would load, without a worker.
	if out := p.ok("skill", "list"); !strings.Contains(out, "report-kit") || !strings.Contains(out, "3 files") || !strings.Contains(out, "agents: reporter") {
		t.Errorf("skill list:\n%s", out)
	}

	p.start()
	r := p.starter("agent", "reporter", "Report on Q4", "--wait")
	if r.code != 0 {
		t.Fatalf("agent --wait: exit %d\n%s\n%s\nworker:\n%s", r.code, r.stdout, r.stderr, p.output())
	}
	id := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	rec := p.waitStatus(id, api.StatusDone)
	for _, ev := range []string{"sandbox_probed", "skills_materialized", "agent_done"} {
		if countEvents(rec, ev) != 1 {
			t.Errorf("%s events = %d, want 1:\n%+v", ev, countEvents(rec, ev), rec.Events)
		}
	}
	if _, ok := rec.State["skills:report-kit"]; !ok {
		t.Errorf("the skill snapshot is not recorded (state keys: %v)", rec.State)
	}
	if got, want := artifactSum(rec, "logo.png"), logoSum(t); got != want {
		t.Errorf("logo.png artifact sha256 = %q, want the skill asset's %s (artifacts %+v)", got, want, rec.Artifacts)
	}
	if artifactSum(rec, "index.html") == "" {
		t.Errorf("no report: artifacts %+v", rec.Artifacts)
	}

	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests = %d, want 3", len(reqs))
	}
	for i, req := range reqs {
		sys, _ := req.Messages[0]["content"].(string)
		if req.Messages[0]["role"] != "system" {
			t.Fatalf("request %d starts with %v", i+1, req.Messages[0])
		}
		iIns := strings.Index(sys, "You write short reports for the team.")
		iBox := strings.Index(sys, "Your workspace is the directory")
		iSkill := strings.Index(sys, "Skill report-kit: Turns a Markdown summary")
		if iIns != 0 || iBox <= iIns || iSkill <= iBox || strings.Count(sys, "Skill report-kit") != 1 ||
			!strings.HasSuffix(sys, "Compatibility: needs a POSIX shell with mkdir, cp and sed (any Linux image, busybox included)") {
			t.Errorf("request %d system message (instructions %d, sandbox %d, skill %d):\n%s", i+1, iIns, iBox, iSkill, sys)
		}
		for _, m := range req.Messages[1:] {
			if m["role"] == "system" || strings.Contains(toJSON(m), "Skill report-kit") {
				t.Errorf("request %d: the thread repeats the system prompt or the skill: %v", i+1, m)
			}
		}
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWorkerRefusesABrokenSkill: a missing skill or a broken SKILL.md stops the worker
// at start, naming the file, before it connects to anything.
func TestWorkerRefusesABrokenSkill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "skills", "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "SKILL.md"), []byte("---\nname: bad\ndescripton: typo\n---\nBody.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "llm: {base_url: http://127.0.0.1:1/v1}\nagents:\n  - name: a\n    skills: [bad, ghost]\n"
	if err := os.WriteFile(filepath.Join(dir, "nexo.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.worker)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NEXO_TEMPORAL_ADDRESS=127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("worker started with a broken skill:\n%s", out)
	}
	for _, want := range []string{
		`agents[a].skills[0]: ` + filepath.Join("skills", "bad", "SKILL.md") + `:3: descripton: unknown key (did you mean "description"?`,
		`agents[a].skills[1]: skill not found: ` + filepath.Join("skills", "ghost", "SKILL.md"),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("worker output does not contain %q:\n%s", want, out)
		}
	}
}

// TestDockerSkillsAndRequirements: in a docker sandbox the skill's files arrive intact
// through the archive API; the agent tampers with one, the run waits for a human long
// enough to be parked, and the fresh container gets the recorded files again; the script
// then builds the report with the original logo. A second agent whose requirements the
// busybox image does not meet fails before its first turn with every gap listed.
func TestDockerSkillsAndRequirements(t *testing.T) {
	requireSandboxImage(t)
	sh := func(cmd string) fakellm.Call { return shellCall(cmd) }
	write := func(path, content string) fakellm.Call {
		args, _ := json.Marshal(map[string]string{"path": path, "content": content})
		return fakellm.Call{Name: "write_file", Arguments: args}
	}
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{
			write("summary.md", "- shipped\n"),
			sh("cp summary.md skills/report-kit/assets/logo.png"), // tampered
			write("notes.md", "needs a human"),                    // waits: parked
		}},
		fakellm.Reply{ToolCalls: []fakellm.Call{sh("sh skills/report-kit/scripts/make_report.sh Q4 summary.md")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{sh("sha256sum skills/report-kit/assets/logo.png report/logo.png")}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
skills_path: ` + exampleSkills(t) + `
agents:
  - name: boxed
    skills: [report-kit]
    requires: {commands: {sh: "*", sed: "*", sha256sum: "*"}, locale: utf8}
    permissions:
      mode: approve
      approve_when:
        - {capability: write, detail: "summary.md"}
        - {capability: shell, detail: "sh skills/report-kit/scripts/*"}
        - {capability: shell, detail: "cp *"}
        - {capability: shell, detail: "sha256sum *"}
    sandbox: {type: docker, image: "nexo-sandbox:busybox", idle_timeout: 2s, env: {LANG: C.UTF-8}}
    produces: ["report/*"]
  - name: py
    requires: {commands: {python3: ">=3.10", sh: "*"}, locale: utf8}
    sandbox: {type: docker, image: "nexo-sandbox:busybox"}
`)
	p.start()

	// Unmet requirements: failed before the first turn, every gap listed.
	r := p.starter("agent", "py", "Run the analysis.", "--wait")
	if r.code == 0 {
		t.Fatalf("py ran in an image without python3:\n%s\n%s", r.stdout, r.stderr)
	}
	pyID := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	pyRec := p.waitStatus(pyID, api.StatusFailed)
	if pyRec.Error == nil || !strings.Contains(*pyRec.Error, "python3 missing; no locale set (LANG, LC_CTYPE and LC_ALL are empty), want utf8") {
		t.Errorf("py error = %v", pyRec.Error)
	}
	if countEvents(pyRec, "agent_start") != 0 || countEvents(pyRec, "agent_usage") != 0 {
		t.Errorf("py started a turn: %+v", pyRec.Events)
	}

	id := strings.TrimSpace(p.ok("agent", "boxed", "Report on Q4."))
	p.waitStatus(id, api.StatusSuspended)
	waitEvent(t, p, id, "sandbox_parked")
	p.ok("approve", id, "--wait")
	rec := p.waitStatus(id, api.StatusDone)

	var whens []string
	for _, e := range rec.Events {
		if e.Type == "skills_materialized" {
			var d struct {
				When    string `json:"when"`
				Written int    `json:"written"`
			}
			_ = json.Unmarshal(e.Data, &d)
			whens = append(whens, d.When)
		}
	}
	if strings.Join(whens, ",") != "start,restore" {
		t.Errorf("skills copied at %v, want start,restore (events %+v)", whens, rec.Events)
	}
	sum := logoSum(t)
	var last string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			last = string(e.Data)
		}
	}
	if strings.Count(last, sum) != 2 {
		t.Errorf("after the restore the skill's logo and the report's are not the original (sha256 %s):\n%s", sum, last)
	}
	if got := artifactSum(rec, "logo.png"); got != sum {
		t.Errorf("logo.png artifact sha256 = %q, want %s", got, sum)
	}
	if c := runContainers(t, id); len(c) != 0 {
		t.Errorf("containers left after the run: %v", c)
	}
}

// waitEvent polls the record until it holds an event of type typ.
func waitEvent(t *testing.T, p *platform, id, typ string) {
	t.Helper()
	for i := 0; countEvents(p.record(id), typ) == 0; i++ {
		if i > 300 {
			t.Fatalf("no %s event after 30s: %+v", typ, p.record(id).Events)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
