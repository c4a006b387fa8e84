package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestWorkersThatDisagree is the rolling deploy a new user stumbles into: a `worker --dev`
// with examples/agents/nexo.yaml and, beside it, a plain worker on the same task queue
// without that config. The second says at start that the others offer agent scribe and it
// offers none; every agent run completes, whichever worker picks up its first activity;
// a run that met the second worker names it in agent_unavailable.
func TestWorkersThatDisagree(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "Hello from scribe.", Match: "Say hello"})
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "agents", "nexo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	p.writeConfig(regexp.MustCompile(`(?m)^  base_url: .*$`).ReplaceAllString(string(cfg), "  base_url: "+model.Start(t)))
	p.start()

	bare := newPlatform(t) // its own directory: no nexo.yaml there
	bare.frontend, bare.plain = p.frontend, true
	bare.extraEnv = []string{"NEXO_ARTIFACTS_URL=file://" + p.artifactsDir()}
	bare.start()
	want := "other workers on task queue nexo offer agents scribe; this one offers none"
	if out := bare.output(); !strings.Contains(out, want) {
		t.Fatalf("the worker without agents did not say %q at start:\n%s", want, out)
	}
	if out := p.output(); strings.Contains(out, "other workers on task queue") {
		t.Errorf("the first worker reported a difference with no other worker up:\n%s", out)
	}
	bareID := fmt.Sprintf("%d@", bare.cmd.Process.Pid)

	// Four runs as in the report, more while none has met the bare worker yet (each run
	// meets it with even odds), at most sixteen.
	met := 0
	for n := 1; n <= 16 && (n <= 4 || met == 0); n++ {
		id := strings.TrimSpace(p.ok("agent", "scribe", fmt.Sprintf("Say hello (%d).", n)))
		rec := waitDone(t, p, id, time.Minute)
		var res api.AgentResult
		if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "Hello from scribe." {
			t.Fatalf("run %d result %s (%v)", n, rec.Result, err)
		}
		for _, e := range rec.Events {
			if e.Type != "agent_unavailable" {
				continue
			}
			var d map[string]string
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d["agent"] != "scribe" || !strings.HasPrefix(d["worker"], bareID) {
				t.Errorf("run %d: agent_unavailable %v, want agent scribe and worker %s…", n, d, bareID)
			}
			met++
		}
		if c := countEvents(rec, "agent_unavailable"); c > 1 {
			t.Errorf("run %d: %d agent_unavailable events, want at most one per worker", n, c)
		}
	}
	if met == 0 {
		t.Errorf("no run met the worker without the agent in 16 runs; the test proved nothing")
	}
	// A name no worker offers is refused before a run starts (it would only wait).
	if r := p.starter("agent", "scrib", "Say hello."); r.code == 0 || !strings.Contains(r.stderr, `offers agent "scrib"`) || !strings.Contains(r.stderr, `did you mean "scribe"?`) {
		t.Errorf("starter agent scrib: exit %d, want a refusal naming the agent\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// waitDone waits for run id to end, failing unless it is done.
func waitDone(t *testing.T, p *platform, id string, within time.Duration) api.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := p.record(id)
		switch rec.Status {
		case api.StatusDone:
			return rec
		case api.StatusFailed, api.StatusCanceled, api.StatusInterrupted:
			t.Fatalf("run %s ended %s: %v\n%+v\nworker:\n%s", id, rec.Status, deref(rec.Error), rec.Events, p.output())
		}
		if time.Now().After(deadline) {
			hist := ""
			if bin := temporalCLI(); bin != "" {
				cmd := exec.Command("sh", "-c", bin+" workflow show --output json --workflow-id "+id+" | grep -E \"identity|message\" | sort | uniq -c")
				cmd.Env = append(os.Environ(), fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", p.frontend))
				out, _ := cmd.CombinedOutput()
				hist = string(out)
			}
			t.Fatalf("run %s: status %s after %s\n%+v\nhistory:\n%s", id, rec.Status, within, rec.Events, hist)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
