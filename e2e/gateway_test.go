package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// gwClient talks to a gateway over HTTP as any application would.
type gwClient struct {
	t     testing.TB
	base  string // http://host:port
	token string
}

// gateway returns a client of the gateway the platform's `worker --dev` serves (on the free
// port newPlatform picked).
func gateway(t testing.TB, p *platform) gwClient {
	return gwClient{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", p.gateway)}
}

// call sends a request (body: JSON-encoded unless it is a string) and returns the status
// and the body.
func (g gwClient) call(method, path string, body any) (int, []byte) {
	g.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			g.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, g.base+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// must calls and fails the test unless the status is want.
func (g gwClient) must(want int, method, path string, body any) []byte {
	g.t.Helper()
	status, b := g.call(method, path, body)
	if status != want {
		g.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	return b
}

func (g gwClient) startRun(workflow string, input any) string {
	g.t.Helper()
	var created struct{ ID string }
	b := g.must(http.StatusCreated, "POST", "/v1/runs", map[string]any{"workflow": workflow, "input": input})
	if err := json.Unmarshal(b, &created); err != nil || created.ID == "" {
		g.t.Fatalf("POST /v1/runs answered %s", b)
	}
	return created.ID
}

// sseMessage is one message of an event stream, with when it arrived.
type sseMessage struct {
	id, event, data string
	at              time.Time
}

// gwStream is an open event stream of a run.
type gwStream struct {
	t    testing.TB
	resp *http.Response
	r    *bufio.Reader
}

// stream opens the event stream of run id.
func (g gwClient) stream(id string, header map[string]string) *gwStream {
	g.t.Helper()
	return g.openSSE("/v1/runs/"+id+"/events", header)
}

// next returns the next message, or io.EOF when the server ended the stream.
func (s *gwStream) next() (sseMessage, error) {
	var m sseMessage
	has := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return m, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && has:
			m.at = time.Now()
			return m, nil
		case strings.HasPrefix(line, "id: "):
			m.id, has = line[4:], true
		case strings.HasPrefix(line, "event: "):
			m.event, has = line[7:], true
		case strings.HasPrefix(line, "data: "):
			m.data, has = line[6:], true
		}
	}
}

// until reads messages until one satisfies stop (returned) or the stream ends (fatal).
func (s *gwStream) until(what string, stop func(sseMessage) bool, seen func(sseMessage)) sseMessage {
	s.t.Helper()
	for {
		m, err := s.next()
		if err != nil {
			s.t.Fatalf("event stream ended (%v) before %s", err, what)
		}
		if seen != nil {
			seen(m)
		}
		if stop(m) {
			return m
		}
	}
}

type gwStatus struct {
	Status  api.Status `json:"status"`
	LastSeq int64      `json:"last_seq"`
	Pending *struct {
		Kind   string          `json:"kind"`
		CallID string          `json:"call_id"`
		Tool   string          `json:"tool"`
		Args   json.RawMessage `json:"args"`
		Reason string          `json:"reason"`
	} `json:"pending"`
}

func statusOf(t testing.TB, m sseMessage) gwStatus {
	t.Helper()
	var st gwStatus
	if err := json.Unmarshal([]byte(m.data), &st); err != nil {
		t.Fatalf("%s data %q: %v", m.event, m.data, err)
	}
	return st
}

// TestGatewayDocumentApproval: the end-to-end flow over HTTP only: start a
// DocumentApproval run, follow its event stream to the suspension, approve it, and see
// it done on the same stream; the record is byte for byte `starter show --json`.
func TestGatewayDocumentApproval(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	g := gateway(t, p)
	p.start()
	if !strings.Contains(p.output(), "Nexo HTTP API and web page: "+g.base+"/") {
		t.Fatalf("worker --dev does not say where the gateway is:\n%s", p.output())
	}

	id := g.startRun("DocumentApproval", map[string]string{"doc_id": "42"})
	stream := g.stream(id, nil)
	var seqs []string
	events := func(m sseMessage) {
		if m.event == "" {
			seqs = append(seqs, m.id)
		}
	}
	m := stream.until("the suspension", func(m sseMessage) bool {
		return m.event == "status" && statusOf(t, m).Status == api.StatusSuspended
	}, events)
	st := statusOf(t, m)
	if st.Pending == nil || st.Pending.CallID != "suspend" || st.Pending.Reason != "awaiting approval" {
		t.Fatalf("suspended status event = %s, want it to say the run waits for call \"suspend\"", m.data)
	}

	var accepted struct {
		Message string
		By      string
	}
	b := g.must(http.StatusAccepted, "POST", "/v1/runs/"+id+"/approvals/suspend", map[string]any{"approved": true, "by": "ada"})
	if err := json.Unmarshal(b, &accepted); err != nil || !strings.Contains(accepted.Message, "approved run "+id) || accepted.By != "ada" {
		t.Fatalf("approval answered %s", b)
	}
	m = stream.until("the end", func(m sseMessage) bool { return m.event == "end" }, events)
	if st := statusOf(t, m); st.Status != api.StatusDone {
		t.Fatalf("end event = %s, want done", m.data)
	}
	if _, err := stream.next(); err != io.EOF {
		t.Errorf("after end: %v, want the server to close the stream", err)
	}

	rec := p.record(id)
	if got := strings.Join(seqs, ","); got != joinSeqs(rec) {
		t.Errorf("the stream delivered events %s, the record has %s", got, joinSeqs(rec))
	}
	var res map[string]any
	_ = json.Unmarshal(rec.Result, &res)
	if rec.Status != api.StatusDone || res["approver"] != "ada" {
		t.Errorf("status %s, result %s", rec.Status, rec.Result)
	}
	if got, want := string(g.must(200, "GET", "/v1/runs/"+id, nil)), p.ok("show", id, "--json"); got != want {
		t.Errorf("GET /v1/runs/{id} differs from starter show --json:\n%s\nwant\n%s", got, want)
	}
	var evs []api.Event
	if err := json.Unmarshal(g.must(200, "GET", "/v1/runs/"+id+"/events?after=2", nil), &evs); err != nil || len(evs) != len(rec.Events)-2 || evs[0].Seq != 3 {
		t.Errorf("events after 2 = %+v (%v)", evs, err)
	}
	// A resumed stream of a closed run sends what was missed, then ends.
	resumed := g.stream(id, map[string]string{"Last-Event-ID": fmt.Sprint(len(rec.Events) - 1)})
	if m, _ := resumed.next(); m.id != fmt.Sprint(len(rec.Events)) {
		t.Errorf("resumed stream starts with %+v, want the last event", m)
	}

	status, b := g.call("POST", "/v1/runs/"+id+"/approvals/suspend", map[string]any{"approved": true})
	if status != http.StatusConflict || !strings.Contains(string(b), "is not suspended (done)") {
		t.Errorf("second approval: %d %s, want 409 not suspended (done)", status, b)
	}
	if status, b := g.call("GET", "/v1/runs/no-such-run", nil); status != 404 || !strings.Contains(string(b), "no run no-such-run") {
		t.Errorf("unknown run: %d %s", status, b)
	}
	list := string(g.must(200, "GET", "/v1/runs?status=done&workflow=DocumentApproval", nil))
	if !strings.Contains(list, id) {
		t.Errorf("GET /v1/runs?status=done does not list %s:\n%s", id, list)
	}
}

func joinSeqs(rec api.Record) string {
	s := make([]string, len(rec.Events))
	for i, e := range rec.Events {
		s[i] = fmt.Sprint(e.Seq)
	}
	return strings.Join(s, ",")
}

// TestGatewayStarterServeWithTokens: `starter serve` against the platform, with tokens:
// scopes are enforced, and an approval records the token's name, never its secret.
func TestGatewayStarterServeWithTokens(t *testing.T) {
	t.Parallel()
	const (
		opSecret  = "operator-e2e-secret-0123456789"
		appSecret = "approver-e2e-secret-0123456789"
	)
	p := newPlatform(t)
	p.writeConfig(`gateway:
  tokens:
    - {name: ops, token_env: NEXO_TEST_OPS_TOKEN, scopes: [read, operate]}
    - {name: lead, token_env: NEXO_TEST_LEAD_TOKEN, scopes: [read, approve]}
`)
	p.extraEnv = append(p.extraEnv, "NEXO_TEST_OPS_TOKEN="+opSecret, "NEXO_TEST_LEAD_TOKEN="+appSecret)
	p.start()

	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bins.starter, "serve", "--addr", addr)
	serve.Dir, serve.Env = p.dir, p.env()
	serve.Cancel = func() error { return serve.Process.Signal(os.Interrupt) }
	var out lockedBuffer
	serve.Stdout, serve.Stderr = &out, &out
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = serve.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Nexo HTTP API and web page: http://"+addr+"/") {
		if time.Now().After(deadline) {
			t.Fatalf("starter serve did not come up:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "ops (read, operate), lead (read, approve)") {
		t.Errorf("starter serve does not say which tokens it accepts:\n%s", out.String())
	}
	// A process of the same user (a shell in a local sandbox) cannot read the tokens from
	// serve's environment: serve took them into memory and is not dumpable.
	peek, _ := exec.Command("sh", "-c", fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ 2>&1", serve.Process.Pid)).CombinedOutput()
	if strings.Contains(string(peek), opSecret) || strings.Contains(string(peek), appSecret) {
		t.Errorf("a child process read a gateway token from /proc/<serve pid>/environ:\n%s", peek)
	}
	if os.Geteuid() != 0 && !strings.Contains(string(peek), "Permission denied") {
		t.Errorf("serve's /proc/<pid>/environ is readable by its user's other processes (not dumpable?):\n%s", peek)
	}

	anon := gwClient{t: t, base: "http://" + addr}
	ops := gwClient{t: t, base: anon.base, token: opSecret}
	lead := gwClient{t: t, base: anon.base, token: appSecret}
	if status, b := anon.call("GET", "/v1/runs", nil); status != 401 {
		t.Errorf("no token: %d %s", status, b)
	}
	id := ops.startRun("DocumentApproval", map[string]string{"doc_id": "7"})
	if status, b := lead.call("POST", "/v1/runs", map[string]any{"workflow": "DocumentApproval"}); status != 403 || !strings.Contains(string(b), "token lead lacks scope operate") {
		t.Errorf("lead starting a run: %d %s", status, b)
	}
	p.waitStatus(id, api.StatusSuspended)
	if status, b := ops.call("POST", "/v1/runs/"+id+"/approvals/suspend", map[string]any{"approved": true}); status != 403 || !strings.Contains(string(b), "lacks scope approve") {
		t.Errorf("ops approving: %d %s", status, b)
	}
	lead.must(http.StatusAccepted, "POST", "/v1/runs/"+id+"/approvals/suspend", map[string]any{"approved": false, "reason": "typos", "by": "grace"})
	rec := p.waitStatus(id, api.StatusDone)
	record := p.ok("show", id, "--json")
	if !strings.Contains(record, "lead (grace)") {
		t.Errorf("the decision does not record the token's name and the person:\n%s", record)
	}
	if strings.Contains(record, appSecret) || strings.Contains(out.String(), appSecret) || strings.Contains(p.output(), appSecret) {
		t.Error("a token's secret leaked into the record or a log")
	}
	_ = rec
}

// lockedBuffer is an io.Writer safe for a process's output and a test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGatewaySSELatency measures how long an event takes from being recorded (its "at",
// the workflow task's time) to reaching an event-stream client, over an agent run of
// several tool-call turns against the fake model. It logs the median.
func TestGatewaySSELatency(t *testing.T) {
	slowTest(t)
	const turns = 8
	script := make([]fakellm.Reply, 0, turns+1)
	for range turns {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "glob", Arguments: json.RawMessage(`{"pattern":"**/*"}`)}}})
	}
	script = append(script, fakellm.Reply{Content: "done"})
	model := fakellm.New(script...)
	p := newPlatform(t)
	g := gateway(t, p)
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake}
agents:
  - name: globber
    permissions: {mode: read_only}
    sandbox: {type: virtual}
    max_turns: 20
