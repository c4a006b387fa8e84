package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoadA2ARemotes: an agent's a2a: remotes load as written, and their token_env is a
// secret the worker takes out of its environment.
func TestLoadA2ARemotes(t *testing.T) {
	cfg, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\nagents:\n"+
		"  - name: lead\n    permissions: {mode: approve}\n    a2a:\n"+
		"      - {name: weather, url: 'https://weather.example.com/a2a', token_env: WEATHER_A2A_TOKEN, timeout: 2m, description: Forecasts.}\n"+
		"      - {name: echo, url: 'http://127.0.0.1:9100'}\n")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	r := cfg.Agents[0].A2A
	if len(r) != 2 || r[0].Name != "weather" || r[0].URL != "https://weather.example.com/a2a" || r[0].TokenEnv != "WEATHER_A2A_TOKEN" ||
		time.Duration(r[0].Timeout) != 2*time.Minute || r[0].Description != "Forecasts." || r[1].CallTimeout() != 5*time.Minute {
		t.Errorf("a2a = %+v", r)
	}
	if names := cfg.SecretEnvNames(); !slices.Contains(names, "WEATHER_A2A_TOKEN") {
		t.Errorf("SecretEnvNames = %v, want WEATHER_A2A_TOKEN among them", names)
	}
}

// TestA2ARemoteErrors: a remote that is not a URL, a duplicate name, a bad token_env, a
// timeout out of bounds, a name that cannot name a tool, and credentials in the URL are
// refused at load, each naming the agent, the field and the remote.
func TestA2ARemoteErrors(t *testing.T) {
	for _, tc := range []struct {
		name, remotes, want string
	}{
		{"not a url", "{name: w, url: weather.example.com}", `agents[lead].a2a[0].url: remote w: "weather.example.com" is not an http(s) URL`},
		{"no url", "{name: w}", `agents[lead].a2a[0].url: remote w: "" is not an http(s) URL`},
		{"ftp", "{name: w, url: 'ftp://x/'}", `agents[lead].a2a[0].url: remote w: "ftp://x/" is not an http(s) URL`},
		{"duplicate", "{name: w, url: 'http://a'}\n      - {name: w, url: 'http://b'}", `agents[lead].a2a[1].name: "w" is declared twice`},
		{"no name", "{url: 'http://a'}", `agents[lead].a2a[0].name: is empty`},
		{"bad name", "{name: 'w.x', url: 'http://a'}", `agents[lead].a2a[0].name: "w.x" may hold only letters, digits, - and _`},
		{"token env", "{name: w, url: 'http://a', token_env: 'MY-TOKEN'}", `agents[lead].a2a[0].token_env: remote w: "MY-TOKEN" is not an environment variable name`},
		{"timeout", "{name: w, url: 'http://a', timeout: 500ms}", `agents[lead].a2a[0].timeout: remote w: 500ms is not between 1s and 24h0m0s`},
		{"userinfo", "{name: w, url: 'https://ada:secret@a.example.com'}", `agents[lead].a2a[0].url: remote w: do not put credentials in the URL`},
		{"unknown key", "{name: w, url: 'http://a', token: abc}", `token`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\nagents:\n  - name: lead\n    a2a:\n      - "+tc.remotes+"\n")
			if err == nil {
				t.Fatal("Load accepted the config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestReadmeA2ARemotes: the "Remote A2A agents" example of docs/agents.md loads as
// written, and the same with a url that is not one is refused naming the field.
func TestReadmeA2ARemotes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, blk := range strings.Split(string(b), "```yaml\n")[1:] {
		blk, _, _ = strings.Cut(blk, "```")
		if strings.Contains(blk, "name: weather") {
			example = blk
		}
	}
	if example == "" {
		t.Fatal("docs/agents.md has no ```yaml block with name: weather")
	}
	cfg, err := loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\n"+example)
	if err != nil {
		t.Fatalf("Load the example of docs/agents.md: %v", err)
	}
	r := cfg.Agents[0].A2A
	if cfg.Agents[0].Name != "forecaster" || len(r) != 1 || r[0].URL != "https://weather.example.com/a2a" || r[0].TokenEnv != "WEATHER_A2A_TOKEN" || r[0].CallTimeout() != 2*time.Minute {
		t.Errorf("forecaster = %+v", cfg.Agents[0])
	}
	_, err = loadDelegatesYAML(t, "llm: {base_url: http://x:1/v1}\n"+strings.Replace(example, "https://weather.example.com/a2a", "weather.example.com", 1))
	if err == nil || !strings.Contains(err.Error(), `agents[forecaster].a2a[0].url: remote weather: "weather.example.com" is not an http(s) URL`) {
		t.Errorf("a url without a scheme: err = %v, want it named", err)
	}
}
