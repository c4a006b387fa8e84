package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

func TestStartRun(t *testing.T) {
	t.Parallel()
	var got runs.StartRequest
	f := &fakeRuns{start: func(_ context.Context, req runs.StartRequest) (string, error) {
		got = req
		if req.ID == "taken" {
			return "", &runs.ExistsError{ID: "taken", Workflow: "DocumentApproval", Status: api.StatusSuspended}
		}
		return "run-1", nil
	}}
	s := newServer(t, f, Options{})

	resp := do(t, s, request{method: "POST", path: "/v1/runs", body: `{"workflow":"DocumentApproval","input":{"doc_id":"42"},"start_delay":"10m"}`})
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/runs/run-1" {
		t.Fatalf("status %d, Location %q, body %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var c Created
	if err := json.Unmarshal([]byte(body), &c); err != nil || c.ID != "run-1" {
		t.Fatalf("body = %s (%v), want {\"id\":\"run-1\"}", body, err)
	}
	if got.Workflow != "DocumentApproval" || string(got.Payload) != `{"doc_id":"42"}` || got.StartDelay != 10*time.Minute {
		t.Errorf("Start got %+v", got)
	}

	for _, tc := range []struct {
		name, body string
		status     int
		detail     string
	}{
		{"unknown field", `{"workflow":"X","imput":{}}`, 400, `request body: unknown field "imput" (did you mean "input"?)`},
		{"unknown field, none close", `{"workflow":"X","colour":"red"}`, 400, `request body: unknown field "colour" (it takes `},
		{"bad delay", `{"workflow":"X","start_delay":"soon"}`, 400, `start_delay "soon"`},
		{"not JSON", `workflow=X`, 400, "request body"},
		{"two values", `{"workflow":"X"} {}`, 400, "more than one JSON value"},
		{"empty", ``, 400, "empty"},
		{"id with a slash", `{"workflow":"X","id":"a/b"}`, 400, `run id "a/b"`},
		{"id ..", `{"workflow":"X","id":".."}`, 400, `run id ".."`},
		{"id of blanks", `{"workflow":"X","id":"   "}`, 400, `is empty`},
		{"id too long", `{"workflow":"X","id":"` + strings.Repeat("x", 300) + `"}`, 400, `300 bytes`},
		{"id of a session", `{"workflow":"X","id":"session:agent:victim"}`, 400, `reserved for sessions`},
		{"id taken", `{"workflow":"X","id":"taken"}`, 409, "run taken already exists (DocumentApproval, suspended)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, s, request{method: "POST", path: "/v1/runs", body: tc.body})
			wantProblem(t, resp, tc.status, tc.detail)
		})
	}
	t.Run("form content type", func(t *testing.T) {
		resp := do(t, s, request{method: "POST", path: "/v1/runs", body: `{"workflow":"X"}`,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
		wantProblem(t, resp, http.StatusUnsupportedMediaType, "Content-Type: application/json")
	})
}

// TestStartRunOfATypeNoWorkerOffers: the refusal of package runs is a 400 problem that
// lists the offered types and the likely one.
func TestStartRunOfATypeNoWorkerOffers(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{start: func(_ context.Context, req runs.StartRequest) (string, error) {
		return "", &runs.UnknownTypeError{Workflow: req.Workflow, TaskQueue: "nexo",
			Offered: []string{"BuildDashboard", "DocumentApproval"}, Suggestion: "DocumentApproval"}
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "POST", path: "/v1/runs", body: `{"workflow":"DocumentAproval"}`})
	p := wantProblem(t, resp, http.StatusBadRequest, `no worker on task queue nexo offers workflow type "DocumentAproval"`)
	if !reflect.DeepEqual(p.Offered, []string{"BuildDashboard", "DocumentApproval"}) || p.Suggestion != "DocumentApproval" {
		t.Errorf("problem offered %v, suggestion %q", p.Offered, p.Suggestion)
	}
}

// TestStartRunOnAPoolNobodyServes: an agent whose sandbox pool has no live host is a 409
// naming the pool (the request is right; no host of the pool is up now).
func TestStartRunOnAPoolNobodyServes(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{start: func(context.Context, runs.StartRequest) (string, error) {
		return "", &runs.NoPoolHostError{Agent: "trainer", Pool: "gpu", Queue: "nexo@pool-gpu"}
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "POST", path: "/v1/runs", body: `{"workflow":"AgentRun","input":{"agent":"trainer","prompt":"go"}}`})
	wantProblem(t, resp, http.StatusConflict, `sandbox pool "gpu", which no live host serves`)
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	called := false
	f := &fakeRuns{start: func(context.Context, runs.StartRequest) (string, error) { called = true; return "x", nil }}
	s := newServer(t, f, Options{MaxBodyBytes: 2048})
	big := `{"workflow":"X","input":"` + strings.Repeat("a", 4096) + `"}`
	resp := do(t, s, request{method: "POST", path: "/v1/runs", body: big})
	wantProblem(t, resp, http.StatusRequestEntityTooLarge, "larger than 2048 bytes")
	if called {
		t.Error("Start was called with an oversized body")
	}
	small := `{"workflow":"X","input":"` + strings.Repeat("a", 1000) + `"}`
	if resp := do(t, s, request{method: "POST", path: "/v1/runs", body: small}); resp.StatusCode != http.StatusCreated {
		t.Errorf("a body under the limit: status %d, %s", resp.StatusCode, readBody(t, resp))
	}
}

func TestListRuns(t *testing.T) {
	t.Parallel()
	var got runs.ListRequest
	closed := t0.Add(time.Minute)
	f := &fakeRuns{list: func(_ context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error) {
		got = req
		return []runs.Summary{{ID: "a", Workflow: "DocumentApproval", Status: api.StatusDone, CreatedAt: t0, ClosedAt: &closed}}, []byte{0xff, 1}, nil
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/v1/runs?status=suspended&workflow=DocumentApproval&limit=5&page_token=" + encodePageToken([]byte("tok"))})
	body := readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := runs.ListRequest{Status: api.StatusSuspended, Workflow: "DocumentApproval", Limit: 5, PageToken: []byte("tok")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List got %+v, want %+v", got, want)
	}
	var l RunList
	if err := json.Unmarshal([]byte(body), &l); err != nil || len(l.Runs) != 1 || l.Runs[0].ID != "a" || l.NextPageToken != encodePageToken([]byte{0xff, 1}) {
		t.Errorf("body = %s", body)
	}
	for _, q := range []string{"status=finished", "limit=0", "limit=5000", "page_token=***", "page_token=garbage",
		"page_token=" + base64.RawURLEncoding.EncodeToString([]byte("a token from elsewhere"))} {
		wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs?" + q}), 400, strings.Split(q, "=")[0])
	}
}

// TestGetRunIsTheStarterShape: the record is encoded as `starter show --json` prints it:
// two-space indent, nothing HTML-escaped, a trailing newline.
func TestGetRunIsTheStarterShape(t *testing.T) {
	t.Parallel()
	rec := agentPending()
	s := newServer(t, &fakeRuns{get: getRecords(rec)}, Options{})
	resp := do(t, s, request{method: "GET", path: "/v1/runs/run-agent"})
	body := readBody(t, resp)
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		t.Fatal(err)
	}
	if body != want.String() {
		t.Errorf("GET /v1/runs/{id} =\n%s\nwant (starter show --json)\n%s", body, want.String())
	}
	if !strings.Contains(body, `<script>`) {
		t.Error("JSON escaped HTML characters; starter show --json does not")
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/nope"}), 404, "no run nope")
}

func TestErrorsMapToStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		status int
	}{
		{&runs.NotFoundError{ID: "x"}, 404},
		{&runs.StateError{ID: "x", Status: api.StatusDone, Want: "suspended"}, 409},
		{&runs.ExistsError{ID: "x", Workflow: "DocumentApproval", Status: api.StatusDone}, 409},
		{&runs.BadRequestError{Msg: "bad"}, 400},
		{&runs.NoWorkerError{ID: "x", TaskQueue: "nexo", Err: errors.New("deadline")}, 503},
		{&runs.NoWorkerError{ID: "x", TaskQueue: "nexo", Err: errors.New(`storage driver "nexo-blob" retrieve failed: the stored bytes of offloaded payload 5e0f do not match their sha256`)}, 409},
		{fmt.Errorf("wrapped: %w", &runs.StateError{ID: "x", Status: api.StatusRunning, Want: "suspended"}), 409},
		{errors.New("boom"), 500},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T %d", tt.err, tt.status), func(t *testing.T) {
			s := newServer(t, &fakeRuns{get: func(context.Context, string) (api.Record, error) { return api.Record{}, tt.err }}, Options{})
			p := wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/x"}), tt.status, tt.err.Error())
			if tt.status == 409 && (p.RunID != "x" || p.RunStatus == "") {
				t.Errorf("409 problem lacks run_id/run_status: %+v", p)
			}
		})
	}
}

