package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

const sessionFixtureID = "session:assistant:u42"

// sessionFixture is the history of session assistant/u42: one turn answered, one failed.
func sessionFixture() api.SessionView {
	return api.SessionView{
		ID: sessionFixtureID, Agent: "assistant", Instance: "u42", Status: api.StatusRunning,
		Turns: []api.SessionTurn{
			{N: 1, Prompt: "My name is Mac.", Reply: "Nice to meet you, Mac.", Started: t0, Ended: t0, FirstSeq: 1, LastSeq: 3},
			{N: 2, Prompt: "And now?", Error: "agent assistant: model call 1: 503 overloaded", Started: t0, Ended: t0, FirstSeq: 4, LastSeq: 5},
		},
		Messages: []api.ChatMessage{
			{Role: api.RoleUser, Content: "My name is Mac."},
			{Role: api.RoleAssistant, Content: "Nice to meet you, Mac."},
		},
		StreamOffset: 5, Runs: 1,
	}
}

// streamEvent is one activity-stream event of a session.
func streamEvent(seq int64, typ string, data any) api.Event {
	return api.Event{Seq: seq, Type: typ, Data: mustJSON(data), At: t0}
}

// sessionRecord is the record of the session's first run: turn 1 in events 1-3.
func sessionRecord(status api.Status) api.Record {
	return api.Record{
		ID: sessionFixtureID, Workflow: api.WorkflowSession, Status: status,
		Payload: json.RawMessage(`{"agent":"assistant","instance":"u42"}`),
		State:   map[string]json.RawMessage{},
		Events: []api.Event{
			streamEvent(1, api.StreamUserInput, map[string]any{"text": "My name is Mac.", "turn": 1}),
			streamEvent(2, api.StreamText, map[string]string{"content": "Nice to meet you, Mac.", "call": "1.1"}),
			streamEvent(3, api.StreamTurnEnd, map[string]any{"turn": 1}),
		},
		Artifacts: []api.Artifact{}, CreatedAt: t0, UpdatedAt: t0,
	}
}

// segment is an archived stream segment holding events, inline.
func segment(events ...api.Event) api.Artifact {
	var b strings.Builder
	for _, ev := range events {
		b.Write(mustJSON(ev))
		b.WriteByte('\n')
	}
	content := b.String()
	return api.Artifact{Name: fmt.Sprintf("stream-%09d-%09d.jsonl", events[0].Seq, events[len(events)-1].Seq),
		Content: &content, Size: int64(len(content)), At: t0}
}

