package config

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/nexo-temporal/nexo/api"
)

// Endpoint is one named model endpoint under llm.endpoints: any OpenAI-compatible chat
// completions API, with its own model, key, prices and rate limits. Teams mix providers (a
// large model for the work, a small local one for summaries); an agent picks one with
// `llm: <name>`, for its turns and its context summaries alike. The keys under llm:
// itself are the endpoint called "default".
type Endpoint struct {
	// BaseURL of the API (required), e.g. http://127.0.0.1:11434/v1.
	BaseURL string `mapstructure:"base_url"`
	// Model used by the agents on this endpoint that name none of their own.
	Model string `mapstructure:"model"`
	// APIKeyEnv names the environment variable holding this endpoint's API key; empty
	// sends no key (a local server). The key itself is never a config value.
	APIKeyEnv string `mapstructure:"api_key_env"`
	// Timeout bounds one request; 0 takes llm.timeout.
	Timeout time.Duration `mapstructure:"timeout"`
	// Prices per model served here, in dollars per million tokens, as llm.prices.
	Prices map[string]api.ModelPrice `mapstructure:"prices"`
	// Limits are the provider's rate limits, shared by every run on every worker.
	Limits Limits `mapstructure:"limits"`
}

// Limits are a provider's rate limits. Model calls to an endpoint with a request limit
// wait, queued in Temporal, until the fleet has capacity, and with a token limit until
// the endpoint's limiter has room for their tokens, instead of burning retries on 429s.
type Limits struct {
	// RequestsPerMinute is the provider's request limit; 0 means none. The worker
	// dispatches at RateMargin of it, spread evenly (see Endpoint.DispatchRate).
	RequestsPerMinute int `mapstructure:"requests_per_minute"`
	// TokensPerMinute is the provider's token limit (prompt + completion); 0 means
	// none. A call's size is known only when it is sent, so this is not a task queue
	// rate: each model call books its estimated tokens with the endpoint's limiter
	// workflow (api.WorkflowTokenLimiter), which keeps every sliding minute within
	// RateMargin of it, and waits for its booking.
	TokensPerMinute int `mapstructure:"tokens_per_minute"`
}

// RateMargin is the share of limits.requests_per_minute the fleet dispatches. The
// Temporal server paces a task queue as a token bucket holding one second's worth of
// calls, so over a provider's sliding minute it may let through a second more than the
// rate; the margin keeps that, and a retried call, under the provider's limit.
// The token limiters (workflows) book at the same share of limits.tokens_per_minute.
const RateMargin = api.RateMargin

// endpointName is what an endpoint's name may be: it becomes part of a task queue name.
// Config files fold keys to lower case, so names are lower case.
var endpointName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// DispatchRate is the task queue dispatch rate, in calls per second, that keeps the
// endpoint's model calls under limits.requests_per_minute; 0 when it has no limit.
func (e Endpoint) DispatchRate() float64 {
	if e.Limits.RequestsPerMinute <= 0 {
		return 0
	}
	return float64(e.Limits.RequestsPerMinute) * RateMargin / 60
}

