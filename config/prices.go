package config

// ModelPrice is what a model costs, in dollars per million tokens.
//
// The "budget" branch defines the same type (with llm.prices and its validation); this
// minimal copy lets llm.endpoints carry prices of their own. Keep the two identical.
type ModelPrice struct {
	// InputPerMTok is the price of a million prompt tokens.
	InputPerMTok float64 `json:"input_per_mtok" mapstructure:"input_per_mtok"`
	// OutputPerMTok is the price of a million completion tokens.
	OutputPerMTok float64 `json:"output_per_mtok" mapstructure:"output_per_mtok"`
}
