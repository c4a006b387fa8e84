package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode"
)

// Warnings are what Load noticed that does not stop a process from starting but is
// probably not what the user meant (a config that sets nothing, a secret's variable that
// is unset). The worker prints each at start.
func (c Config) Warnings() []string { return slices.Clone(c.notes) }

// dataMaps are the config keys whose values are maps of the user's own names (variables,
// headers, commands, models, endpoints, labels; an output schema, whose property names
// are the user's), where any case is right.
var dataMaps = []string{"env", "headers", "commands", "prices", "endpoints", "labels", "budget_prices", "args", "output_schema"}

// checkAsWritten refuses what viper would quietly accept from the file itself: agents:
// written as a map (decoded as if it were a one-element list), and keys in upper case
// (viper folds them, so `LLM:` was read as `llm:` while the docs and every error name the
// lower-case key). It notes a file that sets nothing.
func checkAsWritten(file string, cfg *Config) error {
	doc, err := fileSection(file)
	if err != nil {
		return err
	}
	if doc == nil {
		if data, err := os.ReadFile(file); err == nil && strings.TrimSpace(stripComments(string(data))) == "" {
			cfg.notes = append(cfg.notes, fmt.Sprintf("config file %s sets nothing (no llm, no agents): the worker runs the shipped workflows only, and agents are refused", file))
		}
		return nil
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("invalid config%s: want a mapping of sections (llm:, agents:, ...) at the top", inFile(file))
	}
	var problems []string
	for k, v := range top {
		if strings.EqualFold(k, "agents") {
			if _, isMap := v.(map[string]any); isMap {
				problems = append(problems, "agents: is a map; want a list, one `- name: …` entry per agent")
			}
		}
	}
	upperKeys("", doc, &problems)
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return fmt.Errorf("invalid config%s: %s", inFile(file), strings.Join(problems, "; "))
}

// upperKeys records every config key under prefix that has an upper-case letter, leaving
// the insides of dataMaps alone.
func upperKeys(prefix string, v any, problems *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if strings.IndexFunc(k, unicode.IsUpper) >= 0 {
				*problems = append(*problems, fmt.Sprintf("%s: config keys are lower case (want %s)", key, strings.ToLower(k)))
				continue
			}
			if slices.Contains(dataMaps, k) {
				continue
			}
			upperKeys(key, val, problems)
		}
	case []any:
		for i, e := range v {
			upperKeys(fmt.Sprintf("%s[%d]", prefix, i), e, problems)
		}
	}
}

// stripComments drops YAML comment lines.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// checkPaths refuses paths that name the wrong kind of thing, which Validate (no file
// system) cannot see: an agent's sandbox.dir that is a file, an mcp.credentials_file that
// is a directory. A path that does not exist yet is made when it is needed.
func checkPaths(c Config) error {
	var errs []string
	for i, a := range c.Agents {
		if d := a.Sandbox.Dir; d != "" {
			if st, err := os.Stat(d); err == nil && !st.IsDir() {
				errs = append(errs, fmt.Sprintf("agents[%s].sandbox.dir %q: is a file, want a directory (the agent's workspace)", orIndex(a.Name, i), d))
			}
		}
	}
	if f := c.MCP.CredentialsFile; f != "" {
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			errs = append(errs, fmt.Sprintf("mcp.credentials_file %q: is a directory, want the credential file's path (such as .nexo/mcp-credentials.json)", f))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// loopbackHost: host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// noteUnsetSecrets warns of each secret's variable the config names that env does not
// set: the model endpoints' keys (not for a loopback endpoint, which usually needs none),
// MCP servers' tokens, notification receivers' secrets and URLs. Each still starts:
// a key may be set on the worker only, not where the starter reads the config.
func noteUnsetSecrets(c *Config, env map[string]string) {
	unset := func(name string) bool { _, ok := env[name]; return name != "" && !ok }
	loopback := func(raw string) bool {
		u, err := url.Parse(raw)
		return err == nil && loopbackHost(u.Hostname())
	}
	if c.LLM.BaseURL != "" && unset(c.LLM.APIKeyEnv) && !loopback(c.LLM.BaseURL) {
		c.notes = append(c.notes, fmt.Sprintf("llm.api_key_env names %s, which is not set: calls to %s go without a key and will likely be refused", c.LLM.APIKeyEnv, c.LLM.BaseURL))
	}
	for name, e := range c.LLM.Endpoints {
		if e.BaseURL != "" && unset(e.APIKeyEnv) && !loopback(e.BaseURL) {
			c.notes = append(c.notes, fmt.Sprintf("llm.endpoints.%s.api_key_env names %s, which is not set: calls to %s go without a key", name, e.APIKeyEnv, e.BaseURL))
		}
	}
	for i, a := range c.Agents {
		for j, m := range a.MCP {
			if unset(m.TokenEnv) {
				c.notes = append(c.notes, fmt.Sprintf("agents[%s].mcp[%d].token_env names %s, which is not set: the server %s is called without a token", orIndex(a.Name, i), j, m.TokenEnv, m.Name))
			}
		}
	}
	for i, n := range c.Approvals.Notify {
		if unset(n.SecretEnv) {
			c.notes = append(c.notes, fmt.Sprintf("approvals.notify[%d].secret_env names %s, which is not set: every notification to it fails unsigned", i, n.SecretEnv))
		}
		if unset(n.URLEnv) {
			c.notes = append(c.notes, fmt.Sprintf("approvals.notify[%d].url_env names %s, which is not set: notifications to it have nowhere to go", i, n.URLEnv))
		}
	}
	slices.Sort(c.notes)
}
