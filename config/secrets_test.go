package config

import (
	"reflect"
	"testing"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

func TestSecretEnvNames(t *testing.T) {
	var c Config
	c.Temporal.APIKeyEnv = "TEMPORAL_KEY"
	c.LLM.APIKeyEnv = "OPENAI_API_KEY"
	c.Search.APIKeyEnv = "SEARCH_KEY"
	c.Gateway.Tokens = []GatewayToken{{Name: "ci", TokenEnv: "CI_TOKEN"}, {Name: "ops", TokenEnv: "OPS_TOKEN"}}
	c.Agents = []agents.Spec{
		{Name: "a", MCP: []api.MCPServerSpec{{Name: "gh", TokenEnv: "GH_TOKEN"}, {Name: "fs"}}},
		{Name: "b", MCP: []api.MCPServerSpec{{Name: "gh", TokenEnv: "GH_TOKEN"}, {Name: "sso", OAuth: &api.MCPOAuth{ClientID: "c", ClientSecretEnv: "SSO_SECRET"}}}},
		{Name: "c", Sandbox: api.SandboxSpec{Type: api.SandboxBubblewrap, Egress: &api.EgressSpec{Allow: []string{"api.github.com"},
			Inject: []api.EgressInject{{Host: "api.github.com", Header: "Authorization", ValueEnv: "GIT_TOKEN"}}}}},
	}
	c.Approvals.Notify = []api.NotifyTarget{{URL: "http://127.0.0.1:9/a", SecretEnv: "HOOK_SECRET"}, {URL: "http://127.0.0.1:9/b", SecretEnv: "CI_TOKEN"}, {URLEnv: "SLACK_URL", SecretEnv: "HOOK_SECRET"}}
	want := []string{"TEMPORAL_KEY", "OPENAI_API_KEY", "SEARCH_KEY", "CI_TOKEN", "OPS_TOKEN", "GH_TOKEN", "SSO_SECRET", "GIT_TOKEN", "HOOK_SECRET", "SLACK_URL"}
	if got := c.SecretEnvNames(); !reflect.DeepEqual(got, want) {
		t.Errorf("SecretEnvNames() = %v, want %v", got, want)
	}
}
