package agents

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

// A2APrefix starts the name of every outbound A2A tool.
const A2APrefix = "a2a_"

// maxA2AName bounds a remote's name: a2a_<name> must stay within the 64 characters model
// APIs allow a tool name.
const maxA2AName = 60

// A2AToolName is the tool that calls the remote A2A agent name: a2a_<name>.
func A2AToolName(name string) string { return A2APrefix + name }

// a2aParameters is the input of every A2A tool.
var a2aParameters = json.RawMessage(`{"type":"object","properties":{` +
	`"message":{"type":"string","description":"the whole request for the remote agent: it sees nothing of this conversation"},` +
	`"context_id":{"type":"string","description":"optional: the context id an earlier answer of this agent named, to continue that conversation"},` +
	`"task_id":{"type":"string","description":"optional: the task id of an earlier answer that asked for input, to answer it"}},` +
	`"required":["message"],"additionalProperties":false}`)

// A2ATool is the tool that calls a remote, described by description (from its card, or
// its declaration). It has capability a2a, so the agent's permissions decide it like any
// other privileged call: the call is an effect outside the workspace.
func A2ATool(remote, description string) Tool {
	return Tool{Name: A2AToolName(remote), Capability: permissions.CapA2A,
		Description: strings.ReplaceAll(describe("a2a"), "{{description}}", description),
		Parameters:  a2aParameters}
}

// A2ARemoteOf returns the remote of spec that tool calls, when tool is one of its A2A
// tools.
func (s Spec) A2ARemoteOf(tool string) (api.A2ARemote, bool) {
	name, ok := strings.CutPrefix(tool, A2APrefix)
	if !ok {
		return api.A2ARemote{}, false
	}
	for _, r := range s.A2A {
		if r.Name == name {
			return r, true
		}
	}
	return api.A2ARemote{}, false
}

// validateA2A checks an agent's a2a: remotes (fields "a2a[i]...").
func validateA2A(remotes []api.A2ARemote, bad func(field, format string, a ...any)) {
	names := map[string]bool{}
	for i, r := range remotes {
		field := fmt.Sprintf("a2a[%d]", i)
		switch {
		case r.Name == "":
			bad(field+".name", "is empty (it names the tool a2a_<name>)")
		case strings.Trim(r.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "":
			bad(field+".name", "%q may hold only letters, digits, - and _ (it names the tool %s%s)", r.Name, A2APrefix, r.Name)
		case len(r.Name) > maxA2AName:
			bad(field+".name", "%q is longer than %d characters", r.Name, maxA2AName)
		case names[r.Name]:
			bad(field+".name", "%q is declared twice", r.Name)
		}
		names[r.Name] = true
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(field+".url", "remote %s: %q is not an http(s) URL (want the agent's base URL; its card is at <url>/.well-known/agent-card.json)", r.Name, r.URL)
		} else if u.User != nil {
			bad(field+".url", "remote %s: do not put credentials in the URL (it is stored in workflow history); name the variable holding the token in token_env", r.Name)
		}
		if r.TokenEnv != "" && !envName.MatchString(r.TokenEnv) {
			bad(field+".token_env", "remote %s: %q is not an environment variable name (the token itself never goes in config)", r.Name, r.TokenEnv)
		}
		if t := time.Duration(r.Timeout); t != 0 && (t < api.MinA2ATimeout || t > api.MaxA2ATimeout) {
			bad(field+".timeout", "remote %s: %s is not between %s and %s", r.Name, t, api.MinA2ATimeout, api.MaxA2ATimeout)
		}
		if len(r.Description) > api.MaxA2ADescription {
			bad(field+".description", "remote %s: %d bytes, over the %d a description may take (it joins every model call)", r.Name, len(r.Description), api.MaxA2ADescription)
		}
	}
}
