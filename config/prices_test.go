package config

import (
	"math"
	"strings"
	"testing"
)

// TestLoadPrices: llm.prices keeps model names as written (dots, slashes, capitals),
// prices a call, and refuses a bad price or a misspelt key naming the model.
func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, DefaultFile, `
llm:
  base_url: http://127.0.0.1:1/v1
  model: gpt-4.1
  prices:
    gpt-4.1: {input_per_mtok: 2, output_per_mtok: 8}
    Qwen/Qwen2.5-7B-Instruct: {input_per_mtok: 0.1, output_per_mtok: 0.2}
agents:
  - name: scribe
    budget: {max_tokens: 50000, max_cost: 0.5, session_max_tokens: 200000}
`)
	c, err := Load(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p, ok := c.LLM.Prices["gpt-4.1"]
	if !ok || p.InputPerMTok != 2 || p.OutputPerMTok != 8 || len(c.LLM.Prices) != 2 {
		t.Fatalf("prices = %+v", c.LLM.Prices)
	}
	if _, ok := c.LLM.Prices["Qwen/Qwen2.5-7B-Instruct"]; !ok {
		t.Errorf("prices = %+v, want the name as written", c.LLM.Prices)
	}
	if got := p.Cost(1_000_000, 500_000); math.Abs(got-6) > 1e-9 {
		t.Errorf("cost of 1M in and 0.5M out = %v, want 6", got)
	}
	if b := c.Agents[0].Budget; b.MaxTokens != 50000 || b.MaxCost != 0.5 || b.SessionMaxTokens != 200000 {
		t.Errorf("budget = %+v", b)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"  prices:\n    gpt-4.1: {input_per_mtok: -1, output_per_mtok: 8}\n", `llm.prices[gpt-4.1].input_per_mtok -1: want a price in USD per million tokens`},
		{"  prices:\n    gpt-4.1: {input_per_mtk: 1}\n", `llm.prices[gpt-4.1]: want {input_per_mtok: N, output_per_mtok: N}`},
		{"  prices:\n    other: {input_per_mtok: 1}\nagents:\n  - {name: scribe, budget: {max_cost: 1}}\n", `agents[scribe].budget: max_cost needs a price for model "gpt-4.1" in llm.prices`},
		{"agents:\n  - {name: scribe, budget: {max_tokens: -5}}\n", `agents[scribe].budget.max_tokens: -5 is not a bound`},
	} {
		writeFile(t, dir, DefaultFile, "llm:\n  base_url: http://127.0.0.1:1/v1\n  model: gpt-4.1\n"+tc.yaml)
		if _, err := Load(LoadOptions{Env: []string{}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
