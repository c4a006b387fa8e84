package activities

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nexo-temporal/nexo/api"
)

//go:embed prompts/compact.md
var compactPrompt string

// CompactPromptPrefix starts the system message of every compaction request, so a
// scripted model (fakellm) can tell a summary request from an agent's turn.
const CompactPromptPrefix = "You compact the transcript of a conversation"

// SummaryHeader starts the message that replaces the summarised turns.
const SummaryHeader = "[Summary of the conversation so far, which was compacted: %d earlier messages]\n\n"

// compactMessageBytes bounds one message in the transcript the summariser reads; a stored
// output is already a preview.
const compactMessageBytes = 4 << 10

// CompactThread shortens a thread that would no longer fit the agent's context budget:
// the oldest turns are summarised by the model, and the thread continues, as a new chain,
// from the summary plus the most recent messages (see api.CompactThreadRequest).
func (a *Model) CompactThread(ctx context.Context, req api.CompactThreadRequest) (api.CompactThreadResult, error) {
	model, err := a.modelAt("compact thread", req.Endpoint, req.Model)
	if err != nil {
		return api.CompactThreadResult{}, err
	}
	prior, err := a.loadThread(ctx, req.Thread.Head)
	if err != nil {
		return api.CompactThreadResult{}, err
	}
	all := append(append(make([]api.ChatMessage, 0, len(prior)+len(req.Messages)), prior...), req.Messages...)
	before := req.ContextTokens + api.EstimateTokens(all)
	split := KeepFrom(all, req.KeepRecent, req.MaxTokens/2-req.ContextTokens)
	if split == 0 || (split == 1 && isSummary(all[0])) {
		// Nothing old enough to summarise: the recent messages alone are the thread.
		ref, _, err := a.appendThread(ctx, req.Thread, prior, req.Messages)
		if err != nil {
			return api.CompactThreadResult{}, err
		}
		return api.CompactThreadResult{Thread: ref, TokensBefore: before, TokensAfter: before}, nil
	}
	transcript := renderTranscript(all[:split], req.MaxTokens*3)
	creq := openai.ChatCompletionRequest{Model: model, Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: compactPrompt},
		{Role: openai.ChatMessageRoleUser, Content: transcript},
	}}
	out, err := a.complete(ctx, model, creq, api.CompleteChatRequest{Endpoint: req.Endpoint})
	if err != nil {
		return api.CompactThreadResult{}, fmt.Errorf("compact thread: summarise %d messages: %w", split, err)
	}
	a.priceAt(req.Endpoint, model, out.Model, &out.Usage)
	summary := strings.TrimSpace(out.Message.Content)
	if summary == "" {
		return api.CompactThreadResult{}, fmt.Errorf("compact thread: the model returned an empty summary of %d messages", split)
	}
	kept := append([]api.ChatMessage{{Role: api.RoleUser, Content: fmt.Sprintf(SummaryHeader, split) + summary}}, all[split:]...)
	ref, _, err := a.appendThread(ctx, api.ThreadRef{Tokens: req.ContextTokens}, nil, kept)
	if err != nil {
		return api.CompactThreadResult{}, err
	}
	return api.CompactThreadResult{Thread: ref, TokensBefore: before, TokensAfter: ref.Tokens, Summarised: split, Usage: out.Usage, Model: out.Model}, nil
}

func isSummary(m api.ChatMessage) bool {
	return m.Role == api.RoleUser && strings.HasPrefix(m.Content, "[Summary of the conversation so far")
}

// KeepFrom returns the index of the first message kept verbatim: at most keep messages
// (counting whole groups: an assistant message with tool calls and their results stay
// together), within budget tokens; the last group is always kept.
func KeepFrom(msgs []api.ChatMessage, keep, budget int) int {
	i, kept, tokens := len(msgs), 0, 0
	for i > 0 && kept < keep {
		j := i - 1
		for j > 0 && msgs[j].Role == api.RoleTool {
			j--
		}
		t := api.EstimateTokens(msgs[j:i])
		if kept > 0 && tokens+t > budget {
			break
		}
		tokens += t
		kept += i - j
		i = j
	}
	return i
}

// renderTranscript writes msgs as plain text for the summariser, each message cut to
// compactMessageBytes and the whole to about maxBytes (the earliest message, often an
// earlier summary, and the latest ones are kept).
func renderTranscript(msgs []api.ChatMessage, maxBytes int) string {
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		var b strings.Builder
		switch m.Role {
		case api.RoleTool:
			fmt.Fprintf(&b, "tool result (%s):\n", m.ToolCallID)
		default:
			fmt.Fprintf(&b, "%s:\n", m.Role)
		}
		b.WriteString(cutBytes(m.Content, compactMessageBytes))
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "\n[calls %s (%s) with %s]", tc.Name, tc.ID, cutBytes(tc.Arguments, 512))
		}
		parts = append(parts, b.String())
	}
	total := 0
	for _, p := range parts {
		total += len(p) + 2
	}
	for len(parts) > 2 && total > maxBytes {
		total -= len(parts[1]) + 2
		parts = append(parts[:1], parts[2:]...)
	}
	return strings.Join(parts, "\n\n")
}

func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + " […]"
}
