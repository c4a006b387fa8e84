package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// A reply over api.TextInlineMax is stored once: the result (history) and the stored
// thread carry a preview and the reference, and the next model call gets the whole reply
// back, as the model wrote it.
func TestCompleteChatLongReplyByReference(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("fifty kilobytes of reply, ", 2000) // 52,000 bytes
	e, model := newModelEnv(t, activities.LLMConfig{}, fakellm.Reply{Content: long}, fakellm.Reply{Content: "short"})
	ctx := context.Background()
	first, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: &api.ThreadRef{}, Messages: userAsks("Write a lot"), CallID: "1"})
	if err != nil {
		t.Fatalf("CompleteChat: %v", err)
	}
	m := first.Message
	if m.ContentRef == "" || m.ContentBytes != len(long) || len(m.Content) > api.PreviewBytes+100 ||
		!strings.HasPrefix(m.Content, long[:100]) || !strings.HasSuffix(m.Content, "[… 52000 bytes of text in all]") {
		t.Fatalf("ref %q, bytes %d, preview %d bytes ending %q", m.ContentRef, m.ContentBytes, len(m.Content), m.Content[max(0, len(m.Content)-60):])
	}
	if b, _ := json.Marshal(first); len(b) > 8<<10 {
		t.Errorf("the result (recorded in history) is %d bytes, want the reference, not the text", len(b))
	}
	b, err := e.store.GetBlob(ctx, m.ContentRef)
	if err != nil || string(b) != long {
		t.Errorf("stored reply: %d bytes, %v; want the whole text", len(b), err)
	}
	second, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: first.Thread, Messages: userAsks("Shorter"), CallID: "2"})
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if second.Message.ContentRef != "" || second.Message.Content != "short" {
		t.Errorf("short reply = %+v, want it inline", second.Message)
	}
	got := model.Requests()[1].Messages
	if len(got) != 3 || got[1]["role"] != api.RoleAssistant || got[1]["content"] != long {
		t.Errorf("the model got %d messages, the reply of %d bytes; want the whole earlier reply back", len(got), len(got[1]["content"].(string)))
	}

	// A stored reply that is gone fails the next call with an error naming it.
	gone, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Messages: []api.ChatMessage{
		{Role: api.RoleUser, Content: "hi"},
		{Role: api.RoleAssistant, Content: "preview", ContentRef: strings.Repeat("ab", 32), ContentBytes: 9000},
		{Role: api.RoleUser, Content: "again"}}})
	if err == nil || !strings.Contains(err.Error(), "stored reply text abababababab") {
		t.Errorf("call over a missing reply = %+v, %v; want an error naming the stored reply text", gone, err)
	}
}

// An agent's long answer, stored by reference, becomes an artifact by its blob: the
// artifact holds the whole text; a blob the store lacks is a non-retryable error naming it.
func TestWriteArtifactFromBlob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	ctx := context.Background()
	long := strings.Repeat("a long drafted reply ", 1000)
	ref, err := e.store.PutBlob(ctx, []byte(long))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := e.a.Host.WriteArtifact(ctx, api.WriteArtifactRequest{RunID: testRun, Name: "reply.md", Blob: ref})
	if err != nil || meta.Size != int64(len(long)) || meta.SHA256 != ref {
		t.Fatalf("WriteArtifact(blob) = %+v, %v; want the whole %d bytes", meta, err, len(long))
	}
	if b, err := e.store.Get(ctx, testRun, "reply.md"); err != nil || string(b) != long {
		t.Errorf("artifact reply.md: %d bytes, %v; want the whole text", len(b), err)
	}
	missing := strings.Repeat("cd", 32)
	_, err = e.a.Host.WriteArtifact(ctx, api.WriteArtifactRequest{RunID: testRun, Name: "lost.md", Blob: missing})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "artifact lost.md") || !strings.Contains(err.Error(), missing[:12]) {
		t.Errorf("WriteArtifact(missing blob) = %v, want a non-retryable error naming the artifact and the blob", err)
	}
}

// A typed agent's call (KeepReply) gets its long reply whole, for the workflow's schema
// check, and stored too, so its events can carry the reference.
func TestCompleteChatKeepReplyWhole(t *testing.T) {
	t.Parallel()
	long := `{"items": "` + strings.Repeat("x", 20000) + `"}`
	e, _ := newModelEnv(t, activities.LLMConfig{}, fakellm.Reply{Content: long})
	ctx := context.Background()
	res, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: &api.ThreadRef{}, Messages: userAsks("List them"), CallID: "1", KeepReply: true})
	if err != nil {
		t.Fatalf("CompleteChat: %v", err)
	}
	m := res.Message
	if m.Content != long || m.ContentRef == "" || m.ContentBytes != len(long) {
		t.Fatalf("reply %d bytes, ref %q, bytes %d; want the whole %d bytes and its reference", len(m.Content), m.ContentRef, m.ContentBytes, len(long))
	}
	if b, err := e.store.GetBlob(ctx, m.ContentRef); err != nil || string(b) != long {
		t.Errorf("stored reply: %d bytes, %v; want the whole text", len(b), err)
	}
}
