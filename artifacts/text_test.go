package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

// textEvent is an event carrying a reply stored as blob ref, as the workflow records it.
func textEvent(t *testing.T, seq int64, typ, ref string, size int) api.Event {
	t.Helper()
	data, err := json.Marshal(map[string]any{"content": "preview\n[… bytes of text in all]", "content_ref": ref, "bytes": size, "call": "1.1"})
	if err != nil {
		t.Fatal(err)
	}
	return api.Event{Seq: seq, Type: typ, Data: data}
}

func TestResolveTexts(t *testing.T) {
	ctx := context.Background()
	st, err := Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	whole := strings.Repeat("a reply of fifty kilobytes ", 2000) + "— the end ✓"
	ref, err := st.PutBlob(ctx, []byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	tool := api.Event{Seq: 3, Type: "agent_tool_result", Data: json.RawMessage(`{"content":"head","content_ref":"` + ref + `","bytes":9}`)}
	short := api.Event{Seq: 4, Type: api.EventAgentText, Data: json.RawMessage(`{"content":"short"}`)}
	for _, typ := range []string{api.StreamText, api.EventAgentText, api.EventAgentDone} {
		t.Run(typ, func(t *testing.T) {
			in := []api.Event{textEvent(t, 1, typ, ref, len(whole)), tool, short}
			before := string(in[0].Data)
			got, err := ResolveTexts(ctx, st, in)
			if err != nil {
				t.Fatalf("ResolveTexts: %v", err)
			}
			var d map[string]any
			if err := json.Unmarshal(got[0].Data, &d); err != nil {
				t.Fatal(err)
			}
			if d["content"] != whole {
				t.Errorf("content: %d bytes, want the whole %d-byte text", len(d["content"].(string)), len(whole))
			}
			if _, ok := d["content_ref"]; ok {
				t.Errorf("resolved event still names its blob: %s", got[0].Data)
			}
			if d["call"] != "1.1" {
				t.Errorf("call = %v, want the event's other fields kept", d["call"])
			}
			if string(in[0].Data) != before {
				t.Errorf("the caller's events were changed: %s", in[0].Data)
			}
			if string(got[1].Data) != string(tool.Data) || string(got[2].Data) != string(short.Data) {
				t.Errorf("a tool output preview or a short text changed: %s, %s", got[1].Data, got[2].Data)
			}
		})
	}
}

// A missing blob is an error naming the event and the reference, never an empty text or
// the preview shown as if it were the whole; the events before it come back resolved.
func TestResolveTextsMissingBlob(t *testing.T) {
	ctx := context.Background()
	st, err := Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	present, err := st.PutBlob(ctx, []byte("here"))
	if err != nil {
		t.Fatal(err)
	}
	missing := Sum([]byte("never stored"))
	in := []api.Event{textEvent(t, 1, api.StreamText, present, 4), textEvent(t, 2, api.EventAgentDone, missing, 12)}
	tests := []struct {
		name string
		st   BlobGetter
		want []string
		ok   int
	}{
		{"missing blob", st, []string{"event #2 (agent_done)", missing, "12 bytes"}, 1},
		{"no store", nil, []string{"event #1 (text)", present, "no blob store", "artifacts.url"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveTexts(ctx, tt.st, in)
			var te *TextRefError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v, want a TextRefError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tt.st != nil && !errors.Is(err, ErrNotFound) {
				t.Errorf("error %v does not wrap ErrNotFound", err)
			}
			if len(got) != tt.ok {
				t.Fatalf("%d events back, want the %d before the one that failed", len(got), tt.ok)
			}
			if tt.ok > 0 && !strings.Contains(string(got[0].Data), `"content":"here"`) {
				t.Errorf("event before the failure: %s, want it resolved", got[0].Data)
			}
		})
	}
}

// The archived stream a watch replays from an old offset carries the whole text too.
func TestStreamEventsResolvesTexts(t *testing.T) {
	ctx := context.Background()
	st, err := Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	whole := strings.Repeat("x", 20000)
	ref, err := st.PutBlob(ctx, []byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(textEvent(t, 1, api.StreamText, ref, len(whole)))
	seg := string(line) + "\n"
	rec := api.Record{ID: "session:a:b", Artifacts: []api.Artifact{{Name: "stream-1-1.jsonl", Content: &seg}}}
	got, err := StreamEvents(ctx, st, rec, 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("StreamEvents: %d events, %v", len(got), err)
	}
	if !strings.Contains(string(got[0].Data), whole) {
		t.Errorf("archived text event: %d bytes, want the whole text", len(got[0].Data))
	}
	other, _ := Open("mem://")
	defer other.Close()
	if _, err := StreamEvents(ctx, other, rec, 0, 10); err == nil || !strings.Contains(err.Error(), ref) {
		t.Errorf("archive read from a store without the blob: %v, want an error naming %s", err, ref)
	}
}
