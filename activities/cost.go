package activities

import (
	"github.com/nexo-temporal/nexo/api"
)

// price sets u's cost from the worker's price table (llm.prices): the price of the model
// the call asked for, else of the model the provider says answered (a dated name such as
// gpt-4o-2024-08-06). A model with neither priced keeps no cost and Priced false: its
// cost is unknown, which is not zero. The price table lives on the worker only, and the
// cost travels in the activity's result, so the workflow sums it deterministically.
func (l *LLM) price(asked, answered string, u *api.Usage) {
	if l == nil || len(l.prices) == 0 {
		return
	}
	p, ok := l.prices[asked]
	if !ok && answered != "" {
		p, ok = l.prices[answered]
	}
	if !ok {
		return
	}
	u.Cost, u.Priced = p.Cost(u.PromptTokens, u.CompletionTokens), true
}

// priceAt prices u with the price table of the endpoint the call went to (llm.prices for
// the default endpoint, llm.endpoints.<name>.prices for the others).
func (a *Model) priceAt(endpoint, asked, answered string, u *api.Usage) {
	if l, err := a.llmAt("price", endpoint); err == nil {
		l.price(asked, answered, u)
	}
}

// copyPrices is the LLM's price table, copied so the caller's map cannot change under it.
func copyPrices(in map[string]api.ModelPrice) map[string]api.ModelPrice {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]api.ModelPrice, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