func TestPromptSession(t *testing.T) {
	t.Parallel()
	type call struct{ agent, instance, text string }
	var got []call
	f := &fakeRuns{
		prompt: func(_ context.Context, agent, instance, text string, _ runs.PromptOptions) (api.PromptReply, error) {
			got = append(got, call{agent, instance, text})
			switch {
			case agent == "ghost":
				return api.PromptReply{}, &runs.SessionStartError{ID: "session:ghost:u42", Type: api.ErrTypeNotFound,
					Msg: `no agent "ghost" is configured on this worker (configured: assistant)`}
			case text == "fail":
				return api.PromptReply{}, errors.New("session session:assistant:u42: agent assistant: model call 1: 503 overloaded")
			case text == "down":
				return api.PromptReply{}, fmt.Errorf("prompt session %s: %w", sessionFixtureID, serviceerror.NewUnavailable("connection refused"))
			case text == "closing":
				return api.PromptReply{}, &runs.BadRequestError{Msg: "prompt text is empty"}
			}
			return api.PromptReply{Turn: 3, Reply: "Your name is Mac."}, nil
		},
		get: func(_ context.Context, id string) (api.Record, error) {
			return sessionRecord(api.StatusRunning), nil
		},
		session: func(context.Context, string, string) (api.SessionView, error) { return sessionFixture(), nil },
	}
	s := newServer(t, f, Options{})

	resp := do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/prompt", body: `{"text":"What is my name?"}`})
	body := readBody(t, resp)
	var reply api.PromptReply
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &reply) != nil || reply != (api.PromptReply{Turn: 3, Reply: "Your name is Mac."}) {
		t.Fatalf("status %d, body %s; want 200 with turn 3 and the reply", resp.StatusCode, body)
	}
	if len(got) != 1 || got[0] != (call{"assistant", "u42", "What is my name?"}) {
		t.Fatalf("Prompt got %+v", got)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"instance with a space", "/v1/sessions/assistant/u%2042/prompt", `{"text":"hi"}`, 400, `instance id "u 42"`},
		{"instance with a colon", "/v1/sessions/assistant/a:b/prompt", `{"text":"hi"}`, 400, `instance id "a:b"`},
		{"instance with a slash", "/v1/sessions/assistant/a%2Fb/prompt", `{"text":"hi"}`, 400, `instance id "a/b"`},
		{"agent with a colon", "/v1/sessions/as:sistant/u42/prompt", `{"text":"hi"}`, 400, `agent "as:sistant"`},
		{"empty text", "/v1/sessions/assistant/u42/prompt", `{"text":"  "}`, 400, "text is empty"},
		{"no body", "/v1/sessions/assistant/u42/prompt", ``, 400, "request body is empty"},
		{"unknown field", "/v1/sessions/assistant/u42/prompt", `{"prompt":"hi"}`, 400, `unknown field "prompt"`},
		{"refused by runs", "/v1/sessions/assistant/u42/prompt", `{"text":"closing"}`, 400, "prompt text is empty"},
		{"unknown agent", "/v1/sessions/ghost/u42/prompt", `{"text":"hi"}`, 404, `no agent "ghost" is configured on this worker (configured: assistant)`},
		{"failed turn", "/v1/sessions/assistant/u42/prompt", `{"text":"fail"}`, 502, "turn 2 of session session:assistant:u42 failed: agent assistant: model call 1: 503 overloaded (the session goes on"},
		{"Temporal down", "/v1/sessions/assistant/u42/prompt", `{"text":"down"}`, 503, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			wantProblem(t, do(t, s, request{method: "POST", path: tc.path, body: tc.body}), tc.status, tc.detail)
			if tc.status == 400 && tc.name != "refused by runs" && len(got) > 0 {
				t.Errorf("Prompt was called with bad input: %+v", got)
			}
		})
	}
}

// TestPromptWithoutWorker: an update no worker accepts would wait forever; the gateway
// answers 503 once two looks at the session find nobody serving it, and leaves a prompt
// alone while a worker is on it, however long the turn.
func TestPromptWithoutWorker(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	status := api.StatusPending
	f := &fakeRuns{
		prompt: func(ctx context.Context, _, _, text string, _ runs.PromptOptions) (api.PromptReply, error) {
			if text == "slow turn" {
				select {
				case <-time.After(300 * time.Millisecond):
					return api.PromptReply{Turn: 1, Reply: "done at last"}, nil
				case <-ctx.Done():
					return api.PromptReply{}, fmt.Errorf("prompt session: %w", ctx.Err())
				}
			}
			<-ctx.Done()
			return api.PromptReply{}, fmt.Errorf("prompt session: %w", ctx.Err())
		},
		get: func(_ context.Context, id string) (api.Record, error) {
			mu.Lock()
			defer mu.Unlock()
			if status == api.StatusInterrupted { // a session whose worker went away
				return api.Record{}, &runs.NoWorkerError{ID: id, TaskQueue: "nexo", Err: context.DeadlineExceeded}
			}
			return sessionRecord(status), nil
		},
	}
	s := newServer(t, f, Options{WorkerWait: 40 * time.Millisecond})
	prompt := func(text string) *http.Response {
		return do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/prompt", body: `{"text":"` + text + `"}`})
	}
	began := time.Now()
	resp := prompt("hello?")
	if waited := time.Since(began); waited > 2*time.Second {
		t.Errorf("the 503 took %v; want it soon after WorkerWait (40ms)", waited)
	}
	p := wantProblem(t, resp, 503, "no worker took up session session:assistant:u42 within 40ms")
	if !strings.Contains(p.Detail, "check GET /v1/sessions/assistant/u42 before sending it again") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("detail %q, Retry-After %q: want what to do", p.Detail, resp.Header.Get("Retry-After"))
	}

	mu.Lock()
	status = api.StatusInterrupted
	mu.Unlock()
	wantProblem(t, prompt("hello?"), 503, "no worker took up session")

	mu.Lock()
	status = api.StatusRunning
	mu.Unlock()
	resp = prompt("slow turn")
	if body := readBody(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "done at last") {
		t.Errorf("a turn a worker serves for longer than WorkerWait: status %d, %s", resp.StatusCode, body)
	}
}

