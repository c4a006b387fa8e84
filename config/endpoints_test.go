package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const endpointsYAML = `
llm:
  base_url: http://127.0.0.1:11434/v1
  model: big-model
  limits: {requests_per_minute: 120}
  endpoints:
    Small:
      base_url: http://127.0.0.1:8080/v1
      model: small-model
      api_key_env: SMALL_KEY
      prices: {small-model: {input_per_mtok: 0.1, output_per_mtok: 0.4}}
      limits: {requests_per_minute: 60, tokens_per_minute: 40000}
    local:
      base_url: http://127.0.0.1:9090/v1
      timeout: 30s
agents:
  - name: worker
  - name: summariser
    llm: small
`

func TestLoadEndpoints(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load(LoadOptions{File: writeFile(t, dir, "nexo.yaml", endpointsYAML), Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	eps := cfg.Endpoints()
	if got, want := cfg.EndpointNames(), []string{"default", "local", "small"}; !slices.Equal(got, want) {
		t.Errorf("EndpointNames = %v, want %v", got, want)
	}
	small := eps["small"]
	if small.BaseURL != "http://127.0.0.1:8080/v1" || small.Model != "small-model" || small.Limits.RequestsPerMinute != 60 ||
		small.Limits.TokensPerMinute != 40000 || small.Prices["small-model"].OutputPerMTok != 0.4 || small.Timeout != 5*time.Minute {
		t.Errorf("small = %+v, want the file's keys and llm.timeout", small)
	}
	if got := small.APIKey(func(k string) string { return map[string]string{"SMALL_KEY": "sk-small"}[k] }); got != "sk-small" {
		t.Errorf("small key = %q", got)
	}
	if eps["local"].Timeout != 30*time.Second || eps["local"].DispatchRate() != 0 || eps["local"].APIKey(nil) != "" {
		t.Errorf("local = %+v, want its own timeout, no limit, no key", eps["local"])
	}
	def := eps["default"]
	if def.Model != "big-model" || def.Limits.RequestsPerMinute != 120 || def.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("default = %+v, want llm: itself", def)
	}
	// 60 requests a minute with the margin: 0.9 a second, 54 in any minute.
	if got := small.DispatchRate(); got < 0.8999 || got > 0.9001 {
		t.Errorf("small rate = %v/s, want 0.9", got)
	}
}

func TestLoadEndpointsFromEnvironment(t *testing.T) {
	cfg, err := Load(LoadOptions{Env: []string{"NEXO_LLM_LIMITS_REQUESTS_PER_MINUTE=600", "NEXO_LLM_LIMITS_TOKENS_PER_MINUTE=90000"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.LLM.Limits.RequestsPerMinute != 600 || cfg.LLM.Limits.TokensPerMinute != 90000 {
		t.Errorf("llm.limits = %+v, want 600 requests and 90000 tokens a minute from the environment", cfg.LLM.Limits)
	}
}

func TestEndpointErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"agent names an unknown endpoint", `
llm: {base_url: http://127.0.0.1:1/v1, endpoints: {small: {base_url: http://127.0.0.1:2/v1}}}
agents: [{name: writer, llm: large}]
`, []string{`agents[writer].llm "large": no such endpoint; known endpoints: default, small (add it under llm.endpoints)`}},
		{"endpoint without a URL", `
llm: {endpoints: {small: {model: m}}}
`, []string{`llm.endpoints.small.base_url "": want an http(s) URL`}},
		{"negative token limit", `
llm: {base_url: http://127.0.0.1:1/v1, limits: {tokens_per_minute: -1000}, endpoints: {small: {base_url: http://127.0.0.1:2/v1, limits: {tokens_per_minute: -5}}}}
`, []string{`llm.limits.tokens_per_minute -1000: must not be negative`, `llm.endpoints.small.limits.tokens_per_minute -5: must not be negative`}},
		{"token limit not a number", `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1, limits: {tokens_per_minute: lots}}}}
`, []string{`tokens_per_minute`}},
		{"negative request limit", `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1, limits: {requests_per_minute: -1}}}}
`, []string{`llm.endpoints.small.limits.requests_per_minute -1: must not be negative`}},
		{"default redefined", `
llm: {endpoints: {default: {base_url: http://127.0.0.1:2/v1}}}
`, []string{`llm.endpoints.default: "default" is the endpoint under llm: itself`}},
		{"bad name", `
llm: {endpoints: {"a+b": {base_url: http://127.0.0.1:2/v1}}}
`, []string{`llm.endpoints.a+b: want a name of lower-case letters, digits, '-' and '_'`}},
		{"key pasted for its variable", `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1, api_key_env: "sk-123"}}}
`, []string{`llm.endpoints.small.api_key_env "sk-123": want the name of an environment variable`}},
		{"negative price", `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1, prices: {m: {input_per_mtok: -1}}}}}
`, []string{`llm.endpoints.small.prices.m "-1/0": prices must not be negative`}},
		{"typo inside an endpoint", `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1, limts: {requests_per_minute: 5}}}}
`, []string{`limts`}},
		{"an agent on the default endpoint needs llm.base_url", `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1}}}
agents: [{name: writer, llm: small}, {name: other}]
`, []string{`llm.base_url "": required when agents are configured`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(LoadOptions{File: writeFile(t, t.TempDir(), "nexo.yaml", tt.yaml), Env: []string{}})
			if err == nil {
				t.Fatalf("Load succeeded, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestAgentsOnNamedEndpointsOnly(t *testing.T) {
	yaml := `
llm: {endpoints: {small: {base_url: http://127.0.0.1:2/v1, model: m}}}
agents: [{name: writer, llm: small}]
`
	if _, err := Load(LoadOptions{File: writeFile(t, t.TempDir(), "nexo.yaml", yaml), Env: []string{}}); err != nil {
		t.Fatalf("Load: %v (an agent on a named endpoint needs no llm.base_url)", err)
	}
}

// The example of endpoints in docs/agents.md loads as written, and its agents land where it says.
func TestReadmeEndpointsExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(b), "```yaml\n")[1:] {
		if body, _, _ := strings.Cut(part, "```"); strings.Contains(body, "llm: small") && strings.Contains(body, "requests_per_minute: 60") {
			block = body
			break
		}
	}
	if block == "" {
		t.Fatal("docs/agents.md has no ```yaml block of endpoints (with llm: small and requests_per_minute: 60)")
	}
	cfg, err := Load(LoadOptions{File: writeFile(t, t.TempDir(), "nexo.yaml", block), Env: []string{}})
	if err != nil {
		t.Fatalf("Load the example of docs/agents.md: %v", err)
	}
	eps := cfg.Endpoints()
	if eps["small"].Limits.RequestsPerMinute != 60 || eps["default"].Limits.RequestsPerMinute != 500 || eps["small"].Timeout != 2*time.Minute {
		t.Errorf("endpoints = %+v", eps)
	}
	if _, ok := eps["small"].Prices["qwen3:8b"]; !ok {
		t.Errorf("small prices = %+v, want qwen3:8b", eps["small"].Prices)
	}
	if cfg.Agents[1].LLM != "small" || EndpointOf(cfg.Agents[0].LLM) != "default" {
		t.Errorf("agents = %+v", cfg.Agents)
	}
}

// Model names with dots (gpt-4.1) are price keys as written, not nested keys.
func TestEndpointPricesWithDottedModels(t *testing.T) {
	yaml := `
llm:
  base_url: http://127.0.0.1:1/v1
  endpoints:
    Small:
      base_url: http://127.0.0.1:2/v1
      prices: {"gpt-4.1": {input_per_mtok: 2, output_per_mtok: 8}}
`
	cfg, err := Load(LoadOptions{File: writeFile(t, t.TempDir(), "nexo.yaml", yaml), Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if p := cfg.Endpoints()["small"].Prices["gpt-4.1"]; p.InputPerMTok != 2 || p.OutputPerMTok != 8 {
		t.Errorf("small prices = %+v, want gpt-4.1 at 2/8", cfg.Endpoints()["small"].Prices)
	}
	typo := strings.Replace(yaml, "prices:", "limts: {requests_per_minute: 5}\n      prices:", 1)
	if _, err := Load(LoadOptions{File: writeFile(t, t.TempDir(), "nexo.yaml", typo), Env: []string{}}); err == nil ||
		!strings.Contains(err.Error(), `unknown config key "llm.endpoints[small].limts"`) {
		t.Errorf("typo: err = %v, want the unknown key named", err)
	}
}
