package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// registryWorkers is `starter workflows --json`: the live workers' identities and the
// agents they offer.
func registryWorkers(t *testing.T, p *platform) (ids, agents []string) {
	t.Helper()
	r := p.starter("workflows", "--json")
	if r.code != 0 {
		t.Fatalf("starter workflows --json: exit %d\n%s", r.code, r.stderr)
	}
	var v api.RegistryView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("starter workflows --json: %v\n%s", err, r.stdout)
	}
	for _, w := range v.Workers {
		ids = append(ids, w.Identity)
	}
	return ids, v.Agents
}

func hasIdentityOf(ids []string, pid int) bool {
	for _, id := range ids {
		if strings.HasPrefix(id, fmt.Sprintf("%d@", pid)) {
			return true
		}
	}
	return false
}

// TestStoppedWorkersLeaveTheRegistry (issue 29 item 2): a worker --dev without agents and,
// beside it, a worker with agent scribe. Once the second stops with Ctrl-C, `starter
// workflows` no longer lists it (at once: it said goodbye before it exited) and `starter
// agent scribe` is refused at once; a worker killed with SIGKILL says nothing, and drops out
// within its TTL (worker.registry_ttl, 6 s here), after which scribe is refused again.
func TestStoppedWorkersLeaveTheRegistry(t *testing.T) {
	t.Parallel()
	model := fakellm.New() // never called
	p := newPlatform(t)
	p.start()
	helper := func() *platform {
		w := newPlatform(t)
		w.frontend, w.plain = p.frontend, true
		w.writeConfig(agentConfig(model.Start(t)))
		w.extraEnv = []string{"NEXO_ARTIFACTS_URL=file://" + p.artifactsDir(), "NEXO_TEST_LLM_KEY=sk-test", "NEXO_WORKER_REGISTRY_TTL=6s"}
		w.start()
		return w
	}
	refused := func(when string) {
		t.Helper()
		start := time.Now()
		r := p.starter("agent", "scribe", "Write notes.")
		if r.code != 1 || !strings.Contains(r.stderr, `no worker on task queue nexo offers agent "scribe"`) {
			t.Errorf("%s: starter agent scribe: exit %d, want the refusal naming the agent\nstdout %s\nstderr %s", when, r.code, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: the refusal took %v, want it at once", when, d)
		}
	}

	stopped := helper()
	pid := stopped.cmd.Process.Pid
	if ids, agents := registryWorkers(t, p); !hasIdentityOf(ids, pid) || strings.Join(agents, ",") != "scribe" {
		t.Fatalf("before the stop: workers %v agents %v, want worker %d@… offering scribe", ids, agents, pid)
	}
	stopped.stop() // Ctrl-C; returns once the worker exited
	if ids, agents := registryWorkers(t, p); hasIdentityOf(ids, pid) || len(agents) != 0 || len(ids) != 1 {
		t.Errorf("right after the Ctrl-C: workers %v agents %v, want only the worker --dev and no agent", ids, agents)
	}
	if out := p.starter("workflows").stdout; strings.Contains(out, fmt.Sprintf("%d@", pid)) {
		t.Errorf("starter workflows still lists the stopped worker:\n%s", out)
	}
	refused("after Ctrl-C")

	killed := helper()
	pid = killed.cmd.Process.Pid
	if ids, _ := registryWorkers(t, p); !hasIdentityOf(ids, pid) {
		t.Fatalf("the second helper %d is not listed: %v", pid, ids)
	}
	if r := p.starter("agent", "scribe", "Write notes."); r.code != 0 {
		t.Errorf("starter agent scribe with a worker offering it: exit %d\n%s", r.code, r.stderr)
	}
	killedAt := time.Now()
	_ = killed.cmd.Process.Signal(syscall.SIGKILL)
	<-killed.done
	killed.cmd = nil
	pollUntil(t, 30*time.Second, "the killed worker leaves the registry", func(context.Context) error {
		if ids, _ := registryWorkers(t, p); hasIdentityOf(ids, pid) {
			return errors.New("still listed: " + strings.Join(ids, ", "))
		}
		return nil
	})
	// Its last announcement was at most a third of the TTL before the kill.
	d := time.Since(killedAt)
	t.Logf("the killed worker left the registry %v after SIGKILL (TTL 6s)", d.Round(time.Millisecond))
	if d > 6*time.Second+5*time.Second {
		t.Errorf("the killed worker left the registry %v after SIGKILL, want within its TTL of 6s", d.Round(time.Millisecond))
	}
	refused("after SIGKILL")
}

// TestWorkersWithDifferentStores (issue 32 item 5): a worker --dev and a second worker on
// its task queue started in another folder, whose relative file://.nexo/artifacts is
// another directory: the second says so at start naming both stores, and `starter
// doctor` fails naming what it breaks.
func TestWorkersWithDifferentStores(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	other := newPlatform(t)
	other.frontend, other.plain = p.frontend, true
	other.start() // the default artifacts.url, file://.nexo/artifacts, in its own folder
	host, _ := os.Hostname()
	mine := "file://" + filepath.Join(other.dir, ".nexo", "artifacts") + " on host " + host
	theirs := "file://" + p.artifactsDir() + " on host " + host
	want := "other workers on task queue nexo use artifact store " + theirs + "; this one uses " + mine
	if out := other.output(); !strings.Contains(out, want) {
		t.Errorf("the second worker did not say %q at start:\n%s", want, out)
	}
	if out := p.output(); strings.Contains(out, "use artifact store") {
		t.Errorf("the first worker warned of a store with no other worker up:\n%s", out)
	}
	r := p.starter("doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  store: the live workers use 2 artifact stores") ||
		!strings.Contains(r.stdout, "runs that move between these hosts cannot restore their workspaces") ||
		!strings.Contains(r.stdout, mine) || !strings.Contains(r.stdout, theirs) || !strings.Contains(r.stderr, "store") {
		t.Errorf("starter doctor: exit %d, want 1 with the store FAIL naming both stores\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestDoctor (issue 29, "Nothing waits blind"): `starter doctor` on a healthy dev platform
// with an agent on the fake model prints one ok line per check and exits 0 (the model
// endpoint answered GET /models, which costs no reply of its script); with llm.base_url
// pointing at a port nobody listens on it fails naming the endpoint and the setting.
func TestDoctor(t *testing.T) {
	t.Parallel()
	model := fakellm.New() // no scripted reply: doctor must not spend one
	p := newPlatform(t)
	url := model.Start(t)
	p.writeConfig(agentConfig(url))
	p.extraEnv = []string{"NEXO_TEST_LLM_KEY=sk-test-secret"}
	p.start()

	r := p.starter("doctor")
	if r.code != 0 {
		t.Fatalf("starter doctor on a healthy platform: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"ok    config: nexo.yaml: valid",
		fmt.Sprintf("ok    temporal: 127.0.0.1:%d (from env NEXO_TEMPORAL_ADDRESS)", p.frontend),
		"ok    workers: 1 live on task queue nexo",
		"agents offered: scribe",
		"ok    store: every live worker uses file://" + p.artifactsDir(),
		"ok    model endpoint default: " + url + " (model fake-model, key from $NEXO_TEST_LLM_KEY) answered GET /models in ",
		"ok    sandboxes: no agent needs Docker or bubblewrap",
		fmt.Sprintf("ok    port 127.0.0.1:%d: Temporal frontend (worker --dev): in use by the running platform", p.frontend),
		fmt.Sprintf("ok    port 127.0.0.1:%d: gateway (worker --dev, starter serve): in use by the running platform", p.gateway),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("starter doctor does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "sk-test-secret") {
		t.Errorf("starter doctor printed the model key:\n%s%s", r.stdout, r.stderr)
	}
	var js struct {
		OK     bool          `json:"ok"`
		Checks []checkResult `json:"checks"`
	}
	if r := p.starter("doctor", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &js) != nil || !js.OK || len(js.Checks) < 7 {
		t.Errorf("starter doctor --json: exit %d, %+v\n%s%s", r.code, js, r.stdout, r.stderr)
	}

	dead := fmt.Sprintf("http://127.0.0.1:%d/v1", freePort(t))
	p.extraEnv = append(p.extraEnv, "NEXO_LLM_BASE_URL="+dead)
	r = p.starter("doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  model endpoint default: "+dead) || !strings.Contains(r.stdout, "connection refused") ||
		!strings.Contains(r.stdout, "fix: check llm.base_url (now "+dead+")") || !strings.Contains(r.stderr, "model endpoint default") {
		t.Errorf("starter doctor with a dead base_url: exit %d, want 1 naming the endpoint\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// checkResult is one check of `starter doctor --json`.
type checkResult struct {
	Check, Status, Detail, Fix string
}
