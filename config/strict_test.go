package config

import (
	"os"
	"strings"
	"testing"
)

// TestLoadRefusesWhatItUsedToAccept (hardening round two, item 8): each of these loaded
// without a word before; each is refused naming the field.
func TestLoadRefusesWhatItUsedToAccept(t *testing.T) {
	const llm = "llm: {base_url: http://127.0.0.1:1/v1, model: m}\n"
	for _, tc := range []struct{ name, file, want string }{
		{"agents as a map", llm + "agents: {name: a, instructions: x}\n", "agents: is a map; want a list"},
		{"upper-case section", "LLM: {base_url: http://127.0.0.1:1/v1, model: m}\n", "LLM: config keys are lower case (want llm)"},
		{"upper-case key", "llm: {BASE_URL: http://127.0.0.1:1/v1, model: m}\n", "llm.BASE_URL: config keys are lower case (want base_url)"},
		{"upper-case agent key", llm + "agents: [{Name: a}]\n", "agents[0].Name: config keys are lower case (want name)"},
		{"sandbox.dir /", llm + "agents: [{name: a, sandbox: {type: local, dir: /}}]\n", `agents[a].sandbox.dir: "/" is the root of the file system`},
		{"sandbox.dir a file", llm + "agents: [{name: a, sandbox: {type: local, dir: ./nexo.yaml}}]\n", `agents[a].sandbox.dir "./nexo.yaml": is a file`},
		{"context.max_tokens 2^63-1", llm + "agents: [{name: a, context: {max_tokens: 9223372036854775807}}]\n", "agents[a].context.max_tokens: 9223372036854775807 is above any model's context window"},
		{"keep_recent 10^9", llm + "agents: [{name: a, context: {max_tokens: 8000, keep_recent: 1000000000}}]\n", "agents[a].context.keep_recent: 1000000000 messages"},
		{"approval_timeout 1ns", llm + "agents: [{name: a, permissions: {mode: approve, approval_timeout: 1ns}}]\n", `agents[a].permissions.approval_timeout: invalid permission policy: "1ns" is not between 1s and 8784h`},
		{"approval_timeout a million hours", llm + "agents: [{name: a, permissions: {mode: approve, approval_timeout: 1000000h}}]\n", `"1000000h" is not between 1s and 8784h`},
		{"approval_timeout on auto", llm + "agents: [{name: a, permissions: {mode: auto, approval_timeout: 1h}}]\n", "agents[a].permissions.approval_timeout: invalid permission policy: mode auto never asks"},
		{"credentials_file a directory", "mcp: {credentials_file: " + os.TempDir() + "}\n", `mcp.credentials_file "` + os.TempDir() + `": is a directory`},
		{"metrics on every interface", "metrics: {addr: \"0.0.0.0:9464\"}\n", `metrics.addr "0.0.0.0:9464": serves /metrics, which has no authentication, on every interface`},
		{"metrics with no host", "metrics: {addr: \":9464\"}\n", `metrics.addr ":9464": serves /metrics`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			writeFile(t, dir, DefaultFile, tc.file)
			_, err := Load(LoadOptions{Env: []string{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLoadAcceptsWhatIsRight(t *testing.T) {
	for _, file := range []string{
		"metrics: {addr: \"0.0.0.0:9464\", public: true}\n",
		"metrics: {addr: \"127.0.0.1:0\"}\n",
		// Names inside data maps keep their case.
		"llm: {base_url: http://127.0.0.1:1/v1, model: m, prices: {GPT-X: {input_per_mtok: 1, output_per_mtok: 1}}}\nagents: [{name: a, sandbox: {type: docker, env: {LANG: C.UTF-8}}, requires: {commands: {Rscript: \"*\"}}}]\n",
		"llm: {base_url: http://127.0.0.1:1/v1, model: m}\nagents: [{name: a, permissions: {mode: approve, approval_timeout: 24h}, context: {max_tokens: 200000, keep_recent: 20}}]\n",
	} {
		dir := t.TempDir()
		t.Chdir(dir)
		writeFile(t, dir, DefaultFile, file)
		if _, err := Load(LoadOptions{Env: []string{}}); err != nil {
			t.Errorf("Load(%q) = %v", file, err)
		}
	}
}

func TestLoadWarnsOfWhatItStartsWith(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"empty file", "", "sets nothing (no llm, no agents)"},
		{"only a comment", "# to do\n", "sets nothing (no llm, no agents)"},
		{"unset key of a remote endpoint", "llm: {base_url: https://api.example.com/v1, model: m, api_key_env: NEXO_TEST_UNSET_KEY}\n", "llm.api_key_env names NEXO_TEST_UNSET_KEY, which is not set"},
		{"unset MCP token", "llm: {base_url: http://127.0.0.1:1/v1, model: m}\nagents: [{name: a, mcp: [{name: r, transport: http, url: \"http://127.0.0.1:1/mcp\", token_env: NEXO_TEST_UNSET_TOKEN}]}]\n", "agents[a].mcp[0].token_env names NEXO_TEST_UNSET_TOKEN, which is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			writeFile(t, dir, DefaultFile, tc.file)
			c, err := Load(LoadOptions{Env: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			if w := strings.Join(c.Warnings(), "\n"); !strings.Contains(w, tc.want) {
				t.Fatalf("warnings %q, want one with %q", w, tc.want)
			}
		})
	}
	// A loopback endpoint usually needs no key: no warning.
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, DefaultFile, "llm: {base_url: http://127.0.0.1:11434/v1, model: m}\n")
	if c, err := Load(LoadOptions{Env: []string{}}); err != nil || len(c.Warnings()) != 0 {
		t.Fatalf("loopback endpoint: %v, warnings %q", err, c.Warnings())
	}
}
