package activities_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// A call by reference stores its thread; the next call carries only the new tool result
// (a preview with a reference) and the context by name, and the model still receives the
// whole conversation with the whole output. Another worker on the same store rebuilds it.
func TestCompleteChatStoredThread(t *testing.T) {
	t.Parallel()
	e, model := newModelEnv(t, activities.LLMConfig{},
		fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "read_file", Arguments: []byte(`{"path":"big.txt"}`)}}},
		fakellm.Reply{Content: "It is big."},
		fakellm.Reply{Content: "Still big."})
	ctx := context.Background()
	tools := []api.ToolDef{{Name: "read_file", Description: "reads", Parameters: []byte(`{"type":"object"}`)}}
	first, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: &api.ThreadRef{}, Messages: userAsks("How big?"),
		System: "You read files.", Tools: tools, StoreContext: true, CallID: "1"})
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	if first.Thread == nil || first.Thread.Head == "" || first.Thread.Messages != 2 || first.Context == "" {
		t.Fatalf("first call stored thread %+v, context %q; want 2 messages and a context name", first.Thread, first.Context)
	}
	big := strings.Repeat("0123456789", 30_000)
	sum, err := e.store.PutBlob(ctx, []byte(big))
	if err != nil {
		t.Fatal(err)
	}
	result := api.ChatMessage{Role: api.RoleTool, ToolCallID: "1.1", Content: "0123… (preview)", ContentRef: sum, ContentBytes: len(big)}
	second, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: first.Thread, Messages: []api.ChatMessage{result},
		Context: first.Context, CallID: "2"})
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if second.Message.Content != "It is big." || second.Thread.Messages != 4 {
		t.Fatalf("second call = %+v", second)
	}
	got := model.Requests()[1]
	if len(got.Messages) != 4 || got.Messages[0]["content"] != "You read files." || got.Messages[3]["content"] != big || len(got.Tools) != 1 {
		t.Fatalf("the model got %d messages (system %v, tool result of %d bytes) and %d tools; want the system, the thread and the whole output",
			len(got.Messages), got.Messages[0]["content"], len(got.Messages[len(got.Messages)-1]["content"].(string)), len(got.Tools))
	}
	calls, _ := got.Messages[2]["tool_calls"].([]any)
	if len(calls) != 1 || calls[0].(map[string]any)["id"] != "1.1" {
		t.Errorf("stored reply's tool calls = %v, want the workflow's id 1.1", got.Messages[2]["tool_calls"])
	}

	// Another worker (nothing cached) on the same store.
	other := activities.New(activities.Deps{Store: e.store, Sandboxes: e.sbs, LLM: activities.NewLLM(activities.LLMConfig{
		BaseURL: model.Start(t), Model: "fake-model"})})
	third, err := other.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: second.Thread,
		Messages: userAsks("And now?"), Context: first.Context, CallID: "3"})
	if err != nil {
		t.Fatalf("call on another worker: %v", err)
	}
	if third.Message.Content != "Still big." || third.Thread.Messages != 6 {
		t.Errorf("third call = %+v, want the thread rebuilt from the store", third)
	}
	if n := len(model.Requests()[2].Messages); n != 6 {
		t.Errorf("the model got %d messages from the other worker, want 6", n)
	}
}

func TestCompleteChatMissingThreadIsNonRetryable(t *testing.T) {
	t.Parallel()
	e, _ := newModelEnv(t, activities.LLMConfig{}, fakellm.Reply{Content: "x"})
	_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{
		Thread: &api.ThreadRef{Head: strings.Repeat("ab", 32), Messages: 3}, Messages: userAsks("hi")})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "abababababab") || !strings.Contains(err.Error(), "artifacts.url") {
		t.Fatalf("err = %v, want a non-retryable error naming the segment and the shared store", err)
	}
}

