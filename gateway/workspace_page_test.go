package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

// wsFixture is a finished agent run with two snapshotting calls, its snapshots in a
// memory blob store: call 1.1 wrote notes.txt ("v1"), a file named like markup holding
// markup, a big text file and a binary one; call 2.1 changed notes.txt to "v2"; call 3.1
// is still running.
type wsFixture struct {
	store artifacts.Store
	rec   api.Record
}

const markupName = `<script>alert("name")</script>.html`

func newWSFixture(t *testing.T) wsFixture {
	t.Helper()
	ctx := context.Background()
	st, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	put := func(b []byte) string {
		sum, err := st.PutBlob(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	file := func(p string, b []byte) api.ManifestEntry {
		return api.ManifestEntry{Path: p, Type: api.EntryFile, Mode: 0o644, Size: int64(len(b)), SHA256: put(b)}
	}
	manifest := func(es ...api.ManifestEntry) string {
		return put(mustJSON(api.Manifest{Version: api.ManifestVersion, Entries: es}))
	}
	big := []byte(strings.Repeat("line of a big file\n", 8000) + "THE END\n") // ~150 KiB
	common := []api.ManifestEntry{
		file(markupName, []byte(xss)),
		file("big.txt", big),
		file("blob.bin", []byte{0x89, 'P', 'N', 'G', 0, 0, 0xff, 0xfe}),
		{Path: "sub", Type: api.EntryDir, Mode: 0o755},
	}
	m1 := manifest(append([]api.ManifestEntry{file("notes.txt", []byte("v1\n"))}, common...)...)
	m2 := manifest(append([]api.ManifestEntry{file("notes.txt", []byte("v2\n"))}, common...)...)
	ev := func(seq int64, typ string, d any) api.Event {
		return api.Event{Seq: seq, Type: typ, Data: mustJSON(d), At: t0}
	}
	rec := api.Record{
		ID: "run-ws", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning,
		Payload: json.RawMessage(`{"agent":"scribe","prompt":"Write."}`),
		Events: []api.Event{
			ev(1, "agent_start", map[string]string{"agent": "scribe"}),
			ev(2, "agent_tool_call", map[string]any{"call_id": "1.1", "name": "write_file", "args": map[string]string{"path": "notes.txt", "content": xss}}),
			ev(3, "agent_tool_result", map[string]any{"call_id": "1.1", "name": "write_file", "ok": true, "content": "wrote", "snapshot": m1}),
			ev(4, "agent_tool_call", map[string]any{"call_id": "2.1", "name": "write_file", "args": map[string]string{"path": "notes.txt"}}),
			ev(5, "agent_tool_result", map[string]any{"call_id": "2.1", "name": "write_file", "ok": true, "content": "wrote", "snapshot": m2}),
			ev(6, "agent_tool_call", map[string]any{"call_id": "3.1", "name": "read_file", "args": map[string]string{"path": "notes.txt"}}),
		},
		State: map[string]json.RawMessage{}, CreatedAt: t0, UpdatedAt: t0,
	}
	return wsFixture{store: st, rec: rec}
}

func (f wsFixture) server(t *testing.T, fr *fakeRuns) *Server {
	t.Helper()
	if fr.get == nil {
		fr.get = getRecords(f.rec)
	}
	return newServer(t, fr, Options{Artifacts: f.store})
}

func page(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	resp := do(t, s, request{method: "GET", path: path})
	return resp.StatusCode, readBody(t, resp)
}

// TestRunPageLinksEachCallsFilesAndChanges: every tool call of a run with snapshots links
// the files it found and (once it ended) what it changed, and carries a fork form aimed at
// the fork route with its call id.
func TestRunPageLinksEachCallsFilesAndChanges(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	code, body := page(t, f.server(t, &fakeRuns{}), "/runs/run-ws")
	if code != http.StatusOK {
		t.Fatalf("run page: %d\n%s", code, body)
	}
	for _, want := range []string{
		`href="/runs/run-ws/files?at=1.1"`, `href="/runs/run-ws/changes?call=1.1"`,
		`href="/runs/run-ws/files?at=2.1"`, `href="/runs/run-ws/changes?call=2.1"`,
		`href="/runs/run-ws/files?at=3.1"`,
		`<form class="fork" method="post" action="/v1/runs/run-ws/fork" data-at="2.1">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	if strings.Contains(body, `changes?call=3.1`) {
		t.Error("the running call 3.1 links changes that are not known yet")
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("a call's arguments are on the page as markup")
	}

	// A run with no snapshots (a user's dir) links no files; a workflow that is not an
	// agent run offers no fork.
	plain := agentPending()
	plain.Events = append(plain.Events, api.Event{Seq: 4, Type: "agent_tool_call", Data: mustJSON(map[string]any{"call_id": "2.1", "name": "write_file"}), At: t0})
	_, body = page(t, newServer(t, &fakeRuns{get: getRecords(plain)}, Options{Artifacts: f.store}), "/runs/run-agent")
	if !strings.Contains(body, `data-call="2.1"`) || strings.Contains(body, "/files?at=") || !strings.Contains(body, `data-at="2.1"`) {
		t.Errorf("the calls of a run with no snapshots: want the call with a fork form and no files link\n%s", body)
	}
	// A gateway with no blob store links neither files nor forks.
	_, body = page(t, newServer(t, &fakeRuns{get: getRecords(f.rec)}, Options{}), "/runs/run-ws")
	if !strings.Contains(body, `data-call="2.1"`) || strings.Contains(body, "/files?at=") || strings.Contains(body, `class="fork"`) {
		t.Errorf("the run page on a gateway with no blob store: want the calls without files links or fork forms\n%s", body)
	}
	doc := f.rec
	doc.ID, doc.Workflow = "run-doc", "DocumentApproval"
	_, body = page(t, newServer(t, &fakeRuns{get: getRecords(doc)}, Options{Artifacts: f.store}), "/runs/run-doc")
	if strings.Contains(body, `class="fork"`) {
		t.Error("a DocumentApproval run offers a fork from a call; only agent runs fork")
	}
}

// TestWorkspaceFilesPageEscapesNames: the files page lists the workspace as the call found
// it; a file named like markup is shown as text and linked escaped, never as markup.
func TestWorkspaceFilesPageEscapesNames(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	s := f.server(t, &fakeRuns{})
	code, body := page(t, s, "/runs/run-ws/files?at=2.1")
	if code != http.StatusOK {
		t.Fatalf("files page: %d\n%s", code, body)
	}
	for _, want := range []string{
		"Files as call", "2.1", "notes.txt", "big.txt", "blob.bin", "3 B",
		`href="/runs/run-ws/files/notes.txt?at=2.1"`,
		`href="/runs/run-ws/files/%3Cscript%3Ealert%28%22name%22%29%3C/script%3E.html?at=2.1"`,
		`&lt;script&gt;alert(&#34;name&#34;)&lt;/script&gt;.html`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("files page lacks %s\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, `href="/runs/run-ws/files/sub`) {
		t.Errorf("the files page has raw markup or links a directory's bytes\n%s", body)
	}
	// As call 1.1 found it: nothing written yet.
	if code, body := page(t, s, "/runs/run-ws/files?at=1.1"); code != http.StatusOK || !strings.Contains(body, `id="files-empty"`) {
		t.Errorf("files as 1.1 found them: %d, want the empty workspace\n%s", code, body)
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/runs/run-ws/files?at=9.9", http.StatusNotFound, "has no tool call 9.9"},
		{"/runs/no-such/files", http.StatusNotFound, "no-such"},
	} {
		if code, body := page(t, s, c.path); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d, want %d naming %q\n%s", c.path, code, c.code, c.want, body)
		}
	}
	// A gateway with no blob store says so instead of a blank page.
	bare := newServer(t, &fakeRuns{get: getRecords(f.rec)}, Options{})
	if code, body := page(t, bare, "/runs/run-ws/files?at=2.1"); code != http.StatusNotImplemented || !strings.Contains(body, "no blob store") {
		t.Errorf("files page with no store: %d\n%s", code, body)
	}
}

// TestWorkspaceFilePageShowsABoundedPreview: a text file's bytes as text (markup escaped),
// a big file cut at the preview bound with a link to its raw bytes, a binary file not
// rendered at all; a path out of the workspace is refused.
func TestWorkspaceFilePageShowsABoundedPreview(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	s := f.server(t, &fakeRuns{})
	code, body := page(t, s, "/runs/run-ws/files/notes.txt?at=2.1")
	if code != http.StatusOK || !strings.Contains(body, `<pre id="content">v1
</pre>`) || !strings.Contains(body, `href="/v1/runs/run-ws/files/notes.txt?at=2.1"`) {
		t.Errorf("notes.txt as 2.1 found it: %d, want v1 and a raw link\n%s", code, body)
	}
	if _, body := page(t, s, "/runs/run-ws/files/notes.txt"); !strings.Contains(body, `<pre id="content">v2
</pre>`) {
		t.Errorf("notes.txt now: want v2\n%s", body)
	}
	_, body = page(t, s, "/runs/run-ws/files/%3Cscript%3Ealert%28%22name%22%29%3C/script%3E.html?at=2.1")
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") {
		t.Errorf("the markup file's page: want its name and content as text\n%s", body)
	}
	_, body = page(t, s, "/runs/run-ws/files/big.txt?at=2.1")
	if !strings.Contains(body, `id="truncated"`) || strings.Contains(body, "THE END") || len(body) > maxPreview+8<<10 {
		t.Errorf("big.txt: want a preview of at most %d bytes, without its end, and a truncation note (page %d bytes)", maxPreview, len(body))
	}
	_, body = page(t, s, "/runs/run-ws/files/blob.bin?at=2.1")
	if !strings.Contains(body, `id="binary"`) || strings.Contains(body, `id="content"`) || !strings.Contains(body, `href="/v1/runs/run-ws/files/blob.bin?at=2.1"`) {
		t.Errorf("blob.bin: want no text, a binary note and a raw link\n%s", body)
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/runs/run-ws/files/missing.txt?at=2.1", http.StatusNotFound, "no file missing.txt"},
		{"/runs/run-ws/files/sub?at=2.1", http.StatusBadRequest, "is a directory"},
		{"/runs/run-ws/files/notes.txt?at=7.7", http.StatusNotFound, "has no tool call 7.7"},
	} {
		if code, body := page(t, s, c.path); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d, want %d naming %q\n%s", c.path, code, c.code, c.want, body)
		}
	}
}

