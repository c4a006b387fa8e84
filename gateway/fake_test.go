package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// fakeRuns is the Runs of the handler tests: one function field per method; a call to a
// method whose field is nil fails with an error naming it, so a test sees the stray call.
type fakeRuns struct {
	notifications func(ctx context.Context) ([]api.NotifierStatus, error)
	start         func(ctx context.Context, req runs.StartRequest) (string, error)
	get           func(ctx context.Context, id string) (api.Record, error)
	// origin, when nil, answers Origin from get.
	origin       func(ctx context.Context, id string) (runs.Origin, error)
	list         func(ctx context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error)
	follow       func(ctx context.Context, id string, fn func(api.Record) bool) (api.Record, error)
	resume       func(ctx context.Context, id string, req runs.ResumeRequest) error
	decide       func(ctx context.Context, id string, d runs.Decision) (string, api.Record, error)
	decideRecord func(ctx context.Context, rec api.Record, d runs.Decision) (string, error)
	cancel       func(ctx context.Context, id string) (string, error)
	rerun        func(ctx context.Context, id string, payload json.RawMessage) (string, error)
	fork         func(ctx context.Context, st runs.WorkspaceStore, req runs.ForkRequest) (string, error)

	prompt        func(ctx context.Context, agent, instance, text string, o runs.PromptOptions) (api.PromptReply, error)
	session       func(ctx context.Context, agent, instance string) (api.SessionView, error)
	listSessions  func(ctx context.Context, limit int) ([]runs.SessionSummary, error)
	closeSession  func(ctx context.Context, agent, instance string) error
	interrupt     func(ctx context.Context, agent, instance string) (api.InterruptReply, error)
	steer         func(ctx context.Context, agent, instance, text string) (api.SteerReply, error)
	followSession func(ctx context.Context, agent, instance string, fn func(api.Record) bool) error
	// followSessionLive, when set, answers FollowSessionLive instead of followSession.
	followSessionLive func(ctx context.Context, agent, instance string, fn func(api.Record) bool, live func(api.LiveText)) error

	approvals func(ctx context.Context, req runs.ApprovalsRequest) ([]runs.Pending, error)
}

func unexpected(method string) error { return errors.New("fake runs: unexpected call to " + method) }

func (f *fakeRuns) Start(ctx context.Context, req runs.StartRequest) (string, error) {
	if f.start == nil {
		return "", unexpected("Start")
	}
	return f.start(ctx, req)
}

func (f *fakeRuns) Get(ctx context.Context, id string) (api.Record, error) {
	if f.get == nil {
		return api.Record{}, unexpected("Get")
	}
	return f.get(ctx, id)
}

func (f *fakeRuns) Origin(ctx context.Context, id string) (runs.Origin, error) {
	if f.origin != nil {
		return f.origin(ctx, id)
	}
	rec, err := f.Get(ctx, id)
	if err != nil {
		return runs.Origin{}, err
	}
	return runs.Origin{ID: rec.ID, Workflow: rec.Workflow, Input: rec.Payload}, nil
}

func (f *fakeRuns) List(ctx context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error) {
	if f.list == nil {
		return nil, nil, unexpected("List")
	}
	return f.list(ctx, req)
}

func (f *fakeRuns) Follow(ctx context.Context, id string, fn func(api.Record) bool) (api.Record, error) {
	if f.follow == nil {
		return api.Record{}, unexpected("Follow")
	}
	return f.follow(ctx, id, fn)
}

func (f *fakeRuns) Resume(ctx context.Context, id string, req runs.ResumeRequest) error {
	if f.resume == nil {
		return unexpected("Resume")
	}
	return f.resume(ctx, id, req)
}

func (f *fakeRuns) Decide(ctx context.Context, id string, d runs.Decision) (string, api.Record, error) {
	if f.decide == nil {
		return "", api.Record{}, unexpected("Decide")
	}
	return f.decide(ctx, id, d)
}

func (f *fakeRuns) DecideRecord(ctx context.Context, rec api.Record, d runs.Decision) (string, error) {
	if f.decideRecord == nil {
		return "", unexpected("DecideRecord")
	}
	return f.decideRecord(ctx, rec, d)
}

func (f *fakeRuns) Cancel(ctx context.Context, id string) (string, error) {
	if f.cancel == nil {
		return "", unexpected("Cancel")
	}
	return f.cancel(ctx, id)
}

func (f *fakeRuns) Rerun(ctx context.Context, id string, payload json.RawMessage) (string, error) {
	if f.rerun == nil {
		return "", unexpected("Rerun")
	}
	return f.rerun(ctx, id, payload)
}

func (f *fakeRuns) Fork(ctx context.Context, st runs.WorkspaceStore, req runs.ForkRequest) (string, error) {
	if f.fork == nil {
		return "", unexpected("Fork")
	}
	return f.fork(ctx, st, req)
}

func (f *fakeRuns) Prompt(ctx context.Context, agent, instance, text string, o runs.PromptOptions) (api.PromptReply, error) {
	if f.prompt == nil {
		return api.PromptReply{}, unexpected("Prompt")
	}
	return f.prompt(ctx, agent, instance, text, o)
}

func (f *fakeRuns) Session(ctx context.Context, agent, instance string) (api.SessionView, error) {
	if f.session == nil {
		return api.SessionView{}, unexpected("Session")
	}
	return f.session(ctx, agent, instance)
}

func (f *fakeRuns) ListSessions(ctx context.Context, limit int) ([]runs.SessionSummary, error) {
	if f.listSessions == nil {
		return nil, unexpected("ListSessions")
	}
	return f.listSessions(ctx, limit)
}