// APIKey reads the endpoint's API key from the environment variable APIKeyEnv names; ""
// without one. getenv nil means os.Getenv.
func (e Endpoint) APIKey(getenv func(string) string) string {
	if e.APIKeyEnv == "" {
		return ""
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv(e.APIKeyEnv)
}

// Endpoints returns every configured model endpoint by name: "default" (llm: itself,
// when llm.base_url is set) and each of llm.endpoints, whose timeout defaults to
// llm.timeout.
func (c Config) Endpoints() map[string]Endpoint {
	out := make(map[string]Endpoint, len(c.LLM.Endpoints)+1)
	if c.LLM.BaseURL != "" {
		out[api.DefaultEndpoint] = Endpoint{BaseURL: c.LLM.BaseURL, Model: c.LLM.Model, APIKeyEnv: c.LLM.APIKeyEnv,
			Timeout: c.LLM.Timeout, Limits: c.LLM.Limits, Prices: c.LLM.Prices}
	}
	for name, e := range c.LLM.Endpoints {
		if e.Timeout == 0 {
			e.Timeout = c.LLM.Timeout
		}
		out[strings.ToLower(name)] = e
	}
	return out
}

// EndpointNames lists the endpoints an agent can name: "default" first, then llm.endpoints
// in sorted order.
func (c Config) EndpointNames() []string {
	names := []string{api.DefaultEndpoint}
	for _, n := range slices.Sorted(maps.Keys(c.LLM.Endpoints)) {
		names = append(names, strings.ToLower(n))
	}
	return names
}

// EndpointOf is the canonical name of the endpoint an agent's `llm:` names: "default" for
// none, the lower-case name otherwise (config files fold endpoint names to lower case).
func EndpointOf(agentLLM string) string {
	if agentLLM == "" {
		return api.DefaultEndpoint
	}
	return strings.ToLower(agentLLM)
}

// validateEndpoints checks llm.limits, llm.endpoints and the agents' llm: names.
func (c Config) validateEndpoints() []error {
	var errs []error
	bad := func(field string, value any, problem string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: value, Problem: fmt.Sprintf(problem, args...)})
	}
	checkLimits := func(field string, l Limits) {
		if l.RequestsPerMinute < 0 {
			bad(field+".requests_per_minute", l.RequestsPerMinute, "must not be negative (0: no limit)")
		}
		if l.TokensPerMinute < 0 {
			bad(field+".tokens_per_minute", l.TokensPerMinute, "must not be negative (0: no limit)")
		}
	}
	checkLimits("llm.limits", c.LLM.Limits)
	for _, name := range slices.Sorted(maps.Keys(c.LLM.Endpoints)) {
		e := c.LLM.Endpoints[name]
		field := "llm.endpoints." + name
		switch {
		case strings.ToLower(name) == api.DefaultEndpoint:
			bad(field, nil, "%q is the endpoint under llm: itself; set its keys there (llm.base_url, llm.model, llm.limits)", api.DefaultEndpoint)
			continue
		case !endpointName.MatchString(strings.ToLower(name)):
			bad(field, nil, "want a name of lower-case letters, digits, '-' and '_' (it becomes part of a task queue name)")
		}
		if u, err := url.Parse(e.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(field+".base_url", e.BaseURL, "want an http(s) URL such as http://127.0.0.1:11434/v1 (required)")
		}
		if e.APIKeyEnv != "" && !envVarName.MatchString(e.APIKeyEnv) {
			bad(field+".api_key_env", e.APIKeyEnv,
				"want the name of an environment variable, such as OPENAI_API_KEY (the key itself never goes in config)")
		}
		if e.Timeout != 0 && e.Timeout < time.Second {
			bad(field+".timeout", e.Timeout, "want at least 1s (or leave it out for llm.timeout)")
		}
		for _, model := range slices.Sorted(maps.Keys(e.Prices)) {
			p := e.Prices[model]
			if strings.TrimSpace(model) == "" {
				bad(field+".prices", model, "want a model name as the key")
			}
			if p.InputPerMTok < 0 || p.OutputPerMTok < 0 {
				bad(field+".prices."+model, fmt.Sprintf("%v/%v", p.InputPerMTok, p.OutputPerMTok),
					"prices must not be negative (dollars per million tokens)")
			}
		}
		checkLimits(field+".limits", e.Limits)
	}
	known := c.EndpointNames()
	for i, ag := range c.Agents {
		if ag.LLM == "" {
			continue
		}
		if !slices.Contains(known, EndpointOf(ag.LLM)) {
			bad(fmt.Sprintf("agents[%s].llm", orIndex(ag.Name, i)), ag.LLM,
				"no such endpoint; known endpoints: %s (add it under llm.endpoints)", strings.Join(known, ", "))
		}
	}
	return errs
}

// usesDefaultEndpoint reports whether an agent calls the endpoint under llm: (names no
// other), which then needs llm.base_url.
func (c Config) usesDefaultEndpoint() bool {
	for _, ag := range c.Agents {
		if ag.Loop != nil && ag.Context.MaxTokens == 0 {
			continue // a pluggable loop calls no model (but a summary of its thread would)
		}
		if EndpointOf(ag.LLM) == api.DefaultEndpoint {
			return true
		}
	}
	return false
}

// endpointsAsWritten decodes llm.endpoints again from the file itself. Viper splits keys at
// dots, so a model name with one in prices ("gpt-4.1") would read as nested keys
// ("prices[gpt-4].1", an unknown key). The file's own reading replaces viper's, and the
// keys viper could not place under llm.endpoints are dropped from unused; a key the
// file's reading does not know is reported by its own name. TOML files, and an
// llm.endpoints from the environment, keep viper's reading.
func endpointsAsWritten(file string, env map[string]string, cfg *Config, unused *[]string) error {
	if env[envName("llm.endpoints")] != "" {
		return nil
	}
	list, err := fileSection(file, "llm", "endpoints")
	if list == nil || err != nil {
		return err
	}
	var eps map[string]Endpoint
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result: &eps, WeaklyTypedInput: true, DecodeHook: decodeHook(), Metadata: &md,
	})
	if err != nil {
		return fmt.Errorf("decode llm.endpoints of %q: %w", file, err)
	}
	if err := dec.Decode(list); err != nil {
		return nil // keep viper's reading and its errors
	}
	kept := (*unused)[:0]
	for _, k := range *unused {
		if !strings.HasPrefix(k, "llm.endpoints[") {
			kept = append(kept, k)
		}
	}
	for _, k := range md.Unused {
		kept = append(kept, "llm.endpoints"+strings.ToLower(k))
	}
	*unused = kept
	cfg.LLM.Endpoints = make(map[string]Endpoint, len(eps))
	for name, e := range eps {
		cfg.LLM.Endpoints[strings.ToLower(name)] = e
	}
	return nil
}