func TestUnknownRoutesAreProblems(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{}, Options{})
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/nothing"}), 404, "no API route GET /v1/nothing")
	resp := do(t, s, request{method: "DELETE", path: "/v1/runs/x"})
	if resp.Header.Get("Allow") != "GET" {
		t.Errorf("Allow = %q, want GET", resp.Header.Get("Allow"))
	}
	wantProblem(t, resp, 405, "DELETE /v1/runs/x is not supported")
}

func TestEventsAfter(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeRuns{get: getRecords(docSuspended())}, Options{})
	for _, tc := range []struct {
		query  string
		header map[string]string
		want   []int64
	}{
		{"", nil, []int64{1, 2, 3}},
		{"?after=1", nil, []int64{2, 3}},
		{"?after=3", nil, []int64{}},
		{"?after=1", map[string]string{"Last-Event-ID": "2"}, []int64{3}},
	} {
		resp := do(t, s, request{method: "GET", path: "/v1/runs/run-doc/events" + tc.query, header: tc.header})
		body := readBody(t, resp)
		var evs []api.Event
		if err := json.Unmarshal([]byte(body), &evs); err != nil || evs == nil {
			t.Fatalf("%s: body %s (%v), want a JSON array", tc.query, body, err)
		}
		got := []int64{}
		for _, e := range evs {
			got = append(got, e.Seq)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("events%s (Last-Event-ID %v) = %v, want %v", tc.query, tc.header, got, tc.want)
		}
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/run-doc/events?after=-1"}), 400, "after")
}