// A provider that says the request is over its context gets a message naming the setting.
func TestCompleteChatContextExceededNamesTheSetting(t *testing.T) {
	t.Parallel()
	e, _ := newModelEnv(t, activities.LLMConfig{}, fakellm.Reply{Status: 400,
		Error: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."})
	_, err := e.a.Model.CompleteChat(context.Background(), api.CompleteChatRequest{Messages: userAsks("hi")})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "context.max_tokens") {
		t.Fatalf("err = %v, want a non-retryable error naming context.max_tokens", err)
	}
}

// A tool output over StoreOver is stored whole and returned as a preview with its
// reference; without StoreOver (runs from before) it stays inline.
func TestRunToolStoresLargeOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	body := strings.Repeat("line of a large file\n", 5_000) // 105,000 bytes
	if err := os.WriteFile(filepath.Join(e.ws, "big.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res := e.toolReq(t, api.RunToolRequest{Tool: "read_file", Args: argsJSON(t, map[string]string{"path": "big.txt"}), StoreOver: api.DefaultStoreOver})
	if res.ContentRef == "" || res.ContentBytes < len(body) || len(res.Content) > api.PreviewBytes+100 || !strings.HasPrefix(res.Content, "line of a large file") {
		t.Fatalf("result = %d bytes inline, ref %q, %d bytes in all; want a preview and a reference", len(res.Content), res.ContentRef, res.ContentBytes)
	}
	whole, err := e.store.GetBlob(context.Background(), res.ContentRef)
	if err != nil || !strings.Contains(string(whole), body) {
		t.Fatalf("stored output: %d bytes, %v; want the whole output", len(whole), err)
	}
	inline := e.toolReq(t, api.RunToolRequest{Tool: "read_file", Args: argsJSON(t, map[string]string{"path": "big.txt"})})
	if inline.ContentRef != "" || !strings.Contains(inline.Content, body[:1000]) || len(inline.Content) < len(body) {
		t.Errorf("without store_over: ref %q, %d bytes; want the whole output inline", inline.ContentRef, len(inline.Content))
	}
}

// A note (a human edited the call) starts the result before it is stored, so the model
// reads it also when the result travels by reference.
func TestRunToolNoteIsStoredWithALargeOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	body := strings.Repeat("line of a large file\n", 5_000)
	if err := os.WriteFile(filepath.Join(e.ws, "big.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	note := "A human edited this call's arguments to {\"path\":\"big.txt\"}\n"
	res := e.toolReq(t, api.RunToolRequest{Tool: "read_file", Args: argsJSON(t, map[string]string{"path": "big.txt"}), StoreOver: api.DefaultStoreOver, Note: note})
	if res.ContentRef == "" || !strings.HasPrefix(res.Content, note) {
		t.Fatalf("result: ref %q, preview starts %.80q; want a reference and the note first", res.ContentRef, res.Content)
	}
	whole, err := e.store.GetBlob(context.Background(), res.ContentRef)
	if err != nil || !strings.HasPrefix(string(whole), note+"line of a large file") {
		t.Fatalf("stored output starts %.80q, %v; want the note, then the output", whole, err)
	}
}

// Compaction summarises all but the most recent messages (a tool call stays with its
// results) and the thread continues from the summary.
func TestCompactThread(t *testing.T) {
	t.Parallel()
	e, model := newModelEnv(t, activities.LLMConfig{}, fakellm.Reply{Content: "The user wants sizes; a.txt and b.txt were read."},
		fakellm.Reply{Content: "Both are 4000 bytes."})
	ctx := context.Background()
	var msgs []api.ChatMessage
	msgs = append(msgs, api.ChatMessage{Role: api.RoleUser, Content: "How big are a.txt and b.txt?"})
	for _, f := range []string{"a", "b", "c"} {
		msgs = append(msgs,
			api.ChatMessage{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: f + ".1", Name: "read_file", Arguments: `{"path":"` + f + `.txt"}`}}},
			api.ChatMessage{Role: api.RoleTool, ToolCallID: f + ".1", Content: strings.Repeat(f, 4000)})
	}
	res, err := e.a.Model.CompactThread(ctx, api.CompactThreadRequest{Thread: api.ThreadRef{}, Messages: msgs, KeepRecent: 1, MaxTokens: 2000})
	if err != nil {
		t.Fatalf("CompactThread: %v", err)
	}
	if res.Summarised != 5 || res.Thread.Messages != 3 || res.TokensAfter >= res.TokensBefore {
		t.Fatalf("result = %+v, want 5 messages summarised, summary + the last call and its result kept, fewer tokens", res)
	}
	req := model.Requests()[0]
	if sys, _ := req.Messages[0]["content"].(string); !strings.HasPrefix(sys, activities.CompactPromptPrefix) {
		t.Errorf("summary request's system message = %.60q", sys)
	}
	if tr, _ := req.Messages[1]["content"].(string); !strings.Contains(tr, "How big are a.txt") || strings.Contains(tr, "cccc") {
		t.Errorf("transcript = %.200q, want the old turns only", tr)
	}
	// The next model call continues from the summary.
	next, err := e.a.Model.CompleteChat(ctx, api.CompleteChatRequest{Thread: &res.Thread, Messages: userAsks("So?"), CallID: "9"})
	if err != nil {
		t.Fatal(err)
	}
	got := model.Requests()[1].Messages
	if first, _ := got[0]["content"].(string); len(got) != 4 || !strings.Contains(first, "compacted: 5 earlier messages") || got[1]["role"] != "assistant" {
		t.Errorf("after compaction the model got %d messages, first %.80q; want the summary, the kept call and result, the prompt", len(got), first)
	}
	_ = next
}

func TestKeepFrom(t *testing.T) {
	t.Parallel()
	u := api.ChatMessage{Role: api.RoleUser, Content: "q"}
	a := api.ChatMessage{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: "1", Name: "glob"}, {ID: "2", Name: "glob"}}}
	r := api.ChatMessage{Role: api.RoleTool, Content: "r"}
	big := api.ChatMessage{Role: api.RoleTool, Content: strings.Repeat("x", 40_000)}
	for _, tc := range []struct {
		name   string
		msgs   []api.ChatMessage
		keep   int
		budget int
		want   int
	}{
		{"keeps the last n", []api.ChatMessage{u, a, r, r, u, {Role: api.RoleAssistant, Content: "ok"}}, 2, 10_000, 4},
		{"never splits a call from its results", []api.ChatMessage{u, u, a, r, r}, 1, 10_000, 2},
		{"stops at the budget", []api.ChatMessage{u, a, big, u}, 4, 1_000, 3},
		{"always keeps the last group", []api.ChatMessage{u, a, big}, 4, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := activities.KeepFrom(tc.msgs, tc.keep, tc.budget); got != tc.want {
				t.Errorf("KeepFrom = %d, want %d", got, tc.want)
			}
		})
	}
}
