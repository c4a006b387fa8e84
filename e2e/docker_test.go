package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// requireSandboxImage skips (with the reason) when no Docker engine or no sandbox image is
// here; CI builds the image with `starter sandbox build-image` before the tests.
func requireSandboxImage(t testing.TB) {
	t.Helper()
	if err := exec.Command("docker", "image", "inspect", "nexo-sandbox:busybox").Run(); err != nil {
		t.Skipf("docker sandbox tests need a Docker engine and the image nexo-sandbox:busybox (starter sandbox build-image): %v", err)
	}
}

func runContainers(t testing.TB, runID string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=nexo.run="+runID, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

func shellCall(cmd string) fakellm.Call {
	args, _ := json.Marshal(map[string]string{"command": cmd})
	return fakellm.Call{Name: "shell", Arguments: args}
}

// boxedAgentConfig is the agent "boxed" of the park tests: in a Docker sandbox idle after
// 2s, writes pre-approved, shell commands other than echo waiting for a human.
func boxedAgentConfig(modelURL string) string {
	return `llm:
  base_url: ` + modelURL + `
  model: fake-model
agents:
  - name: boxed
    permissions:
      mode: approve
      approve_when:
        - {capability: write}
        - {capability: shell, detail: "echo *"}
    sandbox: {type: docker, image: "nexo-sandbox:busybox", idle_timeout: 2s}
    produces: ["notes.md"]
`
}

// TestDockerAgentParksWhileWaiting: an agent acts inside its container; while it waits
// for a human longer than the idle timeout the workspace is archived and the container
// removed; after the approval a fresh container has every file back; when the run ends no
// container is left.
func TestDockerAgentParksWhileWaiting(t *testing.T) {
	requireSandboxImage(t)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("kept across the park"), shellCall("echo scratch > scratch.txt; id -u; grep -c eth0 /proc/net/dev; true")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("cat notes.md scratch.txt")}},
		fakellm.Reply{Content: "All files were still there."},
	)
	p := newPlatform(t)
	p.writeConfig(boxedAgentConfig(model.Start(t)))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "boxed", "Keep notes."))
	// write_file is pre-approved and runs at once; the shell command needs a human.
	p.waitStatus(id, api.StatusSuspended)
	if c := runContainers(t, id); len(c) != 1 {
		t.Fatalf("containers of the run while it waits = %v, want 1", c)
	}

	// Idle longer than the timeout: the workspace is archived and the container removed.
	deadline := time.Now().Add(30 * time.Second)
	for countEvents(p.record(id), "sandbox_parked") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not parked after 30s: %+v", p.record(id).Events)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if c := runContainers(t, id); len(c) != 0 {
		t.Errorf("containers while parked: %v", c)
	}

	p.ok("approve", id, "--call", "1.2")
	rec := p.waitStatus(id, api.StatusSuspended) // the second command waits too
	for a, ok := rec.Approval(); !ok || a.CallID != "2.1"; a, ok = rec.Approval() {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("second approval never requested: %+v", rec.Events)
		}
		time.Sleep(100 * time.Millisecond)
		rec = p.record(id)
	}
	p.ok("approve", id, "--call", "2.1")
	rec = p.waitStatus(id, api.StatusDone)
	var results []string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			c, _ := d["content"].(string)
			results = append(results, c)
		}
	}
	if len(results) != 3 {
		t.Fatalf("tool results = %q", results)
	}
	if !strings.Contains(results[1], "exit code 0") || !strings.Contains(results[1], "1000") || !strings.Contains(results[1], "\n0") {
		t.Errorf("shell in the restored container: %q, want exit 0, uid 1000, and no eth0", results[1])
	}
	if !strings.Contains(results[2], "kept across the park") || !strings.Contains(results[2], "scratch") {
		t.Errorf("the agent saw %q, want the file written before the park and the one after", results[2])
	}
	if countEvents(rec, "sandbox_restored") != 1 {
		t.Errorf("sandbox_restored events = %d", countEvents(rec, "sandbox_restored"))
	}
	if a, ok := rec.FindArtifact("notes.md"); !ok || a.Content == nil || *a.Content != "kept across the park" {
		t.Errorf("notes.md artifact = %+v", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(runContainers(t, id)) != 0 {
		if ctx.Err() != nil {
			t.Fatalf("container left after the run ended: %v", runContainers(t, id))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWorkerRefusesABrokenDockerAgent: an agent whose sandbox image is missing, whose
// bind has no host path, or whose runtime the engine lacks, stops the worker at start with the agent, the image or bind and
// what to do, before any run (and any model call); the missing host path is not created.
func TestWorkerRefusesABrokenDockerAgent(t *testing.T) {
	requireSandboxImage(t)
	p := newPlatform(t)
	missing := filepath.Join(t.TempDir(), "srv", "repo")
	p.writeConfig(`llm: {base_url: "http://127.0.0.1:1/v1", model: m}
agents:
  - name: noimage
    sandbox: {type: docker, image: "nexo-sandbox:no-such-image"}
  - name: nobind
    sandbox: {type: docker, ro_binds: ["` + missing + `:/workspace/repo"]}
  - name: noruntime
    sandbox: {type: docker, runtime: no-such-runtime}
  - name: fine
    sandbox: {type: docker}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.worker, "--dev")
	cmd.Dir, cmd.Env = p.dir, p.env()
	p.releasePorts() // the worker binds them (if it got that far)
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "Nexo worker ready") {
		t.Fatalf("worker started with broken docker agents (%v):\n%s", err, out)
	}
	for _, want := range []string{
		"agents[noimage].sandbox: sandbox image nexo-sandbox:no-such-image not found on the Docker host",
		`agents[nobind].sandbox: ro_binds "` + missing + `:/workspace/repo": host path ` + missing + ` does not exist`,
		`agents[noruntime].sandbox: invalid docker sandbox options: runtime: the Docker engine has no runtime "no-such-runtime"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("worker output does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "agents[fine]") {
		t.Errorf("the good agent is reported:\n%s", out)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host path %s: %v; want it still absent", missing, err)
	}
}

// TestReadmeDockerSnippet runs the README's Docker agent as printed (its /srv/repo bind
// pointed at a directory that exists): the agent reads the read-only bind and writes
// notes.md, and notes.md outlives the container as an artifact because of `produces`.
func TestReadmeDockerSnippet(t *testing.T) {
	requireSandboxImage(t)
	snippet := readmeBlock(t, "yaml", "name: boxed")
	if !strings.Contains(snippet, `"/srv/repo:/workspace/repo"`) {
		t.Fatalf("README's Docker snippet no longer binds /srv/repo:\n%s", snippet)
	}
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("from the host repo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("cat /workspace/repo/README")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("notes from the box")}},
		fakellm.Reply{Content: "Wrote notes.md."},
	)
	p := newPlatform(t)
	p.writeConfig("llm: {base_url: " + model.Start(t) + ", model: fake-model}\n" +
		strings.ReplaceAll(snippet, "/srv/repo", repo))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "boxed", "Read the repo and keep notes."))
	deadline := time.Now().Add(60 * time.Second)
	rec := p.record(id)
	approved := map[string]bool{}
	for rec.Status != api.StatusDone {
		if time.Now().After(deadline) || rec.Status == api.StatusFailed {
			t.Fatalf("run %s: %s\n%+v\nworker:\n%s", id, rec.Status, rec.Events, p.output())
		}
		if a, ok := rec.Approval(); ok && !approved[a.CallID] {
			approved[a.CallID] = true
			p.ok("approve", id, "--call", a.CallID)
		}
		time.Sleep(200 * time.Millisecond)
		rec = p.record(id)
	}
	var results []string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			c, _ := d["content"].(string)
			results = append(results, c)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "from the host repo") {
		t.Errorf("tool results = %q, want the bind's file read", results)
	}
	if got := p.ok("artifact", id, "notes.md"); got != "notes from the box" {
		t.Errorf("artifact notes.md = %q", got)
	}
}