`)
	p.start()
	id := g.startRun(api.WorkflowAgentRun, map[string]any{"agent": "globber", "prompt": "look around"})
	stream := g.stream(id, nil)
	var lat []time.Duration
	stream.until("the end", func(m sseMessage) bool { return m.event == "end" }, func(m sseMessage) {
		if m.event != "" {
			return
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatalf("event %q: %v", m.data, err)
		}
		lat = append(lat, m.at.Sub(ev.At))
	})
	if len(lat) < 20 {
		t.Fatalf("only %d events streamed, want at least 20", len(lat))
	}
	med := median(append([]time.Duration(nil), lat...))
	t.Logf("SSE delivery latency (event recorded -> client received) over %d events: median %.1f ms, p90 %.1f ms, max %.1f ms",
		len(lat), ms(med), ms(pct(append([]time.Duration(nil), lat...), 0.9)), ms(pct(append([]time.Duration(nil), lat...), 1)))
	if med > 2*time.Second {
		t.Errorf("median SSE latency %v: events are not streamed live", med)
	}
}

// openBrowser starts headless Chromium at chrome with a w×h window. It returns the browser's
// context (no deadline: the page can still be read after a step timed out), a context for
// the test's steps (90 s), and a function returning the messages of the JavaScript dialogs
// the page opened (each accepted as it opened; a test expects none).
func openBrowser(t *testing.T, chrome string, w, h int) (browser, ctx context.Context, dialogs func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.WindowSize(w, h))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root without it
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	// The browser lives as long as the context of the first Run: start it without the
	// step timeout.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	ctx, cancel := context.WithTimeout(browser, 90*time.Second)
	t.Cleanup(cancel)
	var (
		mu     sync.Mutex
		opened []string
	)
	go func() {
		for ev, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			mu.Lock()
			opened = append(opened, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return browser, ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(opened)
	}
}

// chromiumPath finds a Chromium or Chrome binary for the browser test.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestGatewayBrowserApproval drives the web page in headless Chromium: the run page shows
// the pending write_file call with its arguments (and an earlier tool result carrying a
// <script>, shown as text: no dialog opens), a click on Approve lets the run finish, and
// the page follows it to done. NEXO_UPDATE_SCREENSHOT=1 saves the screenshot of the
// pending approval as docs/approvals-page.png.
func TestGatewayBrowserApproval(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser test")
	}
	haiku := "Durable by design:\nthe worker may fall, the run\nwaits for your yes.\n"
	readDraft := fakellm.Call{Name: "read_file", Arguments: json.RawMessage(`{"path":"draft.html"}`)}
	model := fakellm.New(
		fakellm.Reply{Content: "Let me read the draft first.", ToolCalls: []fakellm.Call{readDraft}},
		fakellm.Reply{Content: "I will write the haiku to notes.md.", ToolCalls: []fakellm.Call{writeNotes(haiku)}},
		fakellm.Reply{Content: "I wrote a haiku to notes.md."},
	)
	p := newPlatform(t)
	g := gateway(t, p)
	p.writeConfig(agentConfig(model.Start(t)))
	p.extraEnv = append(p.extraEnv, "NEXO_TEST_LLM_KEY=sk-test")
	if err := os.MkdirAll(filepath.Join(p.dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	xss := `<script>alert("xss from a tool result")</script><img src=x onerror="alert('img')">`
	if err := os.WriteFile(filepath.Join(p.dir, "workspace", "draft.html"), []byte(xss), 0o644); err != nil {
		t.Fatal(err)
	}
	p.start()
	id := g.startRun(api.WorkflowAgentRun, map[string]any{"agent": "scribe", "prompt": "Write a haiku to notes.md."})
	p.waitStatus(id, api.StatusSuspended)

	// A model's markup that ran would open a dialog; dialogs records any.
	_, ctx, dialogs := openBrowser(t, chrome, 1280, 1100)

	text := func(id string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return v
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(g.base+"/runs/"+id),
		chromedp.WaitVisible(chromedp.ID("pending-args")),
		chromedp.WaitVisible(chromedp.CSS("#live.live")), // the event stream is open
	); err != nil {
		t.Fatalf("open the run page: %v\nworker:\n%s", err, p.output())
	}
	args, events, status := text("pending-args"), text("events"), text("status")
	if status != "suspended" || !strings.Contains(args, "notes.md") || !strings.Contains(args, "the worker may fall, the run\nwaits for your yes.") {
		t.Errorf("run page: status %q, pending args %q; want the write_file call's arguments, its content as text", status, args)
	}
	if !strings.Contains(events, `<script>alert(\"xss from a tool result\")</script>`) {
		t.Errorf("the tool result with <script> is not shown as text in the events:\n%s", events)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotPath := filepath.Join(t.TempDir(), "approvals-page.png")
	if os.Getenv("NEXO_UPDATE_SCREENSHOT") != "" {
		shotPath = filepath.Join("..", "docs", "approvals-page.png")
		if err := os.MkdirAll(filepath.Dir(shotPath), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the pending approval: %s (%d bytes)", shotPath, len(shot))

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("approve")),
		// The page follows the run live and re-renders when it closes.
		chromedp.WaitVisible(chromedp.CSS("#status.s-done")),
	); err != nil {
		t.Fatalf("approve on the page: %v\nrecord: %s", err, p.ok("show", id))
	}
	if result := text("result"); !strings.Contains(result, "I wrote a haiku to notes.md.") {
		t.Errorf("result on the page = %q", result)
	}
	if b, err := os.ReadFile(filepath.Join(p.dir, "workspace", "notes.md")); err != nil || string(b) != haiku {
		t.Errorf("notes.md = %q, %v; want the approved write", b, err)
	}
	rec := p.record(id)
	by := ""
	for _, ev := range rec.Events {
		if ev.Type == "approval_decided" {
			var d struct{ By string }
			_ = json.Unmarshal(ev.Data, &d)
			by = d.By
		}
	}
	if rec.Status != api.StatusDone || by != "local" {
		t.Errorf("status %s, decided by %q; want done, by local (an open gateway's name for its user)", rec.Status, by)
	}
	if d := dialogs(); len(d) > 0 {
		t.Errorf("the page ran a model's markup: dialogs %q", d)
	}
}
