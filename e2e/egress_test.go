package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// egressConfig is an auto-mode bubblewrap agent whose sandbox may reach allow only, with
// the secret in NEXO_E2E_GIT_TOKEN added to its requests to 127.0.0.1.
func egressConfig(modelURL, allow string) string {
	return `llm:
  base_url: ` + modelURL + `
  model: fake-model
agents:
  - name: scribe
    instructions: You fetch things.
    permissions: {mode: auto}
    sandbox:
      type: bubblewrap
      egress:
        allow: ["` + allow + `"]
        inject:
          - {host: 127.0.0.1, header: Authorization, value_env: NEXO_E2E_GIT_TOKEN, format: "Bearer {}"}
    max_turns: 8
`
}

// TestBubblewrapEgressInjectsCredential: a bubblewrap agent's shell runs curl through
// the worker's egress proxy to a loopback server, which gets the injected header; the
// command's environment, /proc/self/environ, /proc/1/environ, its workspace, the tool
// results, the run record, the history and the store hold no trace of the secret; an
// unlisted host and the cloud metadata address get the proxy's 403 with its reason, and
// every request is an egress event.
func TestBubblewrapEgressInjectsCredential(t *testing.T) {
	requireBubblewrap(t)
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl is missing under CI: %v", err)
		}
		t.Skip("no /usr/bin/curl on this host")
	}
	t.Parallel()
	const secret = "ghp-e2e-egress-secret-5c2e"
	var (
		mu   sync.Mutex
		auth []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "repo contents")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	_, port, _ := net.SplitHostPort(u.Host)

	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("curl -sS " + srv.URL + "/repo")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ; " +
			"grep -r ghp- . ; cat /proc/[0-9]*/environ | tr '\\0' '\\n' | grep -c NEXO_E2E; echo END")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("curl -sS -w ' %{http_code}' http://127.0.0.2:" + port + "/; " +
			"curl -sS -w ' %{http_code}' http://169.254.169.254/latest/meta-data/")}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	p.extraEnv = append(p.extraEnv, "NEXO_E2E_GIT_TOKEN="+secret)
	p.writeConfig(egressConfig(model.Start(t), u.Host))
	p.start()
	if out := p.output(); !strings.Contains(out, "Egress proxy: enabled for scribe") {
		t.Errorf("worker output does not announce the egress proxy:\n%s", out)
	}
	id := strings.TrimSpace(p.ok("agent", "scribe", "Fetch the repo."))
	rec := p.waitStatus(id, api.StatusDone)

	mu.Lock()
	got := append([]string(nil), auth...)
	mu.Unlock()
	if len(got) != 1 || got[0] != "Bearer "+secret {
		t.Errorf("the server got Authorization %q, want one request with the injected secret", got)
	}
	var results []string
	var egress []map[string]any
	for _, e := range rec.Events {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "agent_tool_result":
			c, _ := d["content"].(string)
			results = append(results, c)
		case "egress":
			egress = append(egress, d)
		}
	}
	if len(results) != 3 {
		t.Fatalf("%d tool results, want 3: %s", len(results), eventList(rec))
	}
	if !strings.Contains(results[0], "exit code 0") || !strings.Contains(results[0], "repo contents") {
		t.Errorf("curl through the proxy: %q, want the server's answer", results[0])
	}
	if !strings.Contains(results[1], "HTTPS_PROXY=http://127.0.0.1:3128") || !strings.Contains(results[1], "END") {
		t.Errorf("the sandbox's environment: %q, want the proxy set", results[1])
	}
	if want := "egress to 127.0.0.2:" + port + " is not allowed for agent scribe\n 403"; !strings.Contains(results[2], want) {
		t.Errorf("unlisted host: %q, want %q", results[2], want)
	}
	if want := "egress to 169.254.169.254:80 is not allowed for agent scribe\n 403"; !strings.Contains(results[2], want) {
		t.Errorf("metadata address: %q, want %q", results[2], want)
	}
	if len(egress) != 3 {
		t.Fatalf("egress events = %v, want 3", egress)
	}
	if e := egress[2]; e["host"] != "169.254.169.254" || e["status"] != float64(403) {
		t.Errorf("third egress event = %v, want the metadata address refused", e)
	}
	if e := egress[0]; e["host"] != "127.0.0.1" || e["method"] != "GET" || e["status"] != float64(200) || e["injected"] != "Authorization" || e["bytes_down"] != float64(len("repo contents")) {
		t.Errorf("first egress event = %v", e)
	}
	if e := egress[1]; e["host"] != "127.0.0.2" || e["status"] != float64(403) || !strings.Contains(fmt.Sprint(e["denied"]), "not allowed for agent scribe") {
		t.Errorf("second egress event = %v", e)
	}

	// Nowhere but the server: not the record, the history, the store, the model's
	// requests, the worker's output, the workspace or the worker's directory.
	whole, _ := json.Marshal(rec)
	if strings.Contains(string(whole), secret) {
		t.Error("the secret is in the run record")
	}
	c := p.dial()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		if b, _ := protojson.Marshal(ev); strings.Contains(string(b), secret) {
			t.Errorf("history event %d holds the secret", ev.GetEventId())
		}
	}
	if events == 0 {
		t.Error("read no history")
	}
	for _, r := range model.Requests() {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), secret) {
			t.Error("a model request holds the secret")
		}
	}
	if strings.Contains(p.output(), secret) {
		t.Error("the worker's output holds the secret")
	}
	_ = filepath.WalkDir(p.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("%s holds the secret", path)
		}
		return nil
	})
}

// TestEgressUnsetSecretRefusesStart: a worker whose agent injects a variable it does not
// have refuses to start, naming the agent, the field and the variable.
func TestEgressUnsetSecretRefusesStart(t *testing.T) {
	requireBubblewrap(t)
	t.Parallel()
	p := newPlatform(t)
	p.writeConfig(egressConfig("http://127.0.0.1:1/v1", "127.0.0.1:8080"))
	r := p.runBin(bins.worker, "--dev")
	if want := "agents[scribe].sandbox.egress.inject[0].value_env: NEXO_E2E_GIT_TOKEN: egress secret is not set on this worker"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("worker without the secret: exit %d, stderr %q; want a refusal saying %q", r.code, r.stderr, want)
	}
}
