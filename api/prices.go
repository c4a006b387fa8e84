package api

// ModelPrice is what one model costs, in USD per million tokens: InputPerMTok for the
// prompt, OutputPerMTok for the completion. It is the value type of the config's
// llm.prices (and llm.endpoints.<name>.prices), decoded by config and priced by the
// model activities, which is why it lives here and not in either.
type ModelPrice struct {
	InputPerMTok  float64 `mapstructure:"input_per_mtok" json:"input_per_mtok" yaml:"input_per_mtok"`
	OutputPerMTok float64 `mapstructure:"output_per_mtok" json:"output_per_mtok" yaml:"output_per_mtok"`
}

// Cost is the price of a call that used prompt and completion tokens, to the nano-dollar
// (RoundCost), so a call's cost reads $0.000506 in its events, not 0.0005059999999999999.
func (p ModelPrice) Cost(prompt, completion int) float64 {
	return RoundCost(float64(prompt)*p.InputPerMTok/1e6 + float64(completion)*p.OutputPerMTok/1e6)
}