func TestGetSession(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{session: func(_ context.Context, agent, instance string) (api.SessionView, error) {
		switch instance {
		case "u42":
			return sessionFixture(), nil
		case "asleep":
			return api.SessionView{}, &runs.NoWorkerError{ID: api.SessionID(agent, instance), TaskQueue: "nexo", Err: context.DeadlineExceeded}
		}
		return api.SessionView{}, &runs.NotFoundError{ID: api.SessionID(agent, instance)}
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/v1/sessions/assistant/u42"})
	body := readBody(t, resp)
	var v api.SessionView
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.Turns) != 2 || v.Turns[0].Reply != "Nice to meet you, Mac." || len(v.Messages) != 2 {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/sessions/assistant/nobody"}), 404,
		`no session of agent "assistant" with instance "nobody" (a prompt creates it: POST /v1/sessions/assistant/nobody/prompt)`)
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/sessions/assistant/asleep"}), 503, "no worker answered")
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/sessions/assistant/a%20b"}), 400, "instance id")
	wantProblem(t, do(t, s, request{method: "DELETE", path: "/v1/sessions/assistant/u42"}), 405, "use GET")
}

func TestListSessions(t *testing.T) {
	t.Parallel()
	var gotLimit int
	f := &fakeRuns{listSessions: func(_ context.Context, limit int) ([]runs.SessionSummary, error) {
		gotLimit = limit
		return []runs.SessionSummary{{ID: sessionFixtureID, Agent: "assistant", Instance: "u42", Status: api.StatusRunning,
			Summary: runs.Summary{CreatedAt: t0}}}, nil
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/v1/sessions?limit=7"})
	body := readBody(t, resp)
	var l struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if resp.StatusCode != 200 || gotLimit != 7 || json.Unmarshal([]byte(body), &l) != nil || len(l.Sessions) != 1 ||
		l.Sessions[0]["id"] != sessionFixtureID || l.Sessions[0]["instance"] != "u42" || l.Sessions[0]["status"] != "running" {
		t.Fatalf("status %d, limit %d, body %s", resp.StatusCode, gotLimit, body)
	}
	if resp := do(t, s, request{method: "GET", path: "/v1/sessions"}); resp.StatusCode != 200 || gotLimit != 0 {
		t.Errorf("no limit: status %d, limit %d (want 0: the runs package's default)", resp.StatusCode, gotLimit)
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/sessions?limit=0"}), 400, "limit")

	f.listSessions = func(context.Context, int) ([]runs.SessionSummary, error) { return nil, nil }
	if body := readBody(t, do(t, s, request{method: "GET", path: "/v1/sessions"})); !strings.Contains(body, `"sessions": []`) {
		t.Errorf("no sessions: %s, want an empty array, not null", body)
	}
}

func TestCloseSession(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{closeSession: func(_ context.Context, agent, instance string) error {
		id := api.SessionID(agent, instance)
		switch instance {
		case "u42":
			return nil
		case "closed":
			return &runs.StateError{ID: id, Status: api.StatusDone, Want: "open"}
		}
		return &runs.NotFoundError{ID: id}
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/close"})
	if body := readBody(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "closed session session:assistant:u42") {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
	p := wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/assistant/closed/close"}), 409,
		"is not open (done); the session is closed; a prompt reopens it with its thread")
	if p.RunID != "session:assistant:closed" || p.RunStatus != "done" {
		t.Errorf("problem %+v: want run_id and run_status", p)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/assistant/nobody/close"}), 404, "no session of agent")
}

// collect reads a stream to its end: "event#id" per message, and the events by seq.
func collect(t *testing.T, sse sseReader) ([]string, map[string]sseMsg) {
	t.Helper()
	var got []string
	msgs := map[string]sseMsg{}
	for {
		m, err := sse.next()
		if err != nil {
			return got, msgs
		}
		got = append(got, m.event+"#"+m.id)
		msgs[m.event+"#"+m.id] = m
	}
}

// TestSessionStreamFollowsAcrossContinueAsNew: the stream replays from any offset, takes
// what the current run no longer holds from the archived segments (also when the session
// continues as new while it is followed), numbers messages by seq, and ends with the
// session.
func TestSessionStreamFollowsAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	first := sessionRecord(api.StatusRunning) // run 1: turn 1 in events 1-3
	// Run 2 (after continue-as-new): run 1's events archived; turn 2 in events 4-7, the
	// tool call's start and update under one id.
	second := sessionRecord(api.StatusRunning)
	second.Artifacts = []api.Artifact{segment(first.Events...)}
	second.Events = []api.Event{
		streamEvent(4, api.StreamUserInput, map[string]any{"text": "List files.", "turn": 2}),
		streamEvent(5, api.StreamToolCall, map[string]any{"id": "2.1", "name": "glob", "args": map[string]string{"pattern": "*"}, "status": "started"}),
		streamEvent(6, api.StreamToolCall, map[string]any{"id": "2.1", "name": "glob", "status": "completed", "content": "a.txt"}),
		streamEvent(7, api.StreamTurnEnd, map[string]any{"turn": 2}),
	}
	closed := second
	closed.Status = api.StatusDone
	closed.Events = append(append([]api.Event(nil), second.Events...), streamEvent(8, "session_closed", map[string]int{"turns": 2}))

	// A live reader (header X-Test-Live) follows from run 1, whose last event it misses:
	// the session continues as new before it looks again. Everyone else comes late, when
	// the session is in its second run.
	firstSeen := first
	firstSeen.Events = first.Events[:2]
	next := make(chan struct{})
	f := &fakeRuns{followSession: func(ctx context.Context, agent, instance string, fn func(api.Record) bool) error {
		if instance != "u42" {
			return &runs.NotFoundError{ID: api.SessionID(agent, instance)}
		}
		live := ctx.Value(liveKey{}) != nil
		recs := []api.Record{second, closed}
		if live {
			recs = []api.Record{firstSeen, second, closed}
		}
		for i, rec := range recs {
			if i > 0 && live {
				select {
				case <-next:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if fn(rec) {
				return nil
			}
		}
		return nil
	}}
	s := newServer(t, f, Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Live") != "" {
			r = r.WithContext(context.WithValue(r.Context(), liveKey{}, true))
		}
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	streamURL := srv.URL + "/v1/sessions/assistant/u42/stream"

	t.Run("live across continue-as-new", func(t *testing.T) {
		resp, sse := openStream(t, streamURL, map[string]string{"X-Test-Live": "1"})
		// A stream that lacks a message would otherwise wait for it forever.
		watchdog := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
		defer watchdog.Stop()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		read := func(n int) []string {
			var got []string
			for range n {
				m, err := sse.next()
				if err != nil {
					t.Fatalf("read stream: %v after %v", err, got)
				}
				got = append(got, m.event+"#"+m.id)
			}
			return got
		}
		if got := strings.Join(read(3), " "); got != "#1 #2 status#" {
			t.Fatalf("first run: %s", got)
		}
		next <- struct{}{}
		if got := strings.Join(read(5), " "); got != "#3 #4 #5 #6 #7" {
			t.Fatalf("after continue-as-new: %s, want the archived #3 first", got)
		}
		next <- struct{}{}
		got, msgs := collect(t, sse)
		if strings.Join(got, " ") != "#8 status# end#" {
			t.Fatalf("at the close: %s", strings.Join(got, " "))
		}
		var end StreamStatus
		if err := json.Unmarshal([]byte(msgs["end#"].data), &end); err != nil || end.Status != api.StatusDone || end.LastSeq != 8 || end.ID != sessionFixtureID || end.Result != nil {
			t.Errorf("end data %s (%v): want status done, last_seq 8, no result", msgs["end#"].data, err)
		}
	})
	for _, tc := range []struct {
		name   string
		query  string
		header map[string]string
		want   string
	}{
		{"everything", "", nil, "#1 #2 #3 #4 #5 #6 #7 status# #8 status# end#"},
		{"after, from the archive", "?after=1", nil, "#2 #3 #4 #5 #6 #7 status# #8 status# end#"},
		{"Last-Event-ID beats after", "?after=1", map[string]string{"Last-Event-ID": "5"}, "#6 #7 status# #8 status# end#"},
		{"at the end", "?after=8", nil, "status# status# end#"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sse := openStream(t, streamURL+tc.query, tc.header)
			got, msgs := collect(t, sse)
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("messages %q, want %q", strings.Join(got, " "), tc.want)
			}
			for key, m := range msgs {
				if m.event != "" {
					continue
				}
				var ev api.Event
				if err := json.Unmarshal([]byte(m.data), &ev); err != nil || "#"+itoa(ev.Seq) != key {
					t.Errorf("message %s carries %s", key, m.data)
				}
			}
		})
	}

	t.Run("unknown session", func(t *testing.T) {
		resp, _ := openStream(t, srv.URL+"/v1/sessions/assistant/nobody/stream", nil)
		wantProblem(t, resp, 404, `no session of agent "assistant" with instance "nobody"`)
	})
	t.Run("bad offset", func(t *testing.T) {
		resp, _ := openStream(t, streamURL+"?after=-1", nil)
		wantProblem(t, resp, 400, `after "-1"`)
	})
}

type liveKey struct{}

// TestSessionStreamSegmentMissing: an archived segment the gateway cannot read ends the
// stream with a problem saying which and where it looked, after what it could send.
func TestSessionStreamSegmentMissing(t *testing.T) {
	t.Parallel()
	rec := sessionRecord(api.StatusRunning)
	rec.Events = rec.Events[2:] // events 1-2 are archived, in a store the gateway lacks
	rec.Artifacts = []api.Artifact{{Name: "stream-000000001-000000002.jsonl", Size: 100, At: t0}}
	f := &fakeRuns{followSession: func(_ context.Context, _, _ string, fn func(api.Record) bool) error {
		fn(rec)
		return nil
	}}
	srv := httptest.NewServer(newServer(t, f, Options{}))
	defer srv.Close()
	// Reading from 2 on needs no segment.
	_, sse := openStream(t, srv.URL+"/v1/sessions/assistant/u42/stream?after=2", nil)
	if got, _ := collect(t, sse); strings.Join(got, " ") != "#3 status# end#" {
		t.Errorf("after 2: %v", got)
	}
	resp, _ := openStream(t, srv.URL+"/v1/sessions/assistant/u42/stream", nil)
	wantProblem(t, resp, 404, "read archived stream segment stream-000000001-000000002.jsonl of session session:assistant:u42 (the gateway reads the store at artifacts.url")
}

// TestSessionStreamLive: a model call's live text is sent as "live" messages without an
// id (not part of the resumable stream), between the events; the call's text event stays
// as it is.
func TestSessionStreamLive(t *testing.T) {
	t.Parallel()
	rec := sessionRecord(api.StatusRunning)
	rec.Events = rec.Events[:1] // turn 1 has begun
	done := sessionRecord(api.StatusRunning)
	f := &fakeRuns{followSessionLive: func(_ context.Context, _, _ string, fn func(api.Record) bool, live func(api.LiveText)) error {
		if live == nil {
			return errors.New("the session stream asked for no live text")
		}
		fn(rec)
		live(api.LiveText{Call: "1.1", Thinking: &api.LiveThinking{Text: "Greet"}})
		live(api.LiveText{Call: "1.1", Text: "Nice to"})
		live(api.LiveText{Call: "1.1", Thinking: &api.LiveThinking{From: 5, Text: " them."}})
		live(api.LiveText{Call: "1.1", From: 7, Text: " meet you"})
		fn(done)
		return nil
	}}
	srv := httptest.NewServer(newServer(t, f, Options{}))
	defer srv.Close()
	_, sse := openStream(t, srv.URL+"/v1/sessions/assistant/u42/stream", nil)
	var got []string
	var lives, thinks []string
	for {
		m, err := sse.next()
		if err != nil {
			break
		}
		got = append(got, m.event+"#"+m.id)
		switch m.event {
		case "live":
			lives = append(lives, m.data)
		case "live_thinking":
			thinks = append(thinks, m.data)
		}
	}
	if strings.Join(got, " ") != "#1 status# live_thinking# live# live_thinking# live# #2 #3 end#" {
		t.Errorf("messages %q, want the live thinking and text between the events, without ids", strings.Join(got, " "))
	}
	// The data as a client parses it: live text exactly as before live thinking, and
	// live thinking in the same shape.
	wantLive := []string{`{"call":"1.1","from":0,"text":"Nice to"}`, `{"call":"1.1","from":7,"text":" meet you"}`}
	wantThink := []string{`{"call":"1.1","from":0,"text":"Greet"}`, `{"call":"1.1","from":5,"text":" them."}`}
	if strings.Join(lives, "\n") != strings.Join(wantLive, "\n") {
		t.Errorf("live data %q, want %q", lives, wantLive)
	}
	if strings.Join(thinks, "\n") != strings.Join(wantThink, "\n") {
		t.Errorf("live_thinking data %q, want %q", thinks, wantThink)
	}
}

// TestPromptOptionsInterruptSteer: a prompt's max_turns and dir reach the session, bad
// ones are a 400 naming the field; interrupt and steer answer with the turn, and the
// session's refusal (no turn running) is a 409 with its reason.
func TestPromptOptionsInterruptSteer(t *testing.T) {
	t.Parallel()
	var opts []runs.PromptOptions
	busy := true
	refused := func(op string) error {
		return &runs.SessionRefusedError{ID: sessionFixtureID, Op: op, Msg: "session has no turn running (3 turns so far, none in progress): nothing to " + op}
	}
	var steered string
	f := &fakeRuns{
		prompt: func(_ context.Context, _, _, _ string, o runs.PromptOptions) (api.PromptReply, error) {
			opts = append(opts, o)
			return api.PromptReply{Turn: 3, Interrupted: true}, nil
		},
		interrupt: func(_ context.Context, agent, instance string) (api.InterruptReply, error) {
			if !busy {
				return api.InterruptReply{}, refused("interrupt")
			}
			return api.InterruptReply{Turn: 3}, nil
		},
		steer: func(_ context.Context, agent, instance, text string) (api.SteerReply, error) {
			if !busy {
				return api.SteerReply{}, refused("steer")
			}
			steered = text
			return api.SteerReply{Turn: 3}, nil
		},
		get: func(context.Context, string) (api.Record, error) { return sessionRecord(api.StatusRunning), nil },
	}
	s := newServer(t, f, Options{})

	resp := do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/prompt", body: `{"text":"Build.","max_turns":7,"dir":"src/api"}`})
	if body := readBody(t, resp); resp.StatusCode != 200 || !strings.Contains(body, `"interrupted": true`) {
		t.Fatalf("prompt: status %d, body %s; want 200 with interrupted", resp.StatusCode, body)
	}
	if len(opts) != 1 || opts[0].MaxTurns != 7 || opts[0].Dir != "src/api" {
		t.Errorf("Prompt got options %+v, want max_turns 7 and dir src/api", opts)
	}
	for body, detail := range map[string]string{
		`{"text":"x","max_turns":0}`:    "max_turns 0: want a number of model calls from 1 to 1000",
		`{"text":"x","max_turns":1001}`: "max_turns 1001",
		`{"text":"x","dir":"../up"}`:    `dir "../up" leads outside the workspace`,
		`{"text":"x","dir":"/etc"}`:     `dir "/etc" is absolute`,
	} {
		wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/prompt", body: body}), 400, detail)
	}
	if len(opts) != 1 {
		t.Errorf("refused prompts reached the session: %+v", opts)
	}

	resp = do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/interrupt"})
	if body := readBody(t, resp); resp.StatusCode != 200 || !strings.Contains(body, `"turn": 3`) {
		t.Errorf("interrupt: status %d, body %s", resp.StatusCode, body)
	}
	resp = do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/steer", body: `{"text":"Also say hello."}`})
	if body := readBody(t, resp); resp.StatusCode != 200 || !strings.Contains(body, `"turn": 3`) || steered != "Also say hello." {
		t.Errorf("steer: status %d, body %s, steered %q", resp.StatusCode, body, steered)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/steer", body: `{"text":" "}`}), 400, "text is empty")
	busy = false
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/interrupt"}), 409, "refused the interrupt: session has no turn running")
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/sessions/assistant/u42/steer", body: `{"text":"hi"}`}), 409, "refused the steer: session has no turn running")
}
