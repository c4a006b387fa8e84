package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// The model's reasoning reaches the result from either field OpenAI-compatible servers
// use, in a reply and in a stream, and never enters the message (the thread).
func TestCompleteChatReasoning(t *testing.T) {
	t.Parallel()
	const thought = "The user greets me; I should greet back."
	for _, field := range []string{fakellm.FieldReasoningContent, fakellm.FieldReasoning} {
		reply := fakellm.Reply{Content: "Hello there.", Reasoning: thought, ReasoningField: field}
		t.Run(field+"/reply", func(t *testing.T) {
			e, _ := newModelEnv(t, activities.LLMConfig{}, reply)
			got, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("Hi")})
			if err != nil {
				t.Fatalf("CompleteChat: %v", err)
			}
			if got.Reasoning != thought || got.Message.Content != "Hello there." || got.ReasoningRef != "" {
				t.Errorf("reasoning %q, content %q, ref %q; want %q, Hello there., none", got.Reasoning, got.Message.Content, got.ReasoningRef, thought)
			}
		})
		t.Run(field+"/stream", func(t *testing.T) {
			res, _ := streamChat(t, reply, api.CompleteChatRequest{Messages: userAsks("Hi"), StreamLive: true, StreamCall: "1"}, time.Hour)
			if res.Reasoning != thought || res.Message.Content != "Hello there." {
				t.Errorf("reasoning %q, content %q; want %q, Hello there.", res.Reasoning, res.Message.Content, thought)
			}
		})
	}
}

// Reasoning over api.ReasoningInlineMax is stored once and the result carries a preview
// and the reference: history holds references, not bulk.
func TestCompleteChatLongReasoningByReference(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("think ", 3000) // 18,000 bytes
	e, _ := newModelEnv(t, activities.LLMConfig{}, fakellm.Reply{Content: "ok", Reasoning: long})
	got, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("Hi")})
	if err != nil {
		t.Fatalf("CompleteChat: %v", err)
	}
	if got.ReasoningRef == "" || got.ReasoningBytes != len(long) || len(got.Reasoning) > api.PreviewBytes+100 ||
		!strings.HasSuffix(got.Reasoning, "[… 18000 bytes of reasoning in all]") {
		t.Fatalf("ref %q, bytes %d, preview %d bytes ending %q", got.ReasoningRef, got.ReasoningBytes, len(got.Reasoning), got.Reasoning[max(0, len(got.Reasoning)-60):])
	}
	b, err := e.store.GetBlob(context.Background(), got.ReasoningRef)
	if err != nil || string(b) != long {
		t.Errorf("stored reasoning: %d bytes, %v; want the whole text", len(b), err)
	}
}
