package workflows

import (
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// A reply the model call stored by reference (api.TextInlineMax) is recorded by its
// reference: agent_text and agent_done carry the preview, content_ref and bytes, the
// result names the blob too, and the thread keeps the reference, from which the next model
// call gets the whole text back.
func TestLongReplyRecordedByReference(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ref1, ref2 := strings.Repeat("1a", 32), strings.Repeat("2b", 32)
	first := reads("a")
	first.Message.Content, first.Message.ContentRef, first.Message.ContentBytes = "Reading a first…\n[… 30000 bytes of text in all]", ref1, 30000
	last := answer("The answer…\n[… 50000 bytes of text in all]")
	last.Message.ContentRef, last.Message.ContentBytes = ref2, 50000
	whole1 := strings.Repeat("r", 30000)
	memThreads.Lock()
	memThreads.blobs[ref1] = whole1 // the model call's store, as the worker's would hold it
	memThreads.Unlock()
	f := &parFakes{spec: agents.Spec{Name: "reader"}, script: []api.CompleteChatResult{first, last}, meet: 1}
	f.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, payload(t, api.AgentRunInput{Agent: "reader", Prompt: "read"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	rec := queryRecord(t, env)
	got := map[string]string{}
	for _, e := range rec.Events {
		if api.IsReplyText(e.Type) {
			got[e.Type] = string(e.Data)
		}
	}
	want := map[string]string{
		api.EventAgentText: `{"bytes":30000,"content":"Reading a first…\n[… 30000 bytes of text in all]","content_ref":"` + ref1 + `"}`,
		api.EventAgentDone: `{"bytes":50000,"content":"The answer…\n[… 50000 bytes of text in all]","content_ref":"` + ref2 + `","turns":2}`,
	}
	for typ, w := range want {
		if got[typ] != w {
			t.Errorf("%s event:\n got %s\nwant %s", typ, got[typ], w)
		}
	}
	var res api.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.ContentRef != ref2 || res.ContentBytes != 50000 || !strings.HasPrefix(res.Content, "The answer…") {
		t.Errorf("result = %+v, want the preview with the reference %s", res, ref2)
	}
	// The stored thread holds the reply by reference; the model got it back whole.
	f.mu.Lock()
	defer f.mu.Unlock()
	var sent *api.ChatMessage
	for i, m := range f.requests[1].Messages {
		if m.Role == api.RoleAssistant {
			sent = &f.requests[1].Messages[i]
		}
	}
	if sent == nil || sent.Content != whole1 {
		t.Errorf("second model call carried the earlier reply as %.80v, want its whole %d-byte text", sent, len(whole1))
	}
}
