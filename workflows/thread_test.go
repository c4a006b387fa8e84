package workflows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nexo-temporal/nexo/api"
)

// memThreads is the blob store of threads and chat contexts for the scripted models of
// these tests, as the worker's store would hold them.
var memThreads = struct {
	sync.Mutex
	threads  map[string][]api.ChatMessage
	contexts map[string]api.ChatContext
	blobs    map[string]string
}{threads: map[string][]api.ChatMessage{}, contexts: map[string]api.ChatContext{}, blobs: map[string]string{}}

func memSum(v any) string {
	b, _ := json.Marshal(v)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// memBlob stores a tool output, as RunTool does with one over StoreOver.
func memBlob(content string) string {
	memThreads.Lock()
	defer memThreads.Unlock()
	sum := memSum(content)
	memThreads.blobs[sum] = content
	return sum
}

// fullThread adapts a scripted model to threads by reference, as the worker does: the
// model sees the whole thread in req.Messages (stored contents put back in full) and the
// constant part by value; the reply is stored as the thread's next segment. Requests
// by value (runs from before the change) pass through unchanged.
func fullThread(model func(context.Context, api.CompleteChatRequest) (api.CompleteChatResult, error)) func(context.Context, api.CompleteChatRequest) (api.CompleteChatResult, error) {
	return func(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		if req.Thread == nil {
			return model(ctx, req)
		}
		memThreads.Lock()
		prior, ok := memThreads.threads[req.Thread.Head]
		if req.Thread.Head != "" && !ok {
			memThreads.Unlock()
			return api.CompleteChatResult{}, fmt.Errorf("no stored thread %s", req.Thread.Head)
		}
		cc := api.ChatContext{System: req.System, Skills: req.Skills, Tools: req.Tools}
		if req.Context != "" {
			cc = memThreads.contexts[req.Context]
		}
		name := ""
		if req.StoreContext {
			name = memSum(cc)
			memThreads.contexts[name] = cc
		}
		full := append(append([]api.ChatMessage(nil), prior...), req.Messages...)
		for i, m := range full {
			if m.ContentRef != "" {
				full[i].Content, full[i].ContentRef, full[i].ContentBytes = memThreads.blobs[m.ContentRef], "", 0
			}
		}
		memThreads.Unlock()
		byValue := req
		byValue.Thread, byValue.Context, byValue.StoreContext = nil, "", false
		byValue.System, byValue.Skills, byValue.Tools, byValue.Messages = cc.System, cc.Skills, cc.Tools, full
		out, err := model(ctx, byValue)
		if err != nil {
			return out, err
		}
		reply := out.Message
		reply.ToolCalls = append([]api.ToolCall(nil), reply.ToolCalls...)
		for i := range reply.ToolCalls {
			reply.ToolCalls[i].ID = fmt.Sprintf("%s.%d", req.CallID, i+1)
		}
		stored := append(append(append([]api.ChatMessage(nil), prior...), req.Messages...), reply)
		head := memSum(api.ThreadSegment{Parent: req.Thread.Head, Messages: stored[len(prior):]})
		memThreads.Lock()
		memThreads.threads[head] = stored
		memThreads.Unlock()
		out.Thread = &api.ThreadRef{Head: head, Messages: len(stored), Tokens: api.EstimateTokens(stored)}
		out.Context = name
		return out, nil
	}
}
