package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// openSSE opens the event stream at path (any of the gateway's) and fails the test unless
// it is one.
func (g gwClient) openSSE(path string, header map[string]string) *gwStream {
	g.t.Helper()
	req, err := http.NewRequest("GET", g.base+path, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.t.Fatalf("GET %s: status %d %s: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	// A stream that lacks what a test waits for would otherwise block it until go test's
	// own timeout.
	watchdog := time.AfterFunc(2*time.Minute, func() { resp.Body.Close() })
	g.t.Cleanup(func() { watchdog.Stop(); resp.Body.Close() })
	return &gwStream{t: g.t, resp: resp, r: bufio.NewReader(resp.Body)}
}

// turnLog is what a session's activity stream showed, turn by turn.
type turnLog struct {
	prompt string
	text   []string // the text events' contents, in order
	// live is the live text (the "live" messages, applied at their offsets) before the
	// turn's text event.
	live  string
	lives int
	// thinking is the live thinking ("live_thinking" messages, applied the same way);
	// thoughts the thinking events' contents.
	thinking string
	thinks   int
	thoughts []string
	ended    bool
	err      string
}

// streamLog reads a session's activity stream into turns and the seqs it carried.
type streamLog struct {
	t     testing.TB
	turns []*turnLog
	seqs  []int64
	types []string
}

func (l *streamLog) add(m sseMessage) {
	if (m.event == "live" || m.event == "live_thinking") && m.id == "" && len(l.turns) > 0 {
		var lt api.LiveText
		if err := json.Unmarshal([]byte(m.data), &lt); err != nil {
			l.t.Fatalf("%s message %s: %v", m.event, m.data, err)
		}
		if lt.Thinking != nil {
			l.t.Errorf("%s message %s carries a thinking part; live thinking is an event of its own", m.event, m.data)
		}
		tl := l.turns[len(l.turns)-1]
		shown, n := &tl.live, &tl.lives
		if m.event == "live_thinking" {
			shown, n = &tl.thinking, &tl.thinks
		}
		if lt.From > len(*shown) {
			l.t.Errorf("%s %+v leaves a gap after %q", m.event, lt, *shown)
			return
		}
		*shown = (*shown)[:lt.From] + lt.Text
		*n++
		return
	}
	if m.event != "" {
		return
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil || fmt.Sprint(ev.Seq) != m.id {
		l.t.Fatalf("stream message id %s carries %s (%v)", m.id, m.data, err)
	}
	l.seqs = append(l.seqs, ev.Seq)
	l.types = append(l.types, ev.Type)
	var d struct {
		Text    string `json:"text"`
		Content string `json:"content"`
		Error   string `json:"error"`
		Turn    int    `json:"turn"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	cur := func() *turnLog {
		if len(l.turns) == 0 {
			l.t.Fatalf("event %d (%s) before any user_input", ev.Seq, ev.Type)
		}
		return l.turns[len(l.turns)-1]
	}
	switch ev.Type {
	case api.StreamUserInput:
		if d.Turn != len(l.turns)+1 {
			l.t.Errorf("user_input of turn %d after %d turns", d.Turn, len(l.turns))
		}
		l.turns = append(l.turns, &turnLog{prompt: d.Text})
	case api.StreamText:
		cur().text = append(cur().text, d.Content)
	case api.StreamThinking:
		cur().thoughts = append(cur().thoughts, d.Content)
	case api.StreamTurnEnd:
		cur().ended, cur().err = true, d.Error
	}
}

func (l *streamLog) ended() int {
	n := 0
	for _, t := range l.turns {
		if t.ended {
			n++
		}
	}
	return n
}

// contiguous reports whether the seqs run 1, 2, 3, ... without a gap or a repeat.
func (l *streamLog) contiguous() bool {
	for i, s := range l.seqs {
		if s != int64(i+1) {
			return false
		}
	}
	return true
}

// TestGatewaySession: a session driven over HTTP only. Two prompts: the second request
// to the model carries the first turn. The activity stream, followed over SSE, shows each
// turn's user_input, its text (one event with the reply; while the model writes, live
// messages with the text so far), the model's thinking (likewise: live_thinking messages,
// then one thinking event) and its turn_end, live; closing the session ends the stream.
func TestGatewaySession(t *testing.T) {
	t.Parallel()
	const secondThought = "They told me in turn 1."
	model := fakellm.New(
		fakellm.Reply{Content: "Nice to meet you, Mac. How can I help today?", ChunkDelayMS: 20},
		fakellm.Reply{Content: "Your name is Mac, as you told me.", ChunkDelayMS: 250, Reasoning: secondThought},
		fakellm.Reply{Content: "Still Mac."},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	g := gateway(t, p)
	const path = "/v1/sessions/assistant/u42"

	prompt := func(text string) api.PromptReply {
		t.Helper()
		var r api.PromptReply
		b := g.must(http.StatusOK, "POST", path+"/prompt", map[string]string{"text": text})
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("prompt answered %s", b)
		}
		return r
	}
	if r := prompt("My name is Mac."); r.Turn != 1 || r.Reply != "Nice to meet you, Mac. How can I help today?" {
		t.Fatalf("first prompt: %+v", r)
	}

	// Follow the stream from the start: turn 1 is replayed, turn 2 arrives live.
	stream := g.openSSE(path+"/stream", nil)
	log := &streamLog{t: t}
	stream.until("turn 1's turn_end", func(sseMessage) bool { return log.ended() == 1 }, log.add)

	if r := prompt("What is my name?"); r.Turn != 2 || r.Reply != "Your name is Mac, as you told me." {
		t.Fatalf("second prompt: %+v", r)
	}
	var second *fakellm.Request
	for _, req := range model.Requests() {
		if u := userMessages(req); len(u) > 0 && u[len(u)-1] == "What is my name?" {
			second = &req
		}
	}
	if second == nil || !slices.Equal(userMessages(*second), []string{"My name is Mac.", "What is my name?"}) {
		t.Fatalf("the second prompt's model request = %+v, want the first turn carried", second)
	}
	stream.until("turn 2's turn_end", func(sseMessage) bool { return log.ended() == 2 }, log.add)

	for i, want := range []struct{ prompt, reply string }{
		{"My name is Mac.", "Nice to meet you, Mac. How can I help today?"},
		{"What is my name?", "Your name is Mac, as you told me."},
	} {
		tl := log.turns[i]
		if tl.prompt != want.prompt || len(tl.text) != 1 || tl.text[0] != want.reply || tl.err != "" {
			t.Errorf("turn %d streamed prompt %q, text events %q (error %q); want %q and the reply once %q",
				i+1, tl.prompt, tl.text, tl.err, want.prompt, want.reply)
		}
	}
	// Turn 2 was written while the stream was open: its live text grew as the model wrote.
	if tl := log.turns[1]; tl.lives < 2 || tl.live == "" || !strings.HasPrefix(tl.text[0], tl.live) {
		t.Errorf("turn 2's live text: %d messages, %q; want it growing, a start of the reply", tl.lives, tl.live)
	}
	if tl := log.turns[0]; tl.lives != 0 || tl.thinks != 0 {
		t.Errorf("turn 1 (replayed) came with %d live and %d live_thinking messages, want none: they are not part of the stream", tl.lives, tl.thinks)
	}
	// Its thinking too, as live_thinking messages before its one thinking event.
	if tl := log.turns[1]; tl.thinks < 2 || tl.thinking == "" || !strings.HasPrefix(secondThought, tl.thinking) ||
		!slices.Equal(tl.thoughts, []string{secondThought}) {
		t.Errorf("turn 2's live thinking: %d messages, %q, thinking events %q; want it growing, a start of %q, then one event with all of it",
			tl.thinks, tl.thinking, tl.thoughts, secondThought)
	}
	if !log.contiguous() {
		t.Errorf("stream seqs %v, want 1, 2, 3, ... (types %v)", log.seqs, log.types)
	}

	var view api.SessionView
	if err := json.Unmarshal(g.must(200, "GET", path, nil), &view); err != nil || len(view.Turns) != 2 ||
		view.Turns[1].Reply != "Your name is Mac, as you told me." || view.StreamOffset != log.seqs[len(log.seqs)-1] {
		t.Errorf("GET %s = %+v (%v)", path, view, err)
	}
	if list := string(g.must(200, "GET", "/v1/sessions", nil)); !strings.Contains(list, `"id": "session:assistant:u42"`) {
		t.Errorf("GET /v1/sessions does not list the session:\n%s", list)
	}

	// Closing ends the stream; a second close is a conflict; a prompt reopens it.
	g.must(http.StatusOK, "POST", path+"/close", nil)
	m := stream.until("the end", func(m sseMessage) bool { return m.event == "end" }, log.add)
	if st := statusOf(t, m); st.Status != api.StatusDone {
		t.Errorf("end event %s, want done", m.data)
	}
	if _, err := stream.next(); err != io.EOF {
		t.Errorf("after end: %v, want the server to close the stream", err)
	}
	if status, b := g.call("POST", path+"/close", nil); status != http.StatusConflict || !strings.Contains(string(b), "is not open (done)") {
		t.Errorf("second close: %d %s", status, b)
	}
	if r := prompt("Still there?"); r.Turn != 3 || r.Reply != "Still Mac." {
		t.Errorf("prompt to the closed session: %+v, want it reopened with its thread (turn 3)", r)
	}

	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		detail       string
	}{
		{"GET", "/v1/sessions/assistant/nobody", nil, 404, `no session of agent "assistant" with instance "nobody"`},
		{"GET", "/v1/sessions/assistant/nobody/stream", nil, 404, `no session of agent "assistant" with instance "nobody"`},
		{"POST", path + "/prompt", map[string]string{"text": " "}, 400, "text is empty"},
		{"POST", "/v1/sessions/assistant/a:b/prompt", map[string]string{"text": "hi"}, 400, `instance id "a:b"`},
		{"POST", "/v1/sessions/ghost/u1/prompt", map[string]string{"text": "hi"}, 404, `no agent "ghost" is configured on this worker`},
	} {
		status, b := g.call(tc.method, tc.path, tc.body)
		var prob struct{ Detail string }
		if err := json.Unmarshal(b, &prob); err != nil || status != tc.status || !strings.Contains(prob.Detail, tc.detail) {
			t.Errorf("%s %s: %d %s; want a %d problem with %q", tc.method, tc.path, status, b, tc.status, tc.detail)
		}
	}
}

// TestGatewaySessionStreamAcrossContinueAsNew: a session that continues as new after
// every turn. One SSE stream, opened after the first turn, replays it from the archived
// segment and follows the session through two more continue-as-new runs: every event
// once, in order.
func TestGatewaySessionStreamAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	model := fakellm.New(
		fakellm.Reply{Content: "one done"},
		fakellm.Reply{Content: "two done", ChunkDelayMS: 10},
		fakellm.Reply{Content: "three done"},
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	g := gateway(t, p)
	const path = "/v1/sessions/assistant/can"
	p.ok("session", "prompt", "assistant", "can", "one", "--continue-after-turns", "1")

	stream := g.openSSE(path+"/stream?after=0", nil)
	log := &streamLog{t: t}
	stream.until("turn 1 (archived)", func(sseMessage) bool { return log.ended() == 1 }, log.add)
	for _, text := range []string{"two", "three"} {
		g.must(http.StatusOK, "POST", path+"/prompt", map[string]string{"text": text})
	}
	stream.until("turn 3", func(sseMessage) bool { return log.ended() == 3 }, log.add)

	var view api.SessionView
	if err := json.Unmarshal(g.must(200, "GET", path, nil), &view); err != nil || view.Runs < 3 {
		t.Fatalf("session view: %+v (%v); want at least 3 runs (it continued as new)", view, err)
	}
	for i, want := range []struct{ prompt, reply string }{{"one", "one done"}, {"two", "two done"}, {"three", "three done"}} {
		tl := log.turns[i]
		if tl.prompt != want.prompt || strings.Join(tl.text, "") != want.reply {
			t.Errorf("turn %d streamed %q / %q, want %q / %q", i+1, tl.prompt, tl.text, want.prompt, want.reply)
		}
	}
	if !log.contiguous() {
		t.Errorf("stream seqs %v, want 1, 2, 3, ... across the runs (types %v)", log.seqs, log.types)
	}

	// A reconnecting client resumes after its Last-Event-ID, from the archive.
	resumeAfter := view.Turns[0].LastSeq
	resumed := g.openSSE(path+"/stream", map[string]string{"Last-Event-ID": fmt.Sprint(resumeAfter)})
	m, err := resumed.next()
	if err != nil {
		t.Fatal(err)
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil || ev.Seq != resumeAfter+1 || ev.Type != log.types[resumeAfter] {
		t.Errorf("resumed stream starts with %s, want event %d (%s)", m.data, resumeAfter+1, log.types[resumeAfter])
	}
}

// TestGatewaySessionPage drives the session page in headless Chromium: a prompt typed
// into a new session's box creates it, and the turn is drawn live from the activity
// stream: the tool call's start and update merged into one entry, the model's thinking
// drawn live (muted and italic) while the fake model holds the reply back, then the reply
// (a model's <script> in it) as text, the turn closed by turn_end, the thinking shown
// once. A second turn's write waits for
// approval: the page shows the call and approves it. A reload shows the turns rendered by
// the server, still as text.
func TestGatewaySessionPage(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser test")
	}
	reply := `Nothing here but <script>alert("xss from the model")</script> and <img src=x onerror="alert('img')">.`
	const thought = "The glob found nothing, so I say so plainly."
	model := fakellm.New(
		fakellm.Reply{Content: "Let me look.", ToolCalls: []fakellm.Call{{Name: "glob", Arguments: json.RawMessage(`{"pattern":"**/*"}`)}}},
		fakellm.Reply{Content: reply, ChunkDelayMS: 30, Reasoning: thought, Hold: "page"},
		fakellm.Reply{Content: "I will write it down.", ToolCalls: []fakellm.Call{writeNotes("nothing found")}},
		fakellm.Reply{Content: "Written to notes.md."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake}
agents:
  - name: looker
    permissions: {mode: approve}
    sandbox: {type: virtual}
`)
	p.start()
	base := fmt.Sprintf("http://127.0.0.1:%d", p.gateway)

	browser, ctx, dialogs := openBrowser(t, chrome, 1100, 900)
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return v
	}

	// The page is ready for input once its script (deferred) has run.
	ready := chromedp.Poll[chromedp.Void](`document.readyState === "complete"`)
	pageText := func() string {
		dctx, dcancel := context.WithTimeout(browser, 5*time.Second)
		defer dcancel()
		body, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		return body
	}
	turn := `li.turn[data-turn="1"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/sessions?agent=looker&instance=web"), // the open form
		ready,
		chromedp.SendKeys(chromedp.ID("prompt-text"), "Look around."),
		chromedp.Click(chromedp.ID("send")),
		// Live thinking: the whole reasoning in the turn's thinking block while the model
		// holds its reply.
		chromedp.Poll[chromedp.Void](`(document.querySelector('`+turn+` .text.thinking') || {}).textContent === `+strconv.Quote(thought)),
	); err != nil {
		t.Fatalf("live thinking on the session page: %v\npage: %s\nworker:\n%s", err, pageText(), p.output())
	}
	style, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function () {
		const b = document.querySelector('`+turn+` .text.thinking'), li = document.querySelector('`+turn+`');
		return getComputedStyle(b).fontStyle + " " + li.classList.contains("done");
	})()`))
	if err != nil || style != "italic false" {
		t.Errorf("live thinking block: style and turn done %q (%v), want italic while the turn is still written", style, err)
	}
	model.Release("page")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(turn+".done"))); err != nil {
		t.Fatalf("prompt on the session page: %v\npage: %s\nworker:\n%s", err, pageText(), p.output())
	}
	thinking, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('`+turn+` .text.thinking'), (b) => b.textContent)`))
	if err != nil || len(thinking) != 1 || thinking[0] != thought {
		t.Errorf("thinking blocks after the turn %q (%v), want the reasoning once: %q", thinking, err, thought)
	}
	if got := text("#status"); got != "running" {
		t.Errorf("status badge %q, want running (the prompt created the session)", got)
	}
	if got := text(turn + " .said.you"); !strings.Contains(got, "Look around.") {
		t.Errorf("the turn's prompt shows %q", got)
	}
	agentSaid := text(turn + " .said.agent")
	if !strings.Contains(agentSaid, "Let me look.") || !strings.Contains(agentSaid, reply) {
		t.Errorf("the turn drawn live shows %q; want the text of both model calls, markup as text", agentSaid)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('li.turn[data-turn="1"] details.tool').length`))
	if err != nil || n != 1 {
		t.Errorf("tool call entries = %d (%v), want 1: the start and the update merged by id", n, err)
	}
	if got := text(turn + ` details.tool[data-status="completed"] summary`); !strings.Contains(got, "glob completed") {
		t.Errorf("the tool call entry says %q, want glob completed", got)
	}

	// Turn 2 writes a file, which needs approval: the page shows the call live.
	turn2 := `li.turn[data-turn="2"]`
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("prompt-text"), "Write it down."),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.ID("pending")),
	); err != nil {
		t.Fatalf("the pending approval does not show: %v\npage: %s\nworker:\n%s", err, pageText(), p.output())
	}
	if tool, args, status := text("#pending-tool"), text("#pending-json"), text("#status"); tool != "write_file" || !strings.Contains(args, `"path": "notes.md"`) || status != "suspended" {
		t.Errorf("pending box: tool %q, args %q, status %q; want write_file on notes.md, suspended", tool, args, status)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS(turn2+".done")),
	); err != nil {
		t.Fatalf("approve on the session page: %v\npage: %s\nworker:\n%s", err, pageText(), p.output())
	}
	if got := text(turn2 + " .said.agent"); !strings.Contains(got, "approved by local") || !strings.Contains(got, "Written to notes.md.") {
		t.Errorf("turn 2 shows %q; want the approval and the reply", got)
	}
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("pending").hidden`)); err != nil || !hidden {
		t.Errorf("the pending box is still shown after the decision (%v)", err)
	}

	// The server renders the finished turns the same way, as text.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/sessions/looker/web"), chromedp.WaitVisible(chromedp.CSS(turn2+".done"))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := text(turn + " .said.agent"); !strings.Contains(got, reply) {
		t.Errorf("the server-rendered turn shows %q, want the reply as text", got)
	}
	if d := dialogs(); len(d) > 0 {
		t.Errorf("the page ran a model's markup: dialogs %q", d)
	}
}

// TestGatewaySessionPageSteerAndInterrupt: the session page draws, live, a message steered
// into the running turn where its next model call took it, and marks a turn an interrupt
// ended (turn_end with interrupted: true) as interrupted, not failed; the server renders
// the interrupted turn the same way after a reload.
func TestGatewaySessionPageSteerAndInterrupt(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser test")
	}
	const steer = `Also say <b>hello</b>.`
	model := fakellm.New(
		fakellm.Reply{Content: "Hi."}, // turn 1
		fakellm.Reply{Content: "Looking.", ToolCalls: []fakellm.Call{{Name: "glob", Arguments: json.RawMessage(`{"pattern":"*"}`)}}, Hold: "steer"},
		fakellm.Reply{Content: "Nothing here, and hello."},          // turn 2, after the steer
		fakellm.Reply{Content: "This never arrives.", Hold: "stop"}, // turn 3, interrupted
	)
	model.Index = fakellm.BySequence
	t.Cleanup(func() { model.Release("steer"); model.Release("stop") })
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)))
	p.start()
	g := gateway(t, p)
	const path = "/v1/sessions/assistant/steer"
	id := api.SessionID("assistant", "steer")
	g.must(http.StatusOK, "POST", path+"/prompt", map[string]string{"text": "Hello."})

	browser, ctx, dialogs := openBrowser(t, chrome, 1100, 900)
	pageText := func() string {
		dctx, dcancel := context.WithTimeout(browser, 5*time.Second)
		defer dcancel()
		body, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		return body
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/sessions/assistant/steer", p.gateway)),
		chromedp.Poll[chromedp.Void](`document.getElementById("live").textContent === "● live"`),
	); err != nil {
		t.Fatalf("open the session page: %v\npage: %s", err, pageText())
	}

	// Turn 2: steered while its first model call is held.
	prompted := make(chan int, 2)
	go func() {
		status, _ := g.call("POST", path+"/prompt", map[string]string{"text": "Look around."})
		prompted <- status
	}()
	pollUntil(t, time.Minute, "turn 2's first model call in flight", func(context.Context) error {
		if n := len(model.Requests()); n != 2 {
			return fmt.Errorf("model requests = %d, want 2", n)
		}
		return nil
	})
	steered := make(chan int, 1)
	go func() {
		status, _ := g.call("POST", path+"/steer", map[string]string{"text": steer})
		steered <- status
	}()
	waitUpdateAccepted(t, p.dial(), id, api.UpdateSteer)
	model.Release("steer")
	turn2 := `li.turn[data-turn="2"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(turn2+".done"))); err != nil {
		t.Fatalf("turn 2 on the page: %v\npage: %s\nworker:\n%s", err, pageText(), p.output())
	}
	if s := <-steered; s != http.StatusOK {
		t.Errorf("steer answered %d, want 200", s)
	}
	if s := <-prompted; s != http.StatusOK {
		t.Errorf("turn 2's prompt answered %d, want 200", s)
	}
	blocks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('`+turn2+` .said.agent .blocks > *'), (b) => b.className + ": " + b.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	steerAt, toolAt, replyAt := -1, -1, -1
	for i, b := range blocks {
		switch {
		case b == "steer: you, while it ran"+steer:
			steerAt = i
		case strings.HasPrefix(b, "tool: "):
			toolAt = i
		case b == "text: Nothing here, and hello.":
			replyAt = i
		}
	}
	if steerAt < 0 || toolAt < 0 || replyAt < 0 || !(toolAt < steerAt && steerAt < replyAt) {
		t.Errorf("turn 2's blocks %q; want the tool call, then the steered message (as text), then the reply", blocks)
	}

	// Turn 3: interrupted while its model call is held.
	go func() {
		status, _ := g.call("POST", path+"/prompt", map[string]string{"text": "Think forever."})
		prompted <- status
	}()
	pollUntil(t, time.Minute, "turn 3's model call in flight", func(context.Context) error {
		if n := len(model.Requests()); n != 4 {
			return fmt.Errorf("model requests = %d, want 4", n)
		}
		return nil
	})
	g.must(http.StatusOK, "POST", path+"/interrupt", nil)
	turn3 := `li.turn[data-turn="3"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(turn3+".done.interrupted"))); err != nil {
		t.Fatalf("turn 3 marked interrupted: %v\npage: %s\nworker:\n%s", err, pageText(), p.output())
	}
	<-prompted
	check := func(when string) {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function () {
			const li = document.querySelector('`+turn3+`');
			return li.className + " | " + li.querySelector(".said.agent").textContent.trim() + " | " + li.querySelector(".meta").textContent;
		})()`))
		if err != nil || !strings.Contains(got, "interrupted before its answer") || strings.Contains(got, "failed") || !strings.Contains(got, "· interrupted") {
			t.Errorf("%s: turn 3 shows %q (%v); want it marked interrupted, not failed", when, got, err)
		}
	}
	check("live")
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(turn3+".done"))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	check("server-rendered")
	if d := dialogs(); len(d) > 0 {
		t.Errorf("the page ran markup: dialogs %q", d)
	}
}