// TestCallChangesPage: what a call changed, from the files it found to the ones it left:
// 1.1 added its files, 2.1 modified notes.txt (a unified diff), a binary file has no text
// diff; a call still running, an unknown call and a missing ?call= are clear errors.
func TestCallChangesPage(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	s := f.server(t, &fakeRuns{})
	code, body := page(t, s, "/runs/run-ws/changes?call=2.1")
	if code != http.StatusOK {
		t.Fatalf("changes of 2.1: %d\n%s", code, body)
	}
	for _, want := range []string{"Changes of call", "<code>write_file</code>", `<span class="badge">modified</span> <span class="mono">notes.txt</span>`, "-v1\n&#43;v2\n",
		`href="/runs/run-ws/files/notes.txt?at=2.1">as found`} {
		if !strings.Contains(body, want) {
			t.Errorf("changes of 2.1 lack %s\n%s", want, body)
		}
	}
	if strings.Contains(body, "big.txt") {
		t.Error("changes of 2.1 list big.txt, which it did not change")
	}
	_, body = page(t, s, "/runs/run-ws/changes?call=1.1")
	if strings.Count(body, `<span class="badge">added</span>`) != 5 || !strings.Contains(body, "A binary file: no text diff.") ||
		strings.Contains(body, "<script>alert") || !strings.Contains(body, "&#43;&lt;script&gt;alert(&#34;pwned&#34;)") {
		t.Errorf("changes of 1.1: want 5 added entries, the markup file's diff as text, blob.bin without a diff\n%s", body)
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/runs/run-ws/changes?call=3.1", http.StatusConflict, "it has not ended"},
		{"/runs/run-ws/changes?call=8.8", http.StatusNotFound, "has no tool call 8.8"},
		{"/runs/run-ws/changes", http.StatusBadRequest, "needs ?call="},
	} {
		if code, body := page(t, s, c.path); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d, want %d naming %q\n%s", c.path, code, c.code, c.want, body)
		}
	}
}

