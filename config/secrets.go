package config

// SecretEnvNames lists the environment variables that hold this configuration's secrets,
// in config order, without duplicates: temporal.api_key_env, llm.api_key_env,
// search.api_key_env, every gateway.tokens[].token_env, and every agents[].mcp[].token_env,
// every agents[].a2a[].token_env,
// agents[].mcp[].oauth.client_secret_env, every agents[].sandbox.egress.inject[].value_env,
// and every approvals.notify[].secret_env and url_env.
// A worker reads them once at start and keeps them out of its environment after that
// (internal/secrets), so a command it runs cannot find them there.
func (c Config) SecretEnvNames() []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	add(c.Temporal.APIKeyEnv)
	add(c.LLM.APIKeyEnv)
	add(c.Search.APIKeyEnv)
	for _, t := range c.Gateway.Tokens {
		add(t.TokenEnv)
	}
	for _, a := range c.Agents {
		if e := a.Sandbox.Egress; e != nil {
			for _, in := range e.Inject {
				add(in.ValueEnv)
			}
		}
		for _, r := range a.A2A {
			add(r.TokenEnv)
		}
		for _, m := range a.MCP {
			add(m.TokenEnv)
			if m.OAuth != nil {
				add(m.OAuth.ClientSecretEnv)
			}
		}
	}
	for _, n := range c.Approvals.Notify {
		add(n.SecretEnv)
		add(n.URLEnv)
	}
	return out
}
