package activities

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// Threads by reference: a model call names its thread by the hash of the newest stored
// segment (api.ThreadRef) and carries only the messages added since; the worker rebuilds
// the conversation from the blob store, calls the model, and stores the new messages with
// the reply as the next segment. Large tool outputs are blobs of their own, referenced
// from the messages with a preview, and put back in full only in the request the model
// receives. So neither history nor the stored thread grows with what the tools read.

// threadCacheEntries and threadCacheMessages bound the rebuilt threads a worker keeps in
// memory (each entry is its own slice, so a long thread costs its length per entry). A
// run's next call continues the head its last call stored, so a hit is the common case; a
// miss (a run that moved to this worker) walks the chain through the store's own cache.
const (
	threadCacheEntries  = 256
	threadCacheMessages = 200_000
)

// threadCache keeps rebuilt threads (messages as stored, previews and references) by
// head. The slices are never appended to in place: a new head gets a copy.
type threadCache struct {
	mu       sync.Mutex
	ll       *list.List
	items    map[string]*list.Element
	messages int // held by all entries
}

type threadEntry struct {
	head string
	msgs []api.ChatMessage
}

func newThreadCache() *threadCache {
	return &threadCache{ll: list.New(), items: map[string]*list.Element{}}
}

func (c *threadCache) get(head string) ([]api.ChatMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[head]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*threadEntry).msgs, true
	}
	return nil, false
}

func (c *threadCache) put(head string, msgs []api.ChatMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[head]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[head] = c.ll.PushFront(&threadEntry{head: head, msgs: msgs})
	c.messages += len(msgs)
	for c.ll.Len() > 1 && (c.ll.Len() > threadCacheEntries || c.messages > threadCacheMessages) {
		last := c.ll.Back()
		c.ll.Remove(last)
		e := last.Value.(*threadEntry)
		delete(c.items, e.head)
		c.messages -= len(e.msgs)
	}
}

// loadThread rebuilds the stored thread named by head (messages as stored: large contents
// are previews with a ContentRef).
func (a *Model) loadThread(ctx context.Context, head string) ([]api.ChatMessage, error) {
	if head == "" {
		return nil, nil
	}
	if msgs, ok := a.threads.get(head); ok {
		return msgs, nil
	}
	// Walk back to the root, or to a head already rebuilt here.
	var chain [][]api.ChatMessage
	var base []api.ChatMessage
	for h := head; h != ""; {
		if msgs, ok := a.threads.get(h); ok {
			base = msgs
			break
		}
		seg, err := a.segment(ctx, h)
		if err != nil {
			return nil, within(fmt.Sprintf("rebuild thread %s", short(head)), err)
		}
		chain = append(chain, seg.Messages)
		h = seg.Parent
	}
	n := len(base)
	for _, c := range chain {
		n += len(c)
	}
	msgs := make([]api.ChatMessage, 0, n)
	msgs = append(msgs, base...)
	for i := len(chain) - 1; i >= 0; i-- {
		msgs = append(msgs, chain[i]...)
	}
	a.threads.put(head, msgs)
	return msgs, nil
}

func (a *Model) segment(ctx context.Context, sum string) (api.ThreadSegment, error) {
	b, err := a.store.GetBlob(ctx, sum)
	if err != nil {
		return api.ThreadSegment{}, blobError("thread segment", sum, err)
	}
	var seg api.ThreadSegment
	if err := json.Unmarshal(b, &seg); err != nil {
		return api.ThreadSegment{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("thread segment %s is not a segment: %v", short(sum), err), api.ErrTypeBadInput, nil)
	}
	return seg, nil
}

// blobError classifies a failed read: a missing or corrupt blob will not appear by
// retrying (the store is shared and written before the reference is handed out), so it
// is non-retryable with a message naming the blob and what to check. Changed bytes are
// their own type (api.ErrTypeStoreCorrupt), the message leading with what a user must
// know: the run cannot go on until the blob is restored.
func blobError(what, sum string, err error) error {
	switch {
	case errors.Is(err, artifacts.ErrChecksum):
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s %s %s do not match their sha256: %v (restore the blob from a backup of the store; `starter store verify` lists every changed blob)",
				api.StoreCorruptLead, what, short(sum), err),
			api.ErrTypeStoreCorrupt, nil)
	case errors.Is(err, artifacts.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s %s: %v (every worker, the starter and the gateway must share one artifacts.url)", what, short(sum), err),
			api.ErrTypeNotFound, nil)
	}
	return fmt.Errorf("%s %s: %w", what, short(sum), err)
}