// TestForkRouteAsThePagePostsIt: the page's fork form posts {"at", "prompt"} to the fork
// route; the answer names the new run (the page goes there), and a refusal is a problem
// whose detail the page shows.
func TestForkRouteAsThePagePostsIt(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	var got runs.ForkRequest
	s := f.server(t, &fakeRuns{fork: func(_ context.Context, st runs.WorkspaceStore, req runs.ForkRequest) (string, error) {
		if st == nil {
			t.Error("fork got no blob store")
		}
		if req.At == "9.9" {
			return "", &runs.UnknownCallError{RunID: req.Run, CallID: req.At}
		}
		got = req
		return "run-fork", nil
	}})
	resp := do(t, s, request{method: "POST", path: "/v1/runs/run-ws/fork", body: `{"at":"2.1","prompt":"Try <b>again</b>."}`,
		header: map[string]string{"Content-Type": "application/json"}})
	body := readBody(t, resp)
	var created map[string]string
	if err := json.Unmarshal([]byte(body), &created); err != nil || resp.StatusCode != http.StatusCreated || created["id"] != "run-fork" ||
		got.Run != "run-ws" || got.At != "2.1" || got.Prompt != "Try <b>again</b>." {
		t.Errorf("fork: %d %s (%v), request %+v", resp.StatusCode, body, err, got)
	}
	resp = do(t, s, request{method: "POST", path: "/v1/runs/run-ws/fork", body: `{"at":"9.9"}`, header: map[string]string{"Content-Type": "application/json"}})
	body = readBody(t, resp)
	var prob struct{ Detail string }
	if err := json.Unmarshal([]byte(body), &prob); err != nil || resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(prob.Detail, "run run-ws has no tool call 9.9") {
		t.Errorf("fork at an unknown call: %d %s", resp.StatusCode, body)
	}
}

