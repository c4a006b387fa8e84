package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// ErrOutputInvalid is returned (wrapped) when an agent with an output_schema still gave
// a final reply that is not JSON, or does not validate, after its output_retries.
var ErrOutputInvalid = errors.New("final reply does not match output_schema")

// maxReplyEcho bounds how much of an invalid reply the correction message and the
// output_invalid event repeat.
const maxReplyEcho = 2000

// typedOutput checks an agent's final replies against its output_schema. Validity is a
// pure function of the reply and the recorded schema, so the loop decides on it without a
// command; only the wording of a validation error (jsonschema-go reports the first
// problem it meets, walking Go maps) may differ between two runs of the code, so the
// loop records that through a side effect before it sends it anywhere.
type typedOutput struct {
	schema  *jsonschema.Resolved
	text    string // the schema as JSON, for the instructions
	retries int
}

// newTypedOutput compiles spec's output_schema; nil when it has none.
func newTypedOutput(spec agents.Spec) (*typedOutput, error) {
	if spec.OutputSchema == nil {
		return nil, nil
	}
	b, err := json.Marshal(spec.OutputSchema)
	if err != nil {
		return nil, badOutputSchema(spec, err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, badOutputSchema(spec, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, badOutputSchema(spec, err)
	}
	return &typedOutput{schema: rs, text: string(b), retries: spec.OutputRetryCount()}, nil
}

func badOutputSchema(spec agents.Spec, err error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("agent %s: output_schema is not a valid JSON Schema: %v", spec.Name, err), api.ErrTypeBadInput, nil)
}

// instructions is what the system prompt gains: the schema and how to answer.
func (o *typedOutput) instructions() string {
	return "When you give your final answer (a reply without tool calls), reply with a single JSON value " +
		"and nothing else: no prose, no Markdown code fence. It must validate against this JSON Schema:\n" + o.text
}

// parse returns the reply as compact JSON when it validates, or why it does not. A
// reply wrapped in one Markdown code fence (```json ... ```) is read inside the fence,
// as models often add one.
func (o *typedOutput) parse(reply string) (json.RawMessage, string) {
	body := unfence(strings.TrimSpace(reply))
	if body == "" {
		return nil, "the reply is empty, want a JSON value"
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return nil, "the reply is not JSON: " + err.Error()
	}
	if err := o.schema.Validate(v); err != nil {
		return nil, "the reply does not validate against the output schema: " + err.Error()
	}
	var out bytes.Buffer
	if err := json.Compact(&out, []byte(body)); err != nil {
		return nil, "the reply is not JSON: " + err.Error()
	}
	return out.Bytes(), ""
}

func unfence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(s, "```"), "```")
	if nl := strings.IndexByte(inner, '\n'); nl >= 0 && !strings.ContainsAny(inner[:nl], "{[\"") {
		inner = inner[nl+1:] // the fence's language tag ("json")
	}
	return strings.TrimSpace(inner)
}

// correction is the user message that asks for a corrected reply.
func correction(reply, problem string) string {
	return fmt.Sprintf("Your final reply is not valid output: %s.\n\nYour reply was:\n%s\n\n"+
		"Reply again with only the corrected JSON value, valid against the JSON Schema in your instructions.",
		problem, clip(reply, maxReplyEcho))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d more bytes]", len(s)-cut)
}
