package workflows

import (
	"encoding/json"
	"fmt"
	"regexp"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// Emit appends an event to the run's ordered event log. data is any JSON-encodable value;
// structured data is sanitised first (see Sanitize). The event's seq is one more than the
// previous event's, and its time is the workflow's deterministic clock.
func Emit(ctx workflow.Context, eventType string, data any) error {
	if eventType == "" {
		return fmt.Errorf("emit: event type is empty")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("emit %s: data is not JSON: %w", eventType, err)
	}
	rt, err := runtimeOf(ctx, "emit "+eventType)
	if err != nil {
		return err
	}
	rt.appendEvent(ctx, eventType, raw)
	return nil
}

func (rt *runtime) emit(ctx workflow.Context, eventType string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	rt.appendEvent(ctx, eventType, raw)
}

// appendEvent appends an event with raw (sanitised) as its data and returns it.
func (rt *runtime) appendEvent(ctx workflow.Context, eventType string, raw json.RawMessage) api.Event {
	ev := api.Event{
		Seq:  rt.seqBase + int64(len(rt.rec.Events)) + 1,
		Type: eventType,
		Data: SanitizeJSON(raw),
		At:   workflow.Now(ctx).UTC(),
	}
	rt.rec.Events = append(rt.rec.Events, ev)
	rt.touch(ctx)
	return ev
}

// Omitted replaces a sanitised value.
const Omitted = "[omitted]"

// MaxEventString is the longest string kept in structured event data (8 KB).
const MaxEventString = 8 * 1024

var dataURI = regexp.MustCompile(`^data:[^;,]+;base64,`)

// Sanitize walks structured data (maps and slices as decoded from JSON) and replaces every
// string over MaxEventString bytes and every inline data:<mime>;base64,... blob with
// Omitted, so multi-megabyte tool output and embedded images never reach the record. A
// plain top-level string passes as is: it is text, not a payload.
func Sanitize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = sanitizeValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = sanitizeValue(e)
		}
		return out
	default:
		return v
	}
}

func sanitizeValue(v any) any {
	if s, ok := v.(string); ok {
		if len(s) > MaxEventString || dataURI.MatchString(s) {
			return Omitted
		}
		return s
	}
	return Sanitize(v)
}

// SanitizeJSON applies Sanitize to encoded JSON. Raw bytes that do not decode pass as is.
func SanitizeJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(Sanitize(v))
	if err != nil {
		return raw
	}
	return out
}
