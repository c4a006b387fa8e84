package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

func TestStreamPrinter(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(seq int64, typ string, data map[string]any) func(*streamPrinter) {
		b, _ := json.Marshal(data)
		return func(p *streamPrinter) { p.event(api.Event{Seq: seq, Type: typ, Data: b, At: at}) }
	}
	text := func(seq int64, call, content string) func(*streamPrinter) {
		return ev(seq, api.StreamText, map[string]any{"content": content, "call": call})
	}
	// live is what runs.FollowSessionLive hands on: the text not handed on before, at
	// its offset (heartbeats "Hel" then "Hello wor" arrive as "Hel" at 0, "lo wor" at 3).
	live := func(call string, from int, s string) func(*streamPrinter) {
		return func(p *streamPrinter) { p.live(api.LiveText{Call: call, From: from, Text: s}) }
	}
	// thinking is live thinking as runs.FollowSessionLive hands it on (Thinking set).
	thinking := func(call string, from int, s string) func(*streamPrinter) {
		return func(p *streamPrinter) {
			p.live(api.LiveText{Call: call, Thinking: &api.LiveThinking{From: from, Text: s}})
		}
	}
	thought := func(seq int64, call, content string) func(*streamPrinter) {
		return ev(seq, api.StreamThinking, map[string]any{"content": content, "call": call})
	}
	for _, tc := range []struct {
		name  string
		steps []func(*streamPrinter)
		want  string
	}{
		{"live thinking flows on its line, live text on the next; their events add nothing shown",
			[]func(*streamPrinter){
				ev(6, api.StreamUserInput, map[string]any{"text": "Hi", "turn": 3}),
				thinking("3.2", 0, "Let me"), thinking("3.2", 6, " see."), live("3.2", 0, "Hel"), live("3.2", 3, "lo world"),
				thought(7, "3.2", "Let me see."), text(8, "3.2", "Hello world"),
				ev(9, api.StreamTurnEnd, map[string]any{"turn": 3}),
			},
			"#6    10:00:00.000 you: Hi\n" +
				"#live 10:00:00.000 thinking: Let me see.\n" +
				"#live 10:00:00.000 text: Hello world\n" +
				"#9    10:00:00.000 turn end\n"},
		{"the thinking event completes the open thinking line",
			[]func(*streamPrinter){thinking("1.1", 0, "Hmm, the"), thought(2, "1.1", "Hmm, the answer is 4."), text(3, "1.1", "4")},
			"#live 10:00:00.000 thinking: Hmm, the answer is 4.\n#3    10:00:00.000 text: 4\n"},
		{"thinking the live line missed the end of, after the text began, comes on its own line",
			[]func(*streamPrinter){thinking("1.1", 0, "Hmm"), live("1.1", 0, "4"), thought(2, "1.1", "Hmm, four."), text(3, "1.1", "4")},
			"#live 10:00:00.000 thinking: Hmm\n#live 10:00:00.000 text: 4\n#2    10:00:00.000 thinking: …, four.\n"},
		{"thinking rewritten by a retried attempt starts a new line",
			[]func(*streamPrinter){thinking("2.1", 0, "The user wants"), thinking("2.1", 9, "asks"), thought(4, "2.1", "The user asks.")},
			"#live 10:00:00.000 thinking: The user wants\n#live 10:00:00.000 thinking: …asks.\n"},
		{"long reasoning stored by reference: the line gets the note, not the preview again",
			[]func(*streamPrinter){
				thinking("2.1", 0, "think think think think"),
				ev(4, api.StreamThinking, map[string]any{"content": "think think\n[… 18000 bytes of reasoning in all]", "call": "2.1",
					"content_ref": "blob:x", "bytes": 18000}),
			},
			"#live 10:00:00.000 thinking: think think think think [… 18000 bytes of reasoning in all]\n"},
		{"a thinking event without live thinking before it is a line",
			[]func(*streamPrinter){thought(4, "2.1", "hmm")},
			"#4    10:00:00.000 thinking: hmm\n"},
		{"live text flows on one line and its text event adds only the rest",
			[]func(*streamPrinter){
				ev(6, api.StreamUserInput, map[string]any{"text": "Hi", "turn": 3}),
				live("3.2", 0, "Hel"), live("3.2", 3, "lo wor"), text(7, "3.2", "Hello world"),
				ev(8, api.StreamTurnEnd, map[string]any{"turn": 3}),
			},
			"#6    10:00:00.000 you: Hi\n" +
				"#live 10:00:00.000 text: Hello world\n" +
				"#8    10:00:00.000 turn end\n"},
		{"live text that was the whole reply",
			[]func(*streamPrinter){live("1.1", 0, "Done."), text(2, "1.1", "Done."), ev(3, api.StreamTurnEnd, nil)},
			"#live 10:00:00.000 text: Done.\n#3    10:00:00.000 turn end\n"},
		{"a text event without live text before it is a line",
			[]func(*streamPrinter){text(7, "3.2", "Hello world")},
			"#7    10:00:00.000 text: Hello world\n"},
		{"chunks of a run recorded before live text stay one line each",
			[]func(*streamPrinter){text(4, "1.1", "Hello "), text(5, "1.1", "world")},
			"#4    10:00:00.000 text: Hello \n#5    10:00:00.000 text: world\n"},
		{"a call that fails leaves its live line ended",
			[]func(*streamPrinter){live("2.1", 0, "Let me"), ev(9, api.StreamTurnEnd, map[string]any{"error": "model down"})},
			"#live 10:00:00.000 text: Let me\n#9    10:00:00.000 turn end (error: model down)\n"},
		{"a text event that is not what the live line showed is printed whole",
			[]func(*streamPrinter){live("2.1", 0, "Hello wor"), text(9, "2.1", "Goodbye")},
			"#live 10:00:00.000 text: Hello wor\n#9    10:00:00.000 text: Goodbye\n"},
		{"the rest after a live line another event ended",
			[]func(*streamPrinter){
				live("2.1", 0, "Hel"), ev(8, api.StreamThinking, map[string]any{"content": "hmm", "call": "2.1"}),
				text(9, "2.1", "Hello"),
			},
			"#live 10:00:00.000 text: Hel\n#8    10:00:00.000 thinking: hmm\n#9    10:00:00.000 text: …lo\n"},
		{"text rewritten by a retried attempt starts a new line",
			[]func(*streamPrinter){live("2.1", 0, "Hello wor"), live("2.1", 3, "p me"), text(9, "2.1", "Help me!")},
			"#live 10:00:00.000 text: Hello wor\n#live 10:00:00.000 text: …p me!\n"},
		{"a follower that joined late shows the tail, then the rest",
			[]func(*streamPrinter){live("2.1", 6, "world"), live("2.1", 11, "!"), text(9, "2.1", "Hello world!")},
			"#live 10:00:00.000 text: …world!\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &streamPrinter{w: &out, now: func() time.Time { return at }}
			for _, step := range tc.steps {
				step(p)
			}
			p.end()
			if out.String() != tc.want {
				t.Errorf("printed:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}

// Live text, then the call's text event: the reply is printed exactly once.
func TestStreamPrinterPrintsTheReplyOnce(t *testing.T) {
	var out bytes.Buffer
	p := &streamPrinter{w: &out}
	p.live(api.LiveText{Call: "3.2", Text: "Hel"})
	p.live(api.LiveText{Call: "3.2", From: 3, Text: "lo wor"})
	data, _ := json.Marshal(map[string]string{"content": "Hello world", "call": "3.2"})
	p.event(api.Event{Seq: 7, Type: api.StreamText, Data: data})
	p.end()
	if n := strings.Count(out.String(), "Hello world"); n != 1 || strings.Count(out.String(), "Hel") != 1 {
		t.Errorf("printed %q: \"Hello world\" %d times, want once", out.String(), n)
	}
}

func TestStreamPrinterJSON(t *testing.T) {
	var out bytes.Buffer
	p := &streamPrinter{w: &out, asJSON: true}
	p.live(api.LiveText{Call: "3.2", Thinking: &api.LiveThinking{From: 4, Text: "ok"}})
	p.live(api.LiveText{Call: "3.2", From: 3, Text: "lo"})
	p.event(api.Event{Seq: 7, Type: api.StreamText, Data: json.RawMessage(`{"content":"Hello","call":"3.2"}`)})
	want := `{"call":"3.2","from":4,"text":"ok","type":"live_thinking"}` + "\n" +
		`{"call":"3.2","from":3,"text":"lo","type":"live"}` + "\n" +
		`{"seq":7,"type":"text","data":{"content":"Hello","call":"3.2"},"at":"0001-01-01T00:00:00Z"}` + "\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPrintTurnInFlight(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := func(seq int64, typ, data string) api.Event {
		return api.Event{Seq: seq, Type: typ, At: at, Data: json.RawMessage(data)}
	}
	rec := api.Record{ID: "session:scribe:u42", Status: api.StatusSuspended,
		Events: []api.Event{ev(1, api.StreamUserInput, `{"text":"Hi.","turn":1}`), ev(2, api.StreamTurnEnd, `{"turn":1}`),
			ev(3, api.StreamUserInput, `{"text":"Write it down.","turn":2}`), ev(4, "approval_requested", `{}`)},
		State: map[string]json.RawMessage{api.StateApproval: json.RawMessage(`{"call_id":"2.1.1","capability":"write","tool":"write_file","args":{"path":"notes.md"}}`)}}
	var b strings.Builder
	printTurnInFlight(&b, rec)
	for _, w := range []string{"[2] 2025-01-02T03:04:05Z  you: Write it down.\n    (under way)", `Pending: tool call 2.1.1: write_file (write) {"path":"notes.md"}`,
		"next: starter approve session:scribe:u42 --call 2.1.1"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, b.String())
		}
	}

	// An idle session: its last turn ended, nothing pending.
	rec = api.Record{ID: rec.ID, Status: api.StatusRunning, Events: rec.Events[:2]}
	b.Reset()
	printTurnInFlight(&b, rec)
	if b.String() != "" {
		t.Errorf("idle session printed %q", b.String())
	}
}