// TestWorkspacePagesOfAFork: a fork's first call found the files of the source's call it
// forked at (forked_from's snapshot), not an empty workspace; a call whose snapshot failed
// says its changes are unknown instead of "changed nothing".
func TestWorkspacePagesOfAFork(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	var m1 string
	_ = json.Unmarshal(f.rec.Events[2].Data, &struct {
		Snapshot *string `json:"snapshot"`
	}{&m1})
	fork := api.Record{
		ID: "run-fork", Workflow: api.WorkflowAgentRun, Status: api.StatusDone, State: map[string]json.RawMessage{}, CreatedAt: t0, UpdatedAt: t0,
		Events: []api.Event{
			{Seq: 1, Type: "forked_from", Data: mustJSON(map[string]any{"run": "run-ws", "call": "2.1", "snapshot": m1}), At: t0},
			{Seq: 2, Type: "agent_tool_call", Data: mustJSON(map[string]any{"call_id": "1.1", "name": "shell"}), At: t0},
			{Seq: 3, Type: "sandbox_snapshot_failed", Data: mustJSON(map[string]any{"call_id": "1.1", "error": "disk full"}), At: t0},
			{Seq: 4, Type: "agent_tool_result", Data: mustJSON(map[string]any{"call_id": "1.1", "name": "shell", "ok": true}), At: t0},
		},
	}
	s := newServer(t, &fakeRuns{get: getRecords(fork)}, Options{Artifacts: f.store})
	if code, body := page(t, s, "/runs/run-fork/files/notes.txt?at=1.1"); code != http.StatusOK || !strings.Contains(body, `<pre id="content">v1
</pre>`) {
		t.Errorf("the fork's notes.txt as its first call found it: %d, want v1 (the files 2.1 found)\n%s", code, body)
	}
	if code, body := page(t, s, "/runs/run-fork/changes?call=1.1"); code != http.StatusConflict || !strings.Contains(body, "could not be taken (disk full)") {
		t.Errorf("changes of a call whose snapshot failed: %d, want 409 naming the failure\n%s", code, body)
	}
}

// TestForkFromThePageNeedsOperateAndCSRF: on a gateway with tokens, the fork form is on
// the page only for a login whose token has scope operate (the files links for any
// reader), and the fork the page posts needs the session's CSRF token, as a decision does.
func TestForkFromThePageNeedsOperateAndCSRF(t *testing.T) {
	t.Parallel()
	f := newWSFixture(t)
	forked := 0
	s := newServer(t, &fakeRuns{get: getRecords(f.rec), fork: func(context.Context, runs.WorkspaceStore, runs.ForkRequest) (string, error) {
		forked++
		return "run-fork", nil
	}}, Options{Artifacts: f.store, Tokens: testTokens})
	cookie := func(c *http.Cookie) map[string]string { return map[string]string{"Cookie": c.Name + "=" + c.Value} }

	reader := login(t, s, readerSecret)
	body := readBody(t, do(t, s, request{method: "GET", path: "/runs/run-ws", header: cookie(reader)}))
	if !strings.Contains(body, `href="/runs/run-ws/files?at=2.1"`) || strings.Contains(body, `class="fork"`) {
		t.Errorf("a reader's run page: want the files links and no fork form\n%s", body)
	}

	ci := login(t, s, allSecret)
	body = readBody(t, do(t, s, request{method: "GET", path: "/runs/run-ws", header: cookie(ci)}))
	if !strings.Contains(body, `data-at="2.1"`) {
		t.Fatalf("an operator's run page has no fork form\n%s", body)
	}
	_, rest, _ := strings.Cut(body, `<meta name="nexo-csrf" content="`)
	csrf, _, _ := strings.Cut(rest, `"`)
	post := func(token string) int {
		h := cookie(ci)
		h["Content-Type"] = "application/json"
		if token != "" {
			h[csrfHeader] = token
		}
		resp := do(t, s, request{method: "POST", path: "/v1/runs/run-ws/fork", body: `{"at":"2.1"}`, header: h})
		readBody(t, resp)
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusForbidden || forked != 0 {
		t.Errorf("a fork on the cookie without the CSRF token: %d (%d forks), want 403 and none", code, forked)
	}
	if code := post(csrf); code != http.StatusCreated || forked != 1 {
		t.Errorf("a fork with the page's CSRF token: %d (%d forks), want 201 and one", code, forked)
	}
}
