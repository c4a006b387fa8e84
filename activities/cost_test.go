package activities

import (
	"math"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// TestPriceCall: a call is priced by the model it asked for, else the model that
// answered; an unpriced model keeps no cost and says so.
func TestPriceCall(t *testing.T) {
	t.Parallel()
	l := NewLLM(LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Prices: map[string]api.ModelPrice{
		"gpt-4o":           {InputPerMTok: 2.5, OutputPerMTok: 10},
		"dated-2024-08-06": {InputPerMTok: 1, OutputPerMTok: 1},
	}})
	for _, tc := range []struct {
		asked, answered string
		cost            float64
		priced          bool
	}{
		{"gpt-4o", "gpt-4o-2024-08-06", 0.0025 + 0.005, true},
		{"dated", "dated-2024-08-06", 0.0015, true},
		{"llama3", "llama3", 0, false},
	} {
		u := api.Usage{PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500}
		l.price(tc.asked, tc.answered, &u)
		if u.Priced != tc.priced || math.Abs(u.Cost-tc.cost) > 1e-12 {
			t.Errorf("%s/%s: cost %v priced %v, want %v %v", tc.asked, tc.answered, u.Cost, u.Priced, tc.cost, tc.priced)
		}
	}
}

// TestPriceAtTheCallsEndpoint: a call is priced by the table of the endpoint it went to,
// not by the default endpoint's (the same model name may cost differently on each).
func TestPriceAtTheCallsEndpoint(t *testing.T) {
	t.Parallel()
	a := New(Deps{
		LLM: NewLLM(LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Prices: map[string]api.ModelPrice{"m": {InputPerMTok: 1, OutputPerMTok: 1}}}),
		Endpoints: map[string]*LLM{"small": NewLLM(LLMConfig{BaseURL: "http://127.0.0.1:2/v1",
			Prices: map[string]api.ModelPrice{"m": {InputPerMTok: 10, OutputPerMTok: 10}}})},
	})
	for endpoint, want := range map[string]float64{"": 0.001, "default": 0.001, "small": 0.01, "gone": 0} {
		u := api.Usage{PromptTokens: 500, CompletionTokens: 500}
		a.Model.priceAt(endpoint, "m", "m", &u)
		if math.Abs(u.Cost-want) > 1e-12 || u.Priced != (want > 0) {
			t.Errorf("endpoint %q: cost %v priced %v, want %v", endpoint, u.Cost, u.Priced, want)
		}
	}
}
