package agents

import (
	"strings"
	"testing"

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
		{"no name", Spec{}, "name: is empty"},
		{"bad name", Spec{Name: "a b"}, "name:"},
		{"bad mode", Spec{Name: "a", Permissions: permissions.Policy{Mode: "yolo"}}, "permissions.mode"},
		{"bad sandbox", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: "vm"}}, "sandbox.type"},
		{"image on local", Spec{Name: "a", Sandbox: api.SandboxSpec{Image: "x"}}, "docker sandboxes only"},
		{"dir on docker", Spec{Name: "a", Sandbox: api.SandboxSpec{Type: api.SandboxDocker, Dir: "/x"}}, "sandbox.dir"},
		{"fetch url", Spec{Name: "a", FetchAllow: []string{"https://x.com"}}, "fetch_allow[0]"},
		{"produces escape", Spec{Name: "a", Produces: []string{"../x"}}, "produces[0]"},
		{"negative turns", Spec{Name: "a", MaxTurns: -1}, "max_turns"},
		{"mcp no command", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPStdio}}}, "mcp[0].command"},
		{"mcp bad name", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "a_b", Transport: api.MCPStdio, Command: "x"}}}, "mcp[0].name"},
		{"mcp auth header", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: api.MCPHTTP, URL: "http://h/mcp", Headers: map[string]string{"authorization": "Bearer x"}}}}, "token_env"},
		{"mcp transport", Spec{Name: "a", MCP: []api.MCPServerSpec{{Name: "s", Transport: "ws"}}}, "mcp[0].transport"},
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
