package agents

import (
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

func TestSpecValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"ok", Spec{Name: "a"}, ""},
		{"harness ok", Spec{Name: "a", Loop: &api.LoopSpec{Type: api.LoopHarness, Command: []string{"/bin/h"}}}, ""},
		{"go loop ok", Spec{Name: "a", Loop: &api.LoopSpec{Type: api.LoopGo, Name: "planner"}}, ""},
		{"harness no command", Spec{Name: "a", Loop: &api.LoopSpec{Type: api.LoopHarness}}, "loop.command: is empty"},
		{"harness blank argv0", Spec{Name: "a", Loop: &api.LoopSpec{Type: api.LoopHarness, Command: []string{" "}}}, "loop.command[0]"},
		{"loop no type", Spec{Name: "a", Loop: &api.LoopSpec{Command: []string{"h"}}}, "loop.type: is empty; want harness"},
		{"loop unknown type", Spec{Name: "a", Loop: &api.LoopSpec{Type: "mcp", Command: []string{"h"}}}, `loop.type: "mcp" is not one of harness, go`},
		{"go loop no name", Spec{Name: "a", Loop: &api.LoopSpec{Type: api.LoopGo}}, "loop.name: is empty"},
		{"harness on virtual", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxVirtual}, Loop: &api.LoopSpec{Type: api.LoopHarness, Command: []string{"h"}}}, "loop.type: a harness runs as a process in the run's sandbox, and a virtual sandbox runs no processes"},
		{"harness on docker", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker}, Loop: &api.LoopSpec{Type: api.LoopHarness, Command: []string{"h"}}}, "loop.type: a harness cannot run in a docker sandbox yet"},
		{"loop timeout", Spec{Name: "a", Loop: &api.LoopSpec{Type: api.LoopHarness, Command: []string{"h"}, Timeout: api.Duration(2 * time.Hour)}}, "loop.timeout: 2h0m0s is not between"},
		{"no name", Spec{}, "name: is empty"},
		{"bad name", Spec{Name: "a b"}, "name:"},
		{"bad mode", Spec{Name: "a", Permissions: permissions.Policy{Mode: "yolo"}}, "permissions.mode"},
		{"bad sandbox", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: "vm"}}, "sandbox.type"},
		{"image on local", Spec{Name: "a", Sandbox: api.SandboxSpec{Image: "x"}}, "docker sandboxes only"},
		{"dir on docker", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker, Dir: "/x"}}, "sandbox.dir"},
		{"runtime on local", Spec{Name: "a", Sandbox: api.SandboxSpec{Runtime: "runsc"}}, "docker sandboxes only"},
		{"warm on docker", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker, Warm: 64}}, ""},
		{"warm negative", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker, Warm: -1}}, "sandbox.warm: -1 is not between 0 and 64"},
		{"warm absurd", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker, Warm: 65}}, "sandbox.warm: 65 is not between 0 and 64"},
		{"warm on local", Spec{Name: "a", Sandbox: api.SandboxSpec{Warm: 2}}, `sandbox.warm: warm pools are of docker sandboxes only (type "local")`},
		{"pool on docker", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker, Pool: "gpu-1"}}, ""},
		{"pool bad name", Spec{Name: "a", Sandbox: api.SandboxSpec{Pool: "GPU box"}}, `sandbox.pool: pool name "GPU box" may hold only lowercase letters`},
		{"pool too long", Spec{Name: "a", Sandbox: api.SandboxSpec{Pool: strings.Repeat("p", 41)}}, "longer than 40 characters"},
		{"pool on virtual", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxVirtual, Pool: "gpu"}}, "sandbox.pool: a virtual sandbox"},
		{"fetch url", Spec{Name: "a", FetchAllow: []string{"https://x.com"}}, "fetch_allow[0]"},
		{"produces escape", Spec{Name: "a", Produces: []string{"../x"}}, "produces[0]"},
		{"negative turns", Spec{Name: "a", MaxTurns: -1}, "max_turns"},
		{"mcp no command", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPStdio}}}, "mcp[0].command"},
		{"mcp bad name", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "a_b", Transport: api.MCPStdio, Command: "x"}}}, "mcp[0].name"},
		{"mcp auth header", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp", Headers: map[string]string{"authorization": "Bearer x"}}}}, "token_env"},
		{"mcp transport", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: "ws"}}}, "mcp[0].transport"},
		{"oauth ok", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp",
			OAuth: &api.MCPOAuth{ClientID: "c", Scopes: []string{"read"}, AuthorizationServer: "https://as.example.com/t1", ClientSecretEnv: "MCP_SECRET"}}}}, ""},
		{"oauth on stdio", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPStdio, Command: "x", OAuth: &api.MCPOAuth{ClientID: "c"}}}},
			"mcp[0].oauth: only for transport http or sse"},
		{"oauth and token_env", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPSSE, URL: "http://h/sse", TokenEnv: "T", OAuth: &api.MCPOAuth{ClientID: "c"}}}},
			"mcp[0].oauth: token_env and oauth are exclusive"},
		{"oauth no client", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp", OAuth: &api.MCPOAuth{}}}},
			"mcp[0].oauth.client_id: is empty"},
		{"oauth issuer", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp", OAuth: &api.MCPOAuth{ClientID: "c", AuthorizationServer: "as.example.com"}}}},
			"mcp[0].oauth.authorization_server"},
		{"oauth secret value", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp", OAuth: &api.MCPOAuth{ClientID: "c", ClientSecretEnv: "s3cr3t-value!"}}}},
			"mcp[0].oauth.client_secret_env"},
		{"oauth scope", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp", OAuth: &api.MCPOAuth{ClientID: "c", Scopes: []string{"a b"}}}}},
			"mcp[0].oauth.scopes[0]"},
		{"skills ok", Spec{Name: "a", Skills: []string{"pdf", "report-kit"}, SkillFiles: api.SkillFilesSkipSame,
			Requires: api.Requirements{Commands: map[string]string{"python3": ">=3.10, <4", "sh": "*", "node": ""}, Locale: "utf8"}}, ""},
		{"bad skill", Spec{Name: "a", Skills: []string{"../x"}}, "skills[0]: skill name"},
		{"skill twice", Spec{Name: "a", Skills: []string{"x", "x"}}, `skills[1]: "x" is listed twice`},
		{"empty tool hook", Spec{Name: "a", ToolHooks: []string{" "}}, "tool_hooks[0]: is empty"},
		{"tool hook twice", Spec{Name: "a", ToolHooks: []string{"audit", "audit"}}, `tool_hooks[1]: "audit" is named twice`},
		{"skill_files", Spec{Name: "a", Skills: []string{"x"}, SkillFiles: "sometimes"}, "skill_files"},
		{"skill_files without skills", Spec{Name: "a", SkillFiles: "copy"}, "skill_files: is set but the agent has no skills"},
		{"bad constraint", Spec{Name: "a", Requires: api.Requirements{Commands: map[string]string{"python3": ">=3.x"}}}, `requires.commands.python3: ">=3.x" is not a version constraint`},
		{"bad command", Spec{Name: "a", Requires: api.Requirements{Commands: map[string]string{"rm -rf": ""}}}, "requires.commands.rm -rf"},
		{"bad locale", Spec{Name: "a", Requires: api.Requirements{Locale: "utf 8"}}, "requires.locale"},
		{"requires on virtual", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxVirtual}, Requires: api.Requirements{Locale: "utf8"}}, "requires: a virtual sandbox has no shell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestOfferedFollowsPermissionsAndSandbox(t *testing.T) {
	names := func(s Spec) string {
		var out []string
		for _, t := range Offered(s) {
			out = append(out, t.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"read_only", Spec{}, "read_file,glob"},
		{"read_only plus write", Spec{Permissions: permissions.Policy{Allow: []permissions.Capability{permissions.CapWrite}}}, "read_file,write_file,glob"},
		{"auto", Spec{Permissions: permissions.Policy{Mode: permissions.ModeAuto}}, "read_file,write_file,glob,shell"},
		{"auto with fetch list", Spec{Permissions: permissions.Policy{Mode: permissions.ModeAuto}, FetchAllow: []string{"example.com"}}, "read_file,write_file,glob,shell,fetch"},
		{"auto on virtual", Spec{Permissions: permissions.Policy{Mode: permissions.ModeAuto}, Sandbox: api.SandboxSpec{Type: api.SandboxVirtual}}, "read_file,write_file,glob"},
		{"web_search needs the capability", Spec{WebSearch: true}, "read_file,glob"},
		{"web_search allowed", Spec{WebSearch: true, Permissions: permissions.Policy{Allow: []permissions.Capability{permissions.CapSearch}}}, "read_file,glob,web_search"},
		{"search allowed but not asked for", Spec{Permissions: permissions.Policy{Allow: []permissions.Capability{permissions.CapSearch}}}, "read_file,glob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(tc.spec); got != tc.want {
				t.Errorf("Offered = %s, want %s", got, tc.want)
			}
		})
	}
	for _, tool := range Builtins {
		if tool.Description == "" || len(tool.Parameters) == 0 {
			t.Errorf("tool %s lacks a description or schema", tool.Name)
		}
	}
}

