package artifacts

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nexo-temporal/nexo/api"
)

// BlobGetter is the part of a blob store that resolving stored texts reads.
type BlobGetter interface {
	GetBlob(ctx context.Context, sum string) ([]byte, error)
}

// TextRefError: the whole text of a reply stored by reference could not be read, so the
// event cannot be shown as the model wrote it. It names the event and the blob.
type TextRefError struct {
	Seq   int64
	Type  string
	Ref   string
	Bytes int
	Err   error
}

func (e *TextRefError) Error() string {
	return fmt.Sprintf("event #%d (%s): read the reply text stored as blob %s (%d bytes): %v (every worker, the starter and the gateway must share one artifacts.url)",
		e.Seq, e.Type, e.Ref, e.Bytes, e.Err)
}

func (e *TextRefError) Unwrap() error { return e.Err }

// ResolveTexts returns events with every reply text stored by reference put back whole:
// an event of a type that carries reply text (api.IsReplyText) whose data names a blob
// ("content_ref", with "bytes" its size and "content" a preview, api.TextInlineMax) gets
// the blob's text as its content, and loses content_ref and bytes, so it reads like a
// reply that was short. Other events, and other content references (tool outputs,
// reasoning: previews by design), pass as they are. events itself is never changed (a
// follower may hold it); it is returned as is when nothing needed resolving.
//
// A blob that cannot be read is a *TextRefError naming the event and the blob, never an
// empty or a preview text passed off as the whole; so is a reference with no store to
// read it (st nil). The events before that one come back with it, resolved.
func ResolveTexts(ctx context.Context, st BlobGetter, events []api.Event) ([]api.Event, error) {
	out, copied := events, false
	for i, ev := range events {
		if !api.IsReplyText(ev.Type) || len(ev.Data) == 0 || ev.Data[0] != '{' {
			continue
		}
		var data map[string]any
		if json.Unmarshal(ev.Data, &data) != nil {
			continue
		}
		ref, _ := data["content_ref"].(string)
		if ref == "" {
			continue
		}
		size, _ := data["bytes"].(float64)
		fail := func(err error) ([]api.Event, error) {
			return out[:i:i], &TextRefError{Seq: ev.Seq, Type: ev.Type, Ref: ref, Bytes: int(size), Err: err}
		}
		if !ValidSum(ref) {
			return fail(fmt.Errorf("not a blob name"))
		}
		if st == nil {
			return fail(fmt.Errorf("no blob store to read it from (set artifacts.url)"))
		}
		body, err := st.GetBlob(ctx, ref)
		if err != nil {
			return fail(err)
		}
		data["content"] = string(body)
		delete(data, "content_ref")
		delete(data, "bytes")
		raw, err := json.Marshal(data)
		if err != nil {
			return fail(fmt.Errorf("encode the resolved event: %w", err))
		}
		if !copied {
			out, copied = append([]api.Event(nil), events...), true
		}
		out[i].Data = raw
	}
	return out, nil
}