func (f *fakeRuns) CloseSession(ctx context.Context, agent, instance string) error {
	if f.closeSession == nil {
		return unexpected("CloseSession")
	}
	return f.closeSession(ctx, agent, instance)
}

func (f *fakeRuns) Interrupt(ctx context.Context, agent, instance string) (api.InterruptReply, error) {
	if f.interrupt == nil {
		return api.InterruptReply{}, unexpected("Interrupt")
	}
	return f.interrupt(ctx, agent, instance)
}

func (f *fakeRuns) Steer(ctx context.Context, agent, instance, text string) (api.SteerReply, error) {
	if f.steer == nil {
		return api.SteerReply{}, unexpected("Steer")
	}
	return f.steer(ctx, agent, instance, text)
}

func (f *fakeRuns) FollowSessionLive(ctx context.Context, agent, instance string, fn func(api.Record) bool, live func(api.LiveText)) error {
	if f.followSessionLive != nil {
		return f.followSessionLive(ctx, agent, instance, fn, live)
	}
	if f.followSession == nil {
		return unexpected("FollowSessionLive")
	}
	return f.followSession(ctx, agent, instance, fn)
}

// Notifications answers nothing when the fake has no notifications: most pages ask for
// them alongside what a test is about.
func (f *fakeRuns) Notifications(ctx context.Context) ([]api.NotifierStatus, error) {
	if f.notifications == nil {
		return nil, nil
	}
	return f.notifications(ctx)
}

func (f *fakeRuns) Approvals(ctx context.Context, req runs.ApprovalsRequest) ([]runs.Pending, error) {
	if f.approvals == nil {
		return nil, unexpected("Approvals")
	}
	return f.approvals(ctx, req)
}

// getRecords answers Get from a map of records; unknown ids are NotFoundError.
func getRecords(recs ...api.Record) func(context.Context, string) (api.Record, error) {
	return func(_ context.Context, id string) (api.Record, error) {
		for _, r := range recs {
			if r.ID == id {
				return r, nil
			}
		}
		return api.Record{}, &runs.NotFoundError{ID: id}
	}
}

var t0 = time.Date(2026, 11, 30, 9, 12, 1, 0, time.UTC)

// mustJSON encodes like the workflow's data converter does for the record: markup is not
// escaped, so the fixtures carry a literal <script>.
func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// docSuspended is a DocumentApproval run paused by its own Suspend.
func docSuspended() api.Record {
	return api.Record{
		ID: "run-doc", Workflow: "DocumentApproval", Status: api.StatusSuspended,
		Payload: json.RawMessage(`{"doc_id":"42"}`),
		State: map[string]json.RawMessage{
			"fetch":          json.RawMessage(`{"id":"42","title":"Document 42"}`),
			api.StateSuspend: mustJSON(api.SuspendInfo{Reason: "awaiting approval", At: t0}),
		},
		Events: []api.Event{
			{Seq: 1, Type: "fetching", Data: json.RawMessage(`{"doc_id":"42"}`), At: t0},
			{Seq: 2, Type: "checkpoint", Data: json.RawMessage(`{"name":"fetch"}`), At: t0},
			{Seq: 3, Type: "suspended", Data: json.RawMessage(`{"reason":"awaiting approval","resume_key":""}`), At: t0},
		},
		Artifacts: []api.Artifact{}, CreatedAt: t0, UpdatedAt: t0,
	}
}

// xss is what a hostile model or tool might produce.
const xss = `<script>alert("pwned")</script><img src=x onerror=alert(1)>`

// agentPending is an agent run waiting for approval of a write_file call whose arguments
// and earlier tool result carry markup.
func agentPending() api.Record {
	args := mustJSON(map[string]string{"path": "notes.md", "content": "hello " + xss})
	return api.Record{
		ID: "run-agent", Workflow: "AgentRun", Status: api.StatusSuspended,
		Payload: json.RawMessage(`{"agent":"scribe","prompt":"Write a note."}`),
		State: map[string]json.RawMessage{
			api.StateApproval: mustJSON(api.ApprovalInfo{CallID: "2.1", Capability: "write", Tool: "write_file", Args: args, ArgsSHA256: "sha-of-2.1", At: t0}),
		},
		Events: []api.Event{
			{Seq: 1, Type: "agent_start", Data: json.RawMessage(`{"agent":"scribe"}`), At: t0},
			{Seq: 2, Type: "agent_tool_result", Data: mustJSON(map[string]string{"call_id": "1.1", "result": xss}), At: t0},
			{Seq: 3, Type: "approval_requested", Data: json.RawMessage(`{"call_id":"2.1","tool":"write_file"}`), At: t0},
		},
		Artifacts: []api.Artifact{}, CreatedAt: t0, UpdatedAt: t0,
	}
}

func newServer(t *testing.T, f *fakeRuns, opts Options) *Server {
	t.Helper()
	opts.Runs = f
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// request is one request of a handler test.
type request struct {
	method, path, body string
	header             map[string]string
}

// do serves req on s and returns the response. The Host is loopback unless the request
// sets one, as a browser or curl on this machine would send it.
func do(t *testing.T, s http.Handler, req request) *http.Response {
	t.Helper()
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	r := httptest.NewRequest(req.method, req.path, body)
	r.Host = "127.0.0.1:8234"
	if req.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.header {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Result()
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantProblem checks resp is a problem document with status and a detail containing want.
func wantProblem(t *testing.T, resp *http.Response, status int, want string) Problem {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, body)
	}
	var p Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("decode problem: %v\n%s", err, body)
	}
	if p.Status != status || p.Title == "" || p.Type == "" || !strings.Contains(p.Detail, want) {
		t.Fatalf("problem = %+v, want status %d and a detail containing %q", p, status, want)
	}
	return p
}
