package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerRefusesConfigItUsedToTake (hardening round two, item 8): the worker binary
// started on each of these configs before; now it exits at once naming the field.
func TestWorkerRefusesConfigItUsedToTake(t *testing.T) {
	const llm = "llm: {base_url: http://127.0.0.1:1/v1, model: m}\n"
	for _, tc := range []struct {
		name, file, want string
		env              []string
	}{
		{"agents as a map", llm + "agents: {name: a, instructions: x}\n", "agents: is a map; want a list", nil},
		{"upper-case keys", "LLM: {base_url: http://127.0.0.1:1/v1, model: m}\n", "LLM: config keys are lower case (want llm)", nil},
		{"sandbox.dir /", llm + "agents: [{name: a, sandbox: {type: local, dir: /}}]\n", `agents[a].sandbox.dir: "/" is the root of the file system`, nil},
		{"approval_timeout on auto", llm + "agents: [{name: a, permissions: {mode: auto, approval_timeout: 1h}}]\n", "mode auto never asks", nil},
		{"public metrics", "metrics: {addr: \"0.0.0.0:9464\"}\n", "or set metrics.public: true", nil},
		// Item 4: webhook receivers on internal addresses, and a password not echoed.
		{"private notify receiver", llm + "approvals:\n  notify: [{url: \"http://ada:pw-9f3@10.255.255.1/hook\", secret_env: S}]\n",
			`approvals.notify[0].url "http://ada:xxxxx@10.255.255.1/hook": a loopback or private address is refused: if the receiver is yours, say allow_private: true on it`, nil},
		{"metadata notify receiver", llm + "approvals:\n  notify: [{url: \"http://169.254.169.254/\", secret_env: S, allow_private: true}]\n",
			`approvals.notify[0].url "http://169.254.169.254/": a link-local or cloud metadata address is never a receiver`, nil},
		// A URL held in url_env is checked at start too, and never echoed.
		{"private notify receiver in url_env", llm + "approvals:\n  notify: [{url_env: HOOK_URL, secret_env: S}]\n",
			`approvals.notify[0].url_env HOOK_URL: the URL it holds: a loopback or private address is refused`,
			[]string{"HOOK_URL=http://ada:pw-9f3@127.0.0.1:9000/hook"}},
		{"metadata notify receiver in url_env", llm + "approvals:\n  notify: [{url_env: HOOK_URL, secret_env: S, allow_private: true}]\n",
			`approvals.notify[0].url_env HOOK_URL: the URL it holds: a link-local or cloud metadata address is never a receiver`,
			[]string{"HOOK_URL=http://[fd00:ec2::254]/pw-9f3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "nexo.yaml"), []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bins.worker)
			cmd.Dir = dir
			cmd.Env = append(append(os.Environ(), "NEXO_TEMPORAL_ADDRESS=127.0.0.1:1"), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "pw-9f3") {
				t.Fatalf("worker on %q: %v, want a refusal with %q:\n%s", tc.file, err, tc.want, out)
			}
		})
	}
}