func TestConstraint(t *testing.T) {
	for _, tc := range []struct {
		constraint string
		yes, no    []string
	}{
		{"", []string{"1", "0.1", ""}, nil},
		{"*", []string{"3.12.1"}, nil},
		{">=3.10", []string{"3.10", "3.10.0", "3.11.7", "4"}, []string{"3.9.18", "3.1", "2.7.18"}},
		{">3.9", []string{"3.10"}, []string{"3.9", "3.9.0"}},
		{"<2", []string{"1.9.9"}, []string{"2", "2.0.1"}},
		{"<=2.7", []string{"2.7", "2.6"}, []string{"2.7.1", "3"}},
		{"3.10", []string{"3.10", "3.10.12"}, []string{"3.1", "3.100", "3.11"}},
		{"=3", []string{"3.0", "3.99.1"}, []string{"2.9", "4"}},
		{"!=3.9", []string{"3.10", "3.8"}, []string{"3.9", "3.9.1"}},
		{"~>3.1", []string{"3.1", "3.9.9"}, []string{"3.0", "4.0"}},
		{"~>3.1.2", []string{"3.1.2", "3.1.9"}, []string{"3.1.1", "3.2"}},
		{">= 1.2, < 2", []string{"1.2", "1.9"}, []string{"1.1", "2.0"}},
		{"v20", []string{"20.1.0"}, []string{"21"}},
	} {
		c, err := ParseConstraint(tc.constraint)
		if err != nil {
			t.Fatalf("ParseConstraint(%q): %v", tc.constraint, err)
		}
		for _, v := range tc.yes {
			if !c.Allows(v) {
				t.Errorf("%q does not allow %q, want it to", tc.constraint, v)
			}
		}
		for _, v := range tc.no {
			if c.Allows(v) {
				t.Errorf("%q allows %q, want it not to", tc.constraint, v)
			}
		}
	}
	for _, bad := range []string{">=", "3.x", ">>3", "latest", ">=3,", "3 4"} {
		if _, err := ParseConstraint(bad); err == nil {
			t.Errorf("ParseConstraint(%q) succeeded, want an error", bad)
		}
	}
	if ExtractVersion("Python 3.11.7") != "3.11.7" || ExtractVersion("v20.1.0") != "20.1.0" || ExtractVersion("BusyBox v1.36.1 (Debian)") != "1.36.1" || ExtractVersion("none") != "" || ExtractVersion("sh: 0: Illegal option --") != "" {
		t.Error("ExtractVersion")
	}
}

