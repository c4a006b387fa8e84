package config

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nexo-temporal/nexo/api"
)

// validatePrices names every bad entry of llm.prices: an empty model name, a negative or
// non-finite price.
func validatePrices(field string, prices map[string]api.ModelPrice, bad func(field string, value any, problem string, args ...any)) {
	names := make([]string, 0, len(prices))
	for m := range prices {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		p := prices[m]
		if strings.TrimSpace(m) == "" {
			bad(field, m, "a price names no model: want {<model>: {input_per_mtok: N, output_per_mtok: N}}")
			continue
		}
		for _, f := range []struct {
			key string
			v   float64
		}{{"input_per_mtok", p.InputPerMTok}, {"output_per_mtok", p.OutputPerMTok}} {
			if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				bad(fmt.Sprintf("%s[%s].%s", field, m, f.key), f.v, "want a price in USD per million tokens, 0 or more")
			}
		}
	}
}

// pricesAsWritten reads llm.prices again from the file itself. Viper splits keys at "."
// and folds them to lower case, which breaks model names such as "gpt-4.1" or
// "Qwen/Qwen2.5-7B-Instruct"; the prices have been decoded (and their unknown keys
// reported) through viper already, so this only restores the names. TOML files keep
// viper's reading, as agents do (agentsAsWritten).
func pricesAsWritten(file string, cfg *Config) error {
	section, err := fileSection(file, "llm", "prices")
	if err != nil {
		return err
	}
	prices, ok := section.(map[string]any)
	if !ok {
		return nil
	}
	// Strictly, entry by entry: a misspelt key ("input_per_mtk") is an error naming the model.
	out := make(map[string]api.ModelPrice, len(prices))
	for model, v := range prices {
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("config file %q: llm.prices[%s]: %w", file, model, err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		var p api.ModelPrice
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("config file %q: llm.prices[%s]: want {input_per_mtok: N, output_per_mtok: N}: %v", file, model, err)
		}
		out[model] = p
	}
	cfg.LLM.Prices = out
	return nil
}

// priceKeysRead drops the llm.prices keys viper could not place (a model name with a dot
// reads as nested keys) when pricesAsWritten reads the prices from the file itself.
func priceKeysRead(file string, unused []string) []string {
	switch strings.ToLower(filepath.Ext(file)) {
	case "", ".yaml", ".yml", ".json":
	default:
		return unused
	}
	kept := unused[:0]
	for _, k := range unused {
		if !strings.HasPrefix(k, "llm.prices") {
			kept = append(kept, k)
		}
	}
	return kept
}

// validateBudgetPrices: an agent whose budget bounds cost needs a price for its model,
// else its calls cost nothing the bound can see and it would never pause.
func validateBudgetPrices(c Config, bad func(field string, value any, problem string, args ...any)) {
	endpoints := c.Endpoints()
	for i, ag := range c.Agents {
		if ag.Budget.MaxCost <= 0 && ag.Budget.SessionMaxCost <= 0 {
			continue
		}
		name := EndpointOf(ag.LLM)
		e := endpoints[name]
		model := ag.Model
		if model == "" {
			model = e.Model
		}
		table := "llm.prices"
		if name != api.DefaultEndpoint {
			table = "llm.endpoints." + name + ".prices"
		}
		if _, ok := e.Prices[model]; !ok {
			bad(fmt.Sprintf("agents[%s].budget", orIndex(ag.Name, i)), nil,
				"max_cost needs a price for model %q in %s (without one its calls have no cost and the bound never applies)", model, table)
		}
	}
}