func TestDecide(t *testing.T) {
	t.Parallel()
	type call struct {
		id string
		d  runs.Decision
	}
	var decided []call
	f := &fakeRuns{
		get: getRecords(docSuspended(), agentPending()),
		decide: func(_ context.Context, id string, d runs.Decision) (string, api.Record, error) {
			decided = append(decided, call{id, d})
			if d.Result == "refuse me" {
				return "", api.Record{}, &runs.RefusedError{ID: id, CallID: d.CallID, Msg: "tool call 2.1 was already decided (approved by ada)"}
			}
			if d.CallID != "2.1" {
				return "", api.Record{}, &runs.StateError{ID: id, Status: api.StatusSuspended, Want: "waiting for call " + d.CallID, Hint: "the pending call is 2.1 (write_file)"}
			}
			return "approved tool call 2.1 (write_file) of run " + id, api.Record{}, nil
		},
		decideRecord: func(_ context.Context, rec api.Record, d runs.Decision) (string, error) {
			decided = append(decided, call{rec.ID, d})
			return "approved run " + rec.ID + " (awaiting approval)", nil
		},
	}
	s := newServer(t, f, Options{})
	tests := []struct {
		name, path, body string
		status           int
		want             *call  // the decision sent, if any
		detail           string // for errors
	}{
		{"approve a tool call", "/v1/runs/run-agent/approvals/2.1", `{"approved":true,"always":true}`, 202,
			&call{"run-agent", runs.Decision{Approved: true, CallID: "2.1", Always: true, By: "local"}}, ""},
		{"deny a tool call naming the person", "/v1/runs/run-agent/approvals/2.1", `{"approved":false,"reason":"not now","by":"ada"}`, 202,
			&call{"run-agent", runs.Decision{Approved: false, CallID: "2.1", Reason: "not now", By: "ada"}}, ""},
		{"approve with edited arguments", "/v1/runs/run-agent/approvals/2.1", `{"action":"approve","args":{"path":"drafts/a.md"},"args_sha256":"ab12"}`, 202,
			&call{"run-agent", runs.Decision{Approved: true, Action: "approve", CallID: "2.1", Args: json.RawMessage(`{"path":"drafts/a.md"}`), ArgsSHA256: "ab12", By: "local"}}, ""},
		{"answer a tool call", "/v1/runs/run-agent/approvals/2.1", `{"action":"answer","result":"42"}`, 202,
			&call{"run-agent", runs.Decision{Action: "answer", CallID: "2.1", Result: "42", By: "local"}}, ""},
		{"the run refuses", "/v1/runs/run-agent/approvals/2.1", `{"action":"answer","result":"refuse me"}`, 409,
			&call{"run-agent", runs.Decision{Action: "answer", CallID: "2.1", Result: "refuse me", By: "local"}}, "tool call 2.1 was already decided"},
		{"action and approved disagree", "/v1/runs/run-agent/approvals/2.1", `{"action":"deny","approved":true,"reason":"x"}`, 400, nil, "contradicts action"},
		{"unknown action", "/v1/runs/run-agent/approvals/2.1", `{"action":"edit"}`, 400, nil, `action "edit": want approve, deny or answer`},
		{"another call than the pending one", "/v1/runs/run-agent/approvals/9.9", `{"approved":true}`, 409,
			&call{"run-agent", runs.Decision{Approved: true, CallID: "9.9", By: "local"}}, "waiting for call 9.9"},
		{"approve the workflow's own pause", "/v1/runs/run-doc/approvals/suspend", `{"approved":true}`, 202,
			&call{"run-doc", runs.Decision{Approved: true, By: "local"}}, ""},
		{"suspend while a tool call waits", "/v1/runs/run-agent/approvals/suspend", `{"approved":true}`, 409, nil, "waits for approval of tool call 2.1"},
		{"always on a pause", "/v1/runs/run-doc/approvals/suspend", `{"approved":true,"always":true}`, 400, nil, "always applies to tool calls only"},
		{"deny without a reason", "/v1/runs/run-doc/approvals/suspend", `{"approved":false}`, 400, nil, "a denial needs a reason"},
		{"approved missing", "/v1/runs/run-doc/approvals/suspend", `{"reason":"x"}`, 400, nil, "approved is required"},
		{"unknown run", "/v1/runs/nope/approvals/suspend", `{"approved":true}`, 404, nil, "no run nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decided = nil
			resp := do(t, s, request{method: "POST", path: tt.path, body: tt.body})
			if tt.status != 202 {
				wantProblem(t, resp, tt.status, tt.detail)
			} else if body := readBody(t, resp); resp.StatusCode != 202 || !strings.Contains(body, `"message"`) {
				t.Fatalf("status %d, body %s", resp.StatusCode, body)
			}
			switch {
			case tt.want == nil && len(decided) > 0:
				t.Errorf("decided %+v, want nothing sent", decided)
			case tt.want != nil && (len(decided) != 1 || !reflect.DeepEqual(decided[0], *tt.want)):
				t.Errorf("decided %+v, want %+v", decided, *tt.want)
			}
		})
	}
}

