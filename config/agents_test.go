package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/permissions"
)

const agentsYAML = `
llm:
  base_url: http://127.0.0.1:11434/v1
  model: qwen3:8b
agents:
  - name: scribe
    instructions: You write files when asked.
    permissions: {mode: approve, approve_when: [{capability: write, detail: "notes/**"}]}
    sandbox: {type: local, dir: ./workspace}
    fetch_allow: [example.com]
    produces: ["notes/*.md"]
    max_turns: 10
    retry_for: 72h
`

func TestLoadAgents(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(agentsYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{"NEXO_LLM_MODEL=llama3"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.LLM.Model != "llama3" || cfg.LLM.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("llm = %+v, want the env model and the default key variable", cfg.LLM)
	}
	if len(cfg.Agents) != 1 {
		t.Fatalf("agents = %+v", cfg.Agents)
	}
	a := cfg.Agents[0]
	if a.Name != "scribe" || a.Permissions.Mode != permissions.ModeApprove || a.Sandbox.Dir != "./workspace" ||
		a.MaxTurns != 10 || len(a.Permissions.ApproveWhen) != 1 || a.Permissions.ApproveWhen[0].Detail != "notes/**" ||
		a.FetchAllow[0] != "example.com" || a.Produces[0] != "notes/*.md" || time.Duration(a.RetryFor) != 72*time.Hour {
		t.Errorf("agent = %+v", a)
	}
}

// TestLoadAgentPool: the pool definition of docs/sandboxes.md loads with its pool.
func TestLoadAgentPool(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	y := "llm: {base_url: http://x:1/v1}\nagents:\n  - name: trainer\n    sandbox: {type: docker, pool: gpu}   # or {type: local, pool: gpu}\n"
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if s := cfg.Agents[0].Sandbox; s.Pool != "gpu" || s.Type != "docker" {
		t.Errorf("sandbox = %+v, want docker on pool gpu", s)
	}
}

// TestLoadAgentBubblewrap: the bubblewrap agent of docs/sandboxes.md, as printed, loads with its limits.
func TestLoadAgentBubblewrap(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "sandboxes.md"))
	if err != nil {
		t.Fatal(err)
	}
	var y string
	for _, blk := range strings.Split(string(readme), "```yaml\n")[1:] {
		if blk, _, _ = strings.Cut(blk, "```"); strings.Contains(blk, "type: bubblewrap") {
			y = blk
			break
		}
	}
	if y == "" {
		t.Fatal("docs/sandboxes.md has no ```yaml block with a bubblewrap agent")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte("llm: {base_url: http://x:1/v1}\n"+y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if s := cfg.Agents[0].Sandbox; s.Type != "bubblewrap" || s.Memory != "2g" || s.PidsLimit != 256 {
		t.Errorf("sandbox = %+v, want bubblewrap with memory 2g and pids_limit 256", s)
	}
}

func TestAgentErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"bad mode", "agents:\n  - name: a\n    permissions: {mode: yolo}\n", "agents[a].permissions.mode"},
		{"no base url", "agents:\n  - name: a\n", "llm.base_url"},
		{"duplicate", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n  - name: a\n", "agents[a].name"},
		{"bad name", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: 'a b'\n", "name"},
		{"typo in agent", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    instructons: hi\n", "instructons"},
		{"web_search without a backend", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    web_search: true\n", "agents[a].web_search"},
		{"retry budget under a minute", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    retry_for: 10s\n", "agents[a].retry_for"},
		{"bad pool", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: trainer\n    sandbox: {type: docker, pool: GPU}\n", `agents[trainer].sandbox.pool: pool name "GPU" may hold only`},
		{"unknown sandbox type", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    sandbox: {type: firejail}\n", `agents[a].sandbox.type: "firejail" is not one of local, virtual, bubblewrap, docker`},
		{"bubblewrap with an image", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    sandbox: {type: bubblewrap, image: alpine}\n", "agents[a].sandbox.type: image, network, binds and runtime apply to docker sandboxes only"},
		{"bubblewrap with cpus", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    sandbox: {type: bubblewrap, cpus: 2}\n", "agents[a].sandbox.cpus: a bubblewrap sandbox has no CPU limit"},
		// Hardening round two, item 13: these were silently ignored by the local tier.
		{"local with limits", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    sandbox: {type: local, memory: 1g, env: {A: b}, user: nobody}\n", "agents[a].sandbox.env: a local sandbox cannot apply env, memory, user"},
		{"default tier with cap_add", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    sandbox: {cap_add: [NET_ADMIN]}\n", "agents[a].sandbox.cap_add: a local sandbox cannot apply cap_add"},
		{"bubblewrap with a user", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    sandbox: {type: bubblewrap, user: root}\n", "agents[a].sandbox.user: a bubblewrap sandbox cannot apply user"},
		{"escaping produces", "llm: {base_url: http://x:1/v1}\nagents:\n  - name: a\n    produces: [../x]\n", "agents[a].produces[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(LoadOptions{Env: []string{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestLoadAgentSkillsAndRequires(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const y = `
llm: {base_url: http://127.0.0.1:1/v1}
skills_path: ./my-skills
agents:
  - name: reporter
    skills: [report-kit, pdf]
    skill_files: skip_same
    requires:
      commands: {python3: ">=3.10", Rscript: "*"}
      locale: utf8
    sandbox: {type: docker, env: {LANG: C.UTF-8}}
`
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	a := cfg.Agents[0]
	if cfg.SkillsPath != "./my-skills" || strings.Join(a.Skills, ",") != "report-kit,pdf" || a.SkillFiles != "skip_same" ||
		a.Requires.Commands["python3"] != ">=3.10" || a.Requires.Locale != "utf8" {
		t.Errorf("config = %q, agent = %+v", cfg.SkillsPath, a)
	}
	if _, ok := a.Requires.Commands["Rscript"]; !ok {
		t.Errorf("command names must keep their case: %v", a.Requires.Commands)
	}
	if a.Sandbox.Env["LANG"] != "C.UTF-8" {
		t.Errorf("environment variable names must keep their case: %v", a.Sandbox.Env)
	}
	cfg, err = Load(LoadOptions{Env: []string{"NEXO_SKILLS_PATH=/srv/skills"}})
	if err != nil || cfg.SkillsPath != "/srv/skills" {
		t.Errorf("NEXO_SKILLS_PATH: %q, %v", cfg.SkillsPath, err)
	}
}

// An MCP server's oauth: block reaches the agent, its typos are errors, and the
// credential file has a default, a file key, an environment override and validation.
func TestLoadMCPOAuth(t *testing.T) {
	const y = `
llm: {base_url: http://127.0.0.1:11434/v1, model: m}
mcp:
  credentials_file: /srv/nexo/creds.json
agents:
  - name: a
    instructions: x
    mcp:
      - name: docs
        transport: http
        url: https://mcp.example.com/mcp
        oauth:
          client_id: nexo-cli
          scopes: [read, write]
          authorization_server: https://auth.example.com
          client_secret_env: DOCS_CLIENT_SECRET
`
	dir := t.TempDir()
	t.Chdir(dir)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(y)
	cfg, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Agents[0].MCP[0].OAuth
	if o == nil || o.ClientID != "nexo-cli" || strings.Join(o.Scopes, ",") != "read,write" || o.AuthorizationServer != "https://auth.example.com" ||
		o.ClientSecretEnv != "DOCS_CLIENT_SECRET" {
		t.Errorf("oauth = %+v", o)
	}
	if cfg.MCP.CredentialsFile != "/srv/nexo/creds.json" {
		t.Errorf("mcp.credentials_file = %q", cfg.MCP.CredentialsFile)
	}
	cfg, err = Load(LoadOptions{Env: []string{"NEXO_MCP_CREDENTIALS_FILE=/run/creds.json"}})
	if err != nil || cfg.MCP.CredentialsFile != "/run/creds.json" {
		t.Errorf("NEXO_MCP_CREDENTIALS_FILE: %q, %v", cfg.MCP.CredentialsFile, err)
	}
	write(strings.Replace(y, "client_id:", "clientid:", 1))
	if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), "clientid") {
		t.Errorf("a misspelled oauth key: %v", err)
	}
	write(strings.Replace(y, "mcp:\n  credentials_file: /srv/nexo/creds.json\n", "", 1))
	cfg, err = Load(LoadOptions{})
	if err != nil || cfg.MCP.CredentialsFile != ".nexo/mcp-credentials.json" {
		t.Errorf("default credentials file: %q, %v", cfg.MCP.CredentialsFile, err)
	}
	cfg.MCP.CredentialsFile = " "
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "mcp.credentials_file") {
		t.Errorf("Validate with an empty credentials file: %v", err)
	}
}

// Rules on arguments load as written (an argument's name keeps its case: MCP tools name
// arguments like filePath) and a broken one stops the load naming the agent and the rule.
func TestLoadArgumentRules(t *testing.T) {
	const y = `
llm: {base_url: http://x:1/v1}
agents:
  - name: builder
    permissions:
      mode: approve
      approve_when: [{capability: shell, args_regex: {command: '^go test \./\.\.\.$'}}]
      deny_when: [{capability: shell, args_regex: {command: '\brm\s+-[a-z]*(rf|fr)'}, reason: never rm -rf}]
  - name: filer
    permissions:
      mode: approve
      approve_when: [{capability: mcp, tool: "fs_*", args: {filePath: "drafts/**"}}]
`
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p := cfg.Agents[0].Permissions
	if got := p.ApproveWhen[0].ArgsRegex["command"]; got != `^go test \./\.\.\.$` {
		t.Errorf("approve_when[0].args_regex.command = %q", got)
	}
	if d := p.DenyWhen; len(d) != 1 || d[0].ArgsRegex["command"] != `\brm\s+-[a-z]*(rf|fr)` || d[0].Reason != "never rm -rf" {
		t.Errorf("deny_when = %+v", d)
	}
	sh := func(cmd string) permissions.Call {
		return permissions.Call{Capability: permissions.CapShell, Tool: "shell", Detail: cmd, Args: map[string]any{"command": cmd}}
	}
	for cmd, want := range map[string]permissions.Decision{"go test ./...": permissions.Allow, "ls": permissions.NeedsApproval, "rm -rf x": permissions.Deny} {
		if v := permissions.Decide(p, sh(cmd), permissions.Approvals{}); v.Decision != want {
			t.Errorf("Decide(%q) = %v (%s), want %v", cmd, v.Decision, v.Reason, want)
		}
	}
	f := cfg.Agents[1].Permissions.ApproveWhen[0]
	if f.Args["filePath"] != "drafts/**" {
		t.Errorf("args = %v, want the argument name filePath as written", f.Args)
	}

	for _, tc := range []struct{ name, rules, want string }{
		{"invalid regex", `deny_when: [{capability: shell, args_regex: {command: 'rm -(rf'}}]`,
			`agents[builder].permissions.deny_when[0].args_regex.command: invalid permission policy: regular expression "rm -(rf" does not parse: `},
		{"path glob out of the workspace", `approve_when: [{capability: write}, {capability: write, args: {path: "../**"}}]`,
			`agents[builder].permissions.approve_when[1].args.path: invalid permission policy: path pattern "../**" must stay inside the workspace`},
		{"unfinished escape", `deny_when: [{capability: mcp, args: {q: 'a\'}}]`,
			`agents[builder].permissions.deny_when[0].args.q: invalid permission policy: pattern "a\\" ends with an unfinished escape`},
		{"typo in a rule", `deny_when: [{capability: shell, arg_regex: {command: rm}}]`, "arg_regex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := loadBuilderPermissions(t, tc.rules)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestReadmeArgumentRules: the three lines of docs/agents.md load and decide exactly as the page
// says they do.
func TestReadmeArgumentRules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := func(lang, marker string) string {
		for _, blk := range strings.Split(string(b), "```"+lang+"\n")[1:] {
			blk, _, _ = strings.Cut(blk, "```")
			if strings.Contains(blk, marker) {
				return blk
			}
		}
		t.Fatalf("docs/agents.md has no ```%s block containing %q", lang, marker)
		return ""
	}
	rules, decisions := block("yaml", "never rm -rf"), block("text", "→ allow:")
	dir := t.TempDir()
	t.Chdir(dir)
	y := "llm: {base_url: http://x:1/v1}\nagents:\n  - name: builder\n" + rules
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load the rules of docs/agents.md: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(decisions), "\n")
	if len(lines) != 4 {
		t.Fatalf("docs/agents.md decisions = %d lines, want 4", len(lines))
	}
	for _, line := range lines {
		cmd, want, ok := strings.Cut(line, "→ ")
		if !ok {
			t.Fatalf("docs/agents.md decision line %q has no →", line)
		}
		cmd = strings.TrimSpace(cmd)
		c := permissions.Call{Capability: permissions.CapShell, Tool: "shell", Detail: cmd, Args: map[string]any{"command": cmd}}
		v := permissions.Decide(cfg.Agents[0].Permissions, c, permissions.Approvals{})
		if got := v.Decision.String() + ": " + v.Reason; got != want {
			t.Errorf("docs/agents.md says %q decides\n  %s\ngot\n  %s", cmd, want, got)
		}
	}
}

// Deadlines load as written, on the policy and on an approve_when rule, and a bad one stops
// the load naming the agent, the rule and the field.
func TestLoadApprovalDeadlines(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const y = `
llm: {base_url: http://x:1/v1}
agents:
  - name: builder
    permissions:
      mode: approve
      approval_timeout: 24h
      on_timeout: escalate
      approve_when: [{capability: shell, detail: "go test *", approval_timeout: 15m, on_timeout: approve}]
`
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p := cfg.Agents[0].Permissions
	if p.ApprovalTimeout != "24h" || p.OnTimeout != permissions.OnTimeoutEscalate {
		t.Errorf("policy deadline = %q %q", p.ApprovalTimeout, p.OnTimeout)
	}
	if r := p.ApproveWhen[0]; r.ApprovalTimeout != "15m" || r.OnTimeout != permissions.OnTimeoutApprove {
		t.Errorf("rule deadline = %q %q", r.ApprovalTimeout, r.OnTimeout)
	}
	sh := permissions.Call{Capability: permissions.CapShell, Tool: "shell", Detail: "go test ./...", Args: map[string]any{"command": "go test ./..."}}
	if v := permissions.Decide(p, sh, permissions.Approvals{}); v.Decision != permissions.NeedsApproval || v.Deadline.Duration() != 15*time.Minute {
		t.Errorf("Decide(go test) = %+v, want needs approval within the rule's 15m", v)
	}

	for _, tc := range []struct{ name, perms, want string }{
		{"bad duration", `approval_timeout: 1 day`,
			`agents[builder].permissions.approval_timeout: invalid permission policy: "1 day" is not a duration (write it as 90s, 30m or 24h)`},
		{"unknown action on a rule", `approve_when: [{capability: write}, {capability: shell, approval_timeout: 1h, on_timeout: ignore}]`,
			`agents[builder].permissions.approve_when[1].on_timeout: invalid permission policy: unknown action "ignore" (want one of deny, approve, escalate)`},
		{"action without a timeout", `on_timeout: approve`,
			`agents[builder].permissions.on_timeout: invalid permission policy: on_timeout approve without an approval_timeout never happens; set approval_timeout too`},
		{"deadline on a deny rule", `deny_when: [{capability: shell, approval_timeout: 1h}]`,
			`agents[builder].permissions.deny_when[0].approval_timeout: invalid permission policy: a deny_when rule refuses at once`},
		{"negative", `approval_timeout: -5m`, `agents[builder].permissions.approval_timeout: invalid permission policy: "-5m" is not positive`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := loadBuilderPermissions(t, tc.perms)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// loadBuilderPermissions loads a config whose agent "builder" has permissions mode approve
// plus the YAML line perms, and returns Load's error.
func loadBuilderPermissions(t *testing.T, perms string) error {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	y := "llm: {base_url: http://x:1/v1}\nagents:\n  - name: builder\n    permissions:\n      mode: approve\n      " + perms + "\n"
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(LoadOptions{Env: []string{}})
	return err
}

// TestLoadAgentWarm: sandbox.warm loads, and a size outside 0..64 is refused at load,
// naming the agent and the field.
func TestLoadAgentWarm(t *testing.T) {
	for _, tc := range []struct {
		warm string
		want string // "" loads
	}{
		{"2", ""},
		{"-1", "agents[boxed].sandbox.warm: -1 is not between 0 and 64"},
		{"65", "agents[boxed].sandbox.warm: 65 is not between 0 and 64"},
	} {
		t.Run(tc.warm, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			y := "llm: {base_url: http://x:1/v1}\nagents:\n  - name: boxed\n    sandbox: {type: docker, warm: " + tc.warm + "}\n"
			if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(LoadOptions{})
			if tc.want == "" {
				if err != nil || cfg.Agents[0].Sandbox.Warm != 2 {
					t.Fatalf("Load = %v; want warm 2", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestReadmeWarmAndRuntimeAgents: the agents of docs/sandboxes.md with a warm pool and with gVisor
// load as it shows them.
func TestReadmeWarmAndRuntimeAgents(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "sandboxes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, marker := range []string{"warm: 2", "runtime: runsc"} {
		var blk string
		for _, c := range strings.Split(string(b), "```yaml\n")[1:] {
			c, _, _ = strings.Cut(c, "```")
			if strings.Contains(c, marker) {
				blk = c
				break
			}
		}
		if blk == "" {
			t.Fatalf("docs/sandboxes.md has no ```yaml block containing %q", marker)
		}
		dir := t.TempDir()
		t.Chdir(dir)
		y := "llm: {base_url: http://x:1/v1}\n" + blk
		if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(LoadOptions{})
		if err != nil {
			t.Fatalf("the block of docs/sandboxes.md with %q: %v", marker, err)
		}
		sb := cfg.Agents[0].Sandbox
		if (marker == "warm: 2" && sb.Warm != 2) || (marker == "runtime: runsc" && sb.Runtime != "runsc") {
			t.Errorf("the block of docs/sandboxes.md with %q loads as %+v", marker, sb)
		}
	}
}

// An MCP server's result: block and timeout load as written, and a pattern that does not
// compile or a bound out of range stops the load naming the agent, the server and the value.
func TestLoadMCPResultAndTimeout(t *testing.T) {
	const y = `
llm: {base_url: http://127.0.0.1:11434/v1, model: m}
agents:
  - name: a
    instructions: x
    mcp:
      - name: notes
        transport: stdio
        command: /usr/local/bin/notes-mcp
        timeout: 30s
        result:
          max_bytes: 4096
          redact: ['sk-[A-Za-z0-9]{16,}', '(?i)password=\S+']
`
	dir := t.TempDir()
	t.Chdir(dir)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(y)
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Agents[0].MCP[0]
	if time.Duration(m.Timeout) != 30*time.Second {
		t.Errorf("timeout = %s, want 30s", time.Duration(m.Timeout))
	}
	if r := m.Result; r == nil || r.MaxBytes != 4096 || len(r.Redact) != 2 || r.Redact[0] != `sk-[A-Za-z0-9]{16,}` || r.Redact[1] != `(?i)password=\S+` {
		t.Errorf("result = %+v", m.Result)
	}

	for _, tc := range []struct{ name, from, to, want string }{
		{"bad pattern", `'(?i)password=\S+'`, `'secret-(['`,
			`agents[a].mcp[0].result.redact[1]: server notes: pattern "secret-([" does not compile: `},
		{"max_bytes zero", "max_bytes: 4096\n          redact: ['sk-[A-Za-z0-9]{16,}', '(?i)password=\\S+']", "max_bytes: 0",
			"agents[a].mcp[0].result.max_bytes: server notes: 0 is not between 1 and 67108864"},
		{"max_bytes over 64 MiB", "max_bytes: 4096", "max_bytes: 67108865",
			"agents[a].mcp[0].result.max_bytes: server notes: 67108865 is not between 1 and 67108864"},
		{"timeout under a second", "timeout: 30s", "timeout: 500ms",
			"agents[a].mcp[0].timeout: server notes: 500ms is not between 1s and 24h0m0s"},
		{"timeout over a day", "timeout: 30s", "timeout: 25h",
			"agents[a].mcp[0].timeout: server notes: 25h0m0s is not between 1s and 24h0m0s"},
		{"typo", "max_bytes:", "maxbytes:", "maxbytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(y, tc.from, tc.to, 1)
			if bad == y {
				t.Fatalf("%q is not in the config", tc.from)
			}
			write(bad)
			if _, err := Load(LoadOptions{Env: []string{}}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestDocsMCPResultPolicy: the server of docs/mcp.md's "Results and timeouts" loads as
// the page says, and the bad pattern it quotes is refused with the message it quotes.
func TestDocsMCPResultPolicy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, blk := range strings.Split(string(b), "```yaml\n")[1:] {
		if blk, _, _ = strings.Cut(blk, "```"); strings.Contains(blk, "max_bytes: 8192") {
			block = blk
		}
	}
	if block == "" {
		t.Fatal("docs/mcp.md has no yaml block with max_bytes: 8192")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	write := func(s string) {
		t.Helper()
		y := "llm: {base_url: http://x:1/v1}\nagents:\n  - name: researcher\n    mcp:\n      - {name: notes, transport: stdio, command: notes-mcp}\n" +
			strings.Replace(s, "    mcp:\n", "", 1)
		if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(block)
	cfg, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load the server of docs/mcp.md: %v", err)
	}
	m := cfg.Agents[0].MCP[1]
	if time.Duration(m.Timeout) != 30*time.Second || m.Result == nil || m.Result.MaxBytes != 8192 || len(m.Result.Redact) != 2 {
		t.Errorf("server = %+v, result %+v", m, m.Result)
	}
	write(strings.Replace(block, `'sk-[A-Za-z0-9]{20,}'`, `'sk-(['`, 1))
	const want = `agents[researcher].mcp[1].result.redact[0]: server tickets: pattern "sk-([" does not compile: `
	if _, err := Load(LoadOptions{Env: []string{}}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load error = %v, want %q", err, want)
	}
	if !strings.Contains(string(b), strings.TrimSuffix(want, ": ")) {
		t.Errorf("docs/mcp.md does not quote the error %q", want)
	}
}
