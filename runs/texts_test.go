package runs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// A record handed out has its long reply texts whole (events and an agent run's result),
// and a lost blob fails the read with the run, the event and the blob named.
func TestRecordTextsResolved(t *testing.T) {
	ctx := context.Background()
	st, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	whole := strings.Repeat("w", 9000)
	ref, err := st.PutBlob(ctx, []byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	preview := func(ref string) api.Record {
		data, _ := json.Marshal(map[string]any{"content": "www…", "content_ref": ref, "bytes": 9000, "turns": 1})
		result, _ := json.Marshal(api.AgentResult{Agent: "a", Content: "www…", ContentRef: ref, ContentBytes: 9000})
		return api.Record{ID: "run-1", Workflow: api.WorkflowAgentRun, Result: result,
			Events: []api.Event{{Seq: 1, Type: api.EventAgentDone, Data: data}}}
	}
	c := &Client{Blobs: st}
	got, err := c.withTexts(ctx, preview(ref))
	if err != nil {
		t.Fatalf("withTexts: %v", err)
	}
	var d struct{ Content, ContentRef string }
	if err := json.Unmarshal(got.Events[0].Data, &d); err != nil || d.Content != whole || d.ContentRef != "" {
		t.Errorf("agent_done: %d bytes, ref %q (%v); want the whole text", len(d.Content), d.ContentRef, err)
	}
	var res api.AgentResult
	if err := json.Unmarshal(got.Result, &res); err != nil || res.Content != whole || res.ContentRef != "" || res.Agent != "a" {
		t.Errorf("result = %.60v (%v), want the whole answer", res, err)
	}

	missing := artifacts.Sum([]byte("lost"))
	for name, c := range map[string]*Client{"lost blob": {Blobs: st}, "no store": {}} {
		t.Run(name, func(t *testing.T) {
			r := preview(missing)
			if _, err := c.withTexts(ctx, r); err == nil || !strings.Contains(err.Error(), "run run-1") ||
				!strings.Contains(err.Error(), "event #1 (agent_done)") || !strings.Contains(err.Error(), missing) {
				t.Errorf("withTexts over %s: %v; want an error naming the run, the event and blob %s", name, err, missing)
			}
			r.Events = nil
			if _, err := c.withTexts(ctx, r); err == nil || !strings.Contains(err.Error(), "result") || !strings.Contains(err.Error(), missing) {
				t.Errorf("result over %s: %v; want an error naming blob %s", name, err, missing)
			}
		})
	}
}

// A session view handed out has its turns' long replies whole (`session show` prints them),
// the view it came from unchanged; a lost blob fails naming the session, the turn and the
// blob.
func TestSessionTurnRepliesResolved(t *testing.T) {
	ctx := context.Background()
	st, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	whole := strings.Repeat("ü", 6000) // 12000 bytes
	ref, err := st.PutBlob(ctx, []byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	view := api.SessionView{ID: "session:a:i", Turns: []api.SessionTurn{
		{N: 1, Prompt: "short", Reply: "Hi."},
		{N: 2, Prompt: "long", Reply: "üü…[… 12000 bytes of text in all]", ReplyRef: ref, ReplyBytes: 12000},
	}}
	got, err := withTurnReplies(ctx, st, view)
	if err != nil {
		t.Fatalf("withTurnReplies: %v", err)
	}
	if t2 := got.Turns[1]; t2.Reply != whole || t2.ReplyRef != "" || t2.ReplyBytes != 0 {
		t.Errorf("turn 2: reply %d bytes, ref %q; want the whole %d-byte reply", len(t2.Reply), t2.ReplyRef, len(whole))
	}
	if got.Turns[0].Reply != "Hi." || view.Turns[1].ReplyRef != ref {
		t.Errorf("turn 1 %q, the source's turn 2 ref %q; want turn 1 as it was and the source untouched", got.Turns[0].Reply, view.Turns[1].ReplyRef)
	}
	missing := artifacts.Sum([]byte("lost"))
	view.Turns[1].ReplyRef = missing
	for name, st := range map[string]artifacts.BlobGetter{"lost blob": st, "no store": nil} {
		if _, err := withTurnReplies(ctx, st, view); err == nil || !strings.Contains(err.Error(), "session session:a:i: turn 2") || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: %v; want an error naming the session, turn 2 and blob %s", name, err, missing)
		}
	}
}