func TestUnmetListsEveryGap(t *testing.T) {
	req := api.Requirements{Commands: map[string]string{"python3": ">=3.10", "ruby": ">= 3.1", "sh": "*", "jq": ">=1.6", "odd": ">=2"}, Locale: "utf8"}
	env := api.ProbeSandboxResult{Commands: map[string]api.CommandInfo{
		"ruby": {Path: "/usr/bin/ruby", Version: "2.7.8"},
		"sh":   {Path: "/bin/sh"},
		"jq":   {Path: "/usr/bin/jq", Version: "1.7.1"},
		"odd":  {Path: "/usr/bin/odd", VersionLine: "odd: unknown option --version"}, // unreadable: presence only
	}, Locale: "POSIX"}
	got := strings.Join(Unmet(req, env), "; ")
	want := "python3 missing; ruby 2.7.8 does not satisfy >= 3.1; locale is POSIX, want utf8"
	if got != want {
		t.Errorf("Unmet = %q\nwant    %q", got, want)
	}
	for _, tc := range []struct{ want, got, msg string }{
		{"utf8", "C.UTF-8", ""},
		{"UTF-8", "en_US.utf8", ""},
		{"utf8", "", "no locale set (LANG, LC_CTYPE and LC_ALL are empty), want utf8"},
		{"C.UTF-8", "c.utf8", ""},
		{"en_US.UTF-8", "C.UTF-8", "locale is C.UTF-8, want en_US.UTF-8"},
	} {
		got := strings.Join(Unmet(api.Requirements{Locale: tc.want}, api.ProbeSandboxResult{Locale: tc.got}), "; ")
		if got != tc.msg {
			t.Errorf("locale %q in %q: %q, want %q", tc.want, tc.got, got, tc.msg)
		}
	}
	if u := Unmet(api.Requirements{}, api.ProbeSandboxResult{}); len(u) != 0 {
		t.Errorf("no requirements: %v", u)
	}
}
