package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// A local-tier command cannot read the worker's secrets through its parent's /proc
// (model key, gateway token, MCP token, the OTLP collector's headers): the worker keeps them in memory only.
func TestLocalShellCannotReadWorkerSecrets(t *testing.T) {
	t.Parallel()
	args, _ := json.Marshal(map[string]string{"command": `echo ppid=$PPID; tr '\0' '\n' < /proc/$PPID/environ`})
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "shell", Arguments: args}}},
		fakellm.Reply{Content: "looked"},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
  api_key_env: NEXO_TEST_LLM_KEY
gateway:
  tokens:
    - {name: ci, token_env: NEXO_TEST_GW_TOKEN, scopes: [read]}
agents:
  - name: snoop
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
  - name: unused
    mcp:
      - {name: remote, transport: http, url: "http://127.0.0.1:1/mcp", token_env: NEXO_TEST_MCP_TOKEN}
`)
	secrets := []string{"sk-model-key-e2e", "gw-token-e2e-0123456789abcdef", "mcp-token-e2e", "otlp-collector-token-e2e"}
	p.extraEnv = []string{"NEXO_TEST_LLM_KEY=" + secrets[0], "NEXO_TEST_GW_TOKEN=" + secrets[1], "NEXO_TEST_MCP_TOKEN=" + secrets[2],
		// A collector's token (hardening round two, item 7): not named by the config, but a
		// credential the worker uses all the same.
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20" + secrets[3]}
	p.start()

	id := strings.TrimSpace(p.ok("agent", "snoop", "Look around."))
	p.waitStatus(id, api.StatusDone)
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	if reqs[0].Auth != "Bearer "+secrets[0] {
		t.Errorf("the model call's auth = %q, want the key (read before it left the environment)", reqs[0].Auth)
	}
	msgs := reqs[1].Messages
	seen, _ := msgs[len(msgs)-1]["content"].(string)
	// The command did read the worker's environment (the test's own variables are there).
	if want := fmt.Sprintf("ppid=%d", p.cmd.Process.Pid); !strings.Contains(seen, want) || !strings.Contains(seen, "NEXO_DEV_DB_PATH=") {
		t.Fatalf("the command did not read the worker's environment (want %s and NEXO_DEV_DB_PATH):\n%s", want, seen)
	}
	for _, s := range secrets {
		if strings.Contains(seen, s) {
			t.Errorf("the command read a secret from /proc/$PPID/environ: %s", s)
		}
	}
}