// within puts op before err's message. An ApplicationError keeps its type and its
// non-retryable flag: the SDK reads them off the error an activity returns as is (a type
// switch, not errors.As), so one wrapped by fmt.Errorf becomes a plain retryable failure,
// which is how a changed thread segment used to retry for hours. A store_corrupt error
// keeps its lead, op going after it.
func within(op string, err error) error {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return fmt.Errorf("%s: %w", op, err)
	}
	msg := op + ": " + app.Message()
	if app.Type() == api.ErrTypeStoreCorrupt {
		msg = app.Message() + " (while " + op + ")"
	}
	if app.NonRetryable() {
		return temporal.NewNonRetryableApplicationError(msg, app.Type(), errors.Unwrap(app))
	}
	return temporal.NewApplicationErrorWithCause(msg, app.Type(), errors.Unwrap(app))
}

// appendThread stores msgs as the segment after base and returns the new reference with
// the whole thread (as stored).
func (a *Model) appendThread(ctx context.Context, base api.ThreadRef, prior, msgs []api.ChatMessage) (api.ThreadRef, []api.ChatMessage, error) {
	if len(msgs) == 0 {
		return base, prior, nil
	}
	body, err := json.Marshal(api.ThreadSegment{Parent: base.Head, Messages: msgs})
	if err != nil {
		return base, nil, fmt.Errorf("encode thread segment: %w", err)
	}
	head, err := a.store.PutBlob(ctx, body)
	if err != nil {
		return base, nil, fmt.Errorf("store thread segment: %w", err)
	}
	all := make([]api.ChatMessage, 0, len(prior)+len(msgs))
	all = append(append(all, prior...), msgs...)
	a.threads.put(head, all)
	return api.ThreadRef{Head: head, Messages: len(all), Tokens: base.Tokens + api.EstimateTokens(msgs)}, all, nil
}

// resolve returns msgs with every referenced content put back in full, for the model.
func (a *Model) resolve(ctx context.Context, msgs []api.ChatMessage) ([]api.ChatMessage, error) {
	out := msgs
	copied := false
	for i, m := range msgs {
		if m.ContentRef == "" {
			continue
		}
		if !copied {
			out = append([]api.ChatMessage(nil), msgs...)
			copied = true
		}
		b, err := a.store.GetBlob(ctx, m.ContentRef)
		if err != nil {
			what := "stored tool output"
			if m.Role == api.RoleAssistant {
				what = "stored reply text"
			}
			return nil, blobError(what, m.ContentRef, err)
		}
		out[i].Content, out[i].ContentRef, out[i].ContentBytes = string(b), "", 0
	}
	return out, nil
}

// chatContext returns the request's constant part, from the store when it is named.
func (a *Model) chatContext(ctx context.Context, req api.CompleteChatRequest) (api.ChatContext, string, error) {
	if req.Context == "" {
		c := api.ChatContext{System: req.System, Skills: req.Skills, Tools: req.Tools}
		if !req.StoreContext {
			return c, "", nil
		}
		body, err := json.Marshal(c)
		if err != nil {
			return c, "", fmt.Errorf("encode chat context: %w", err)
		}
		sum, err := a.store.PutBlob(ctx, body)
		if err != nil {
			return c, "", fmt.Errorf("store chat context: %w", err)
		}
		return c, sum, nil
	}
	b, err := a.store.GetBlob(ctx, req.Context)
	if err != nil {
		return api.ChatContext{}, "", blobError("chat context", req.Context, err)
	}
	var c api.ChatContext
	if err := json.Unmarshal(b, &c); err != nil {
		return api.ChatContext{}, "", temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("chat context %s: %v", short(req.Context), err), api.ErrTypeBadInput, nil)
	}
	return c, req.Context, nil
}

// offload stores a tool result over over bytes as a blob and returns it with a preview in
// its place; the model still gets the whole content (resolve), events and history only
// the preview.
func (a *outputs) offload(ctx context.Context, res api.RunToolResult, over int) (api.RunToolResult, error) {
	if over <= 0 || len(res.Content) <= over {
		return res, nil
	}
	var err error
	res.Content, res.ContentRef, res.ContentBytes, err = a.putPreviewed(ctx, res.Content, "tool output", Preview)
	return res, err
}

// putPreviewed stores text (what it is, for the error) as a content-addressed blob and
// returns the preview that stands in its place, made by preview, the blob's sum and the
// text's size; on failure text comes back as it was.
func (a *outputs) putPreviewed(ctx context.Context, text, what string, preview func(string, int) string) (string, string, int, error) {
	sum, err := a.store.PutBlob(ctx, []byte(text))
	if err != nil {
		return text, "", 0, fmt.Errorf("store %s (%d bytes): %w", what, len(text), err)
	}
	return preview(text, len(text)), sum, len(text), nil
}

// Preview is api.OutputPreview: the start of a stored content with a note of its size.
func Preview(content string, size int) string { return api.OutputPreview(content, size) }

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
