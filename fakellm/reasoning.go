package fakellm

// Reasoning output, as reasoning models behind OpenAI-compatible servers send it: the
// whole text in the reply's message (not streamed) or in delta chunks before the content
// (streamed), under reasoning_content (DeepSeek, older vLLM) or reasoning (Ollama, newer
// vLLM), as the reply's ReasoningField says.

import "strings"

// Reasoning field names a reply may use (Reply.ReasoningField).
const (
	FieldReasoningContent = "reasoning_content"
	FieldReasoning        = "reasoning"
)

func (r Reply) reasoningField() string {
	if r.ReasoningField == FieldReasoning {
		return FieldReasoning
	}
	return FieldReasoningContent
}

// addReasoning puts the reply's reasoning in a non-streamed message.
func addReasoning(msg map[string]any, r Reply) {
	if r.Reasoning != "" {
		msg[r.reasoningField()] = r.Reasoning
	}
}

// streamReasoning sends the reply's reasoning word by word as delta chunks, each after
// pause (the reply's ChunkDelayMS); false when pause says the client left.
func streamReasoning(send func(delta map[string]any), pause func() bool, r Reply) bool {
	for _, word := range strings.SplitAfter(r.Reasoning, " ") {
		if word == "" {
			continue
		}
		if !pause() {
			return false
		}
		send(map[string]any{r.reasoningField(): word})
	}
	return true
}