func TestResumeCancelRerun(t *testing.T) {
	t.Parallel()
	var resumed runs.ResumeRequest
	var rerunPayload json.RawMessage
	f := &fakeRuns{
		resume: func(_ context.Context, id string, req runs.ResumeRequest) error {
			if id != "run-doc" {
				return &runs.StateError{ID: id, Status: api.StatusDone, Want: "suspended"}
			}
			resumed = req
			return nil
		},
		cancel: func(_ context.Context, id string) (string, error) {
			if id == "closed" {
				return "", &runs.StateError{ID: id, Status: api.StatusDone, Want: "open"}
			}
			return "cancel requested for run " + id, nil
		},
		rerun: func(_ context.Context, id string, payload json.RawMessage) (string, error) {
			rerunPayload = payload
			return "run-2", nil
		},
	}
	s := newServer(t, f, Options{})

	resp := do(t, s, request{method: "POST", path: "/v1/runs/run-doc/resume", body: `{"input":{"approved":true},"resume_key":"k"}`})
	if resp.StatusCode != 202 || resumed.Key != "k" || resumed.Input["approved"] != true || !resumed.At.IsZero() {
		t.Fatalf("resume: status %d, sent %+v, body %s", resp.StatusCode, resumed, readBody(t, resp))
	}
	resp = do(t, s, request{method: "POST", path: "/v1/runs/run-doc/resume", body: `{"in":"2h"}`})
	if resp.StatusCode != 202 || time.Until(resumed.At) < 119*time.Minute || !strings.Contains(readBody(t, resp), "resumes at") {
		t.Errorf("resume in 2h: status %d, at %v", resp.StatusCode, resumed.At)
	}
	if resp := do(t, s, request{method: "POST", path: "/v1/runs/run-doc/resume"}); resp.StatusCode != 202 {
		t.Errorf("resume with no body: status %d, want 202", resp.StatusCode)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/runs/run-doc/resume", body: `{"at":"tomorrow"}`}), 400, "RFC 3339")
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/runs/other/resume", body: `{}`}), 409, "is not suspended (done)")

	if resp := do(t, s, request{method: "POST", path: "/v1/runs/run-doc/cancel"}); resp.StatusCode != 202 {
		t.Errorf("cancel: status %d", resp.StatusCode)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/runs/closed/cancel"}), 409, "is not open (done)")

	resp = do(t, s, request{method: "POST", path: "/v1/runs/run-doc/rerun"})
	body := readBody(t, resp)
	if resp.StatusCode != 201 || resp.Header.Get("Location") != "/v1/runs/run-2" || !strings.Contains(body, `"rerun_of": "run-doc"`) {
		t.Errorf("rerun: status %d, Location %q, body %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if rerunPayload != nil {
		t.Errorf("rerun with no body passed payload %s, want none (the failed run's)", rerunPayload)
	}
	resp = do(t, s, request{method: "POST", path: "/v1/runs/run-doc/rerun", body: `{"input":{"metrics":["sales"]}}`})
	if resp.StatusCode != 201 || string(rerunPayload) != `{"metrics":["sales"]}` {
		t.Errorf("rerun with input: status %d, payload %s", resp.StatusCode, rerunPayload)
	}
	wantProblem(t, do(t, s, request{method: "POST", path: "/v1/runs/run-doc/rerun", body: `{"inptu":{}}`}), 400, "inptu")
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestArtifacts(t *testing.T) {
	t.Parallel()
	store, err := artifacts.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	big := []byte("large bytes kept in the store only")
	ctx := context.Background()
	if err := store.Put(ctx, "run-a", "report.txt", big); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "run-a", "tampered.bin", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	html := `<h1>Q4</h1><script>alert(1)</script>`
	bin := base64.StdEncoding.EncodeToString([]byte{0, 1, 2})
	rec := api.Record{ID: "run-a", Status: api.StatusDone, Artifacts: []api.Artifact{
		{Name: "dashboard.html", At: t0, Size: int64(len(html)), SHA256: sha([]byte(html)), Content: &html},
		{Name: "blob.bin", At: t0, Size: 3, SHA256: sha([]byte{0, 1, 2}), Encoding: api.EncodingBase64, Content: &bin},
		{Name: "report.txt", At: t0, Size: int64(len(big)), SHA256: sha(big)},
		{Name: "tampered.bin", At: t0, Size: 8, SHA256: sha([]byte("original"))},
		{Name: "lost.txt", At: t0, Size: 8, SHA256: sha([]byte("whatever"))},
	}}
	s := newServer(t, &fakeRuns{get: getRecords(rec)}, Options{Artifacts: store})

	resp := do(t, s, request{method: "GET", path: "/v1/runs/run-a/artifacts"})
	var list []api.Artifact
	if err := json.Unmarshal([]byte(readBody(t, resp)), &list); err != nil || len(list) != 5 {
		t.Fatalf("list = %v (%v)", list, err)
	}

	tests := []struct {
		name, path, ct, body, disposition string
	}{
		{"inline html, sandboxed", "/v1/runs/run-a/artifacts/dashboard.html", "text/html; charset=utf-8", html, `inline; filename=dashboard.html`},
		{"inline base64", "/v1/runs/run-a/artifacts/blob.bin?download", "application/octet-stream", "\x00\x01\x02", `attachment; filename=blob.bin`},
		{"from the store", "/v1/runs/run-a/artifacts/report.txt", "text/plain; charset=utf-8", string(big), `inline; filename=report.txt`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, s, request{method: "GET", path: tt.path})
			body := readBody(t, resp)
			if resp.StatusCode != 200 || body != tt.body {
				t.Fatalf("status %d body %q, want %q", resp.StatusCode, body, tt.body)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.ct {
				t.Errorf("Content-Type = %q, want %q", got, tt.ct)
			}
			if got := resp.Header.Get("Content-Disposition"); got != tt.disposition {
				t.Errorf("Content-Disposition = %q, want %q", got, tt.disposition)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") {
				t.Errorf("Content-Security-Policy = %q, want a sandbox (the bytes are untrusted)", csp)
			}
		})
	}
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/run-a/artifacts/tampered.bin"}), 500, "does not match its recorded sha256")
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/run-a/artifacts/lost.txt"}), 404, "artifacts.url")
	wantProblem(t, do(t, s, request{method: "GET", path: "/v1/runs/run-a/artifacts/none.txt"}), 404, `has no artifact "none.txt"`)

	resp = do(t, s, request{method: "GET", path: "/v1/runs/run-a/artifacts/report.txt", header: map[string]string{"If-None-Match": `"` + sha(big) + `"`}})
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the sha256: status %d, want 304", resp.StatusCode)
	}
}

// TestIncompleteRecordIsSaidSo: a record rebuilt from history (Record.Warning) keeps its
// warning on every view: the JSON record, the event list's header, the page, which also
// offers no re-run (there is nothing to seed).
func TestIncompleteRecordIsSaidSo(t *testing.T) {
	t.Parallel()
	const warning = "run t1: it stored no record and no worker replayed it"
	msg := "terminated: test"
	f := &fakeRuns{get: func(context.Context, string) (api.Record, error) {
		return api.Record{ID: "t1", Workflow: "DocumentApproval", Status: api.StatusInterrupted, Error: &msg,
			State: map[string]json.RawMessage{}, Events: []api.Event{}, Artifacts: []api.Artifact{}, Warning: warning}, nil
	}}
	s := newServer(t, f, Options{})
	var rec api.Record
	if err := json.Unmarshal([]byte(readBody(t, do(t, s, request{method: "GET", path: "/v1/runs/t1"}))), &rec); err != nil || rec.Warning != warning {
		t.Errorf("GET /v1/runs/t1: warning %q (%v)", rec.Warning, err)
	}
	if resp := do(t, s, request{method: "GET", path: "/v1/runs/t1/events"}); resp.Header.Get(headerRecordWarning) != warning {
		t.Errorf("events list: %s = %q, want the warning", headerRecordWarning, resp.Header.Get(headerRecordWarning))
	}
	page := readBody(t, do(t, s, request{method: "GET", path: "/runs/t1"}))
	if !strings.Contains(page, warning) || strings.Contains(page, "Re-run</button>") {
		t.Errorf("run page: warning shown %v, re-run offered %v", strings.Contains(page, warning), strings.Contains(page, "Re-run</button>"))
	}
}
