package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadAgentEgress: a bubblewrap agent's egress loads as written, and every bad
// entry is refused at load naming the agent and the field.
func TestLoadAgentEgress(t *testing.T) {
	const ok = `{type: bubblewrap, egress: {allow: [api.github.com, "*.example.com", "127.0.0.1:8080"],
      inject: [{host: api.github.com, header: Authorization, value_env: GIT_TOKEN, format: "Bearer {}"}]}}`
	for _, tc := range []struct {
		name, sandbox string
		want          string // "" loads
	}{
		{"loads", ok, ""},
		{"not a host", `{type: bubblewrap, egress: {allow: ["https://api.github.com/x"]}}`,
			`agents[box].sandbox.egress.allow[0]: "https://api.github.com/x" is not a host`},
		{"top-level star", `{type: bubblewrap, egress: {allow: ["*"]}}`,
			`agents[box].sandbox.egress.allow[0]: "*" would allow every host`},
		{"star over a tld", `{type: bubblewrap, egress: {allow: ["*.com"]}}`,
			`agents[box].sandbox.egress.allow[0]: "*.com" is a wildcard over a top-level domain`},
		{"star inside", `{type: bubblewrap, egress: {allow: ["api.*.com"]}}`,
			`agents[box].sandbox.egress.allow[0]: "api.*.com" is not a host`},
		{"bad port", `{type: bubblewrap, egress: {allow: ["example.com:0"]}}`,
			`agents[box].sandbox.egress.allow[0]: "example.com:0": port "0" is not between 1 and 65535`},
		{"metadata address", `{type: bubblewrap, egress: {allow: ["169.254.169.254:80"]}}`,
			`agents[box].sandbox.egress.allow[0]: "169.254.169.254:80" is a link-local or cloud metadata address`},
		{"empty allow", `{type: bubblewrap, egress: {allow: []}}`,
			`agents[box].sandbox.egress.allow: is empty`},
		{"inject for a host not allowed", `{type: bubblewrap, egress: {allow: [example.com], inject: [{host: api.github.com, header: Authorization, value_env: T}]}}`,
			`agents[box].sandbox.egress.inject[0].host: "api.github.com" is not allowed by sandbox.egress.allow`},
		{"inject without value_env", `{type: bubblewrap, egress: {allow: [example.com], inject: [{host: example.com, header: Authorization}]}}`,
			`agents[box].sandbox.egress.inject[0].value_env: is empty`},
		{"inject a header the proxy owns", `{type: bubblewrap, egress: {allow: [example.com], inject: [{host: example.com, header: Host, value_env: T}]}}`,
			`agents[box].sandbox.egress.inject[0].header: "Host" is a header the proxy owns`},
		{"format without a place", `{type: bubblewrap, egress: {allow: [example.com], inject: [{host: example.com, header: X-Key, value_env: T, format: "Bearer"}]}}`,
			`agents[box].sandbox.egress.inject[0].format: "Bearer" must hold {} exactly once`},
		{"local tier", `{type: local, egress: {allow: [example.com]}}`,
			`agents[box].sandbox.egress: a local sandbox cannot apply egress`},
		{"virtual tier", `{type: virtual, egress: {allow: [example.com]}}`,
			`agents[box].sandbox.egress: a virtual sandbox cannot apply egress`},
		{"docker tier", `{type: docker, egress: {allow: [example.com]}}`,
			`agents[box].sandbox.egress: the egress proxy is not available on docker sandboxes yet`},
		{"with network", `{type: docker, network: bridge, egress: {allow: [example.com]}}`,
			`agents[box].sandbox.network: "bridge" together with egress`},
		{"unknown key", `{type: bubblewrap, egress: {allow: [example.com], allowed: [x]}}`,
			`allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			y := "llm: {base_url: http://x:1/v1}\nagents:\n  - name: box\n    sandbox: " + tc.sandbox + "\n"
			if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(LoadOptions{})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Load = %v, want it to say %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			e := cfg.Agents[0].Sandbox.Egress
			if e == nil || len(e.Allow) != 3 || len(e.Inject) != 1 || e.Inject[0].ValueEnv != "GIT_TOKEN" || e.Inject[0].Format != "Bearer {}" {
				t.Errorf("egress = %+v", e)
			}
			if got := cfg.SecretEnvNames(); !strings.Contains(strings.Join(got, ","), "GIT_TOKEN") {
				t.Errorf("SecretEnvNames() = %v, want GIT_TOKEN among them (the worker takes it out of its environment)", got)
			}
		})
	}
}

// TestReadmeEgressAgent: the agent with egress of docs/sandboxes.md loads as it shows it.
func TestReadmeEgressAgent(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "sandboxes.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blk string
	for _, c := range strings.Split(string(b), "```yaml\n")[1:] {
		c, _, _ = strings.Cut(c, "```")
		if strings.Contains(c, "egress:") {
			blk = c
			break
		}
	}
	if blk == "" {
		t.Fatal("docs/sandboxes.md has no ```yaml block with egress:")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte("llm: {base_url: http://x:1/v1}\n"+blk), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{})
	if err != nil {
		t.Fatalf("the egress block of docs/sandboxes.md: %v", err)
	}
	if e := cfg.Agents[0].Sandbox.Egress; e == nil || len(e.Allow) != 3 || len(e.Inject) != 1 || e.Inject[0].Host != "api.github.com" {
		t.Errorf("the egress block of docs/sandboxes.md loads as %+v", e)
	}
}
