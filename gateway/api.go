package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

//go:embed openapi.json
var openAPIDoc []byte

// SuspendCallID is the call id under which the approvals endpoint decides a run paused by
// the workflow's own Suspend (not by a tool call): POST /v1/runs/{id}/approvals/suspend
// resumes it with {"approved": bool, "reason"?, "approver"?}, exactly like `starter
// approve` / `starter deny`. Tool call ids never take this form ("1.1", "2.3", ...).
const SuspendCallID = "suspend"

// Limits of query parameters and body fields.
const (
	maxListLimit = 1000
	maxByLength  = 100
)

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
}

// StartBody is the body of POST /v1/runs.
type StartBody struct {
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input,omitempty"`
	ID       string          `json:"id,omitempty"`
	// StartDelay is a Go duration ("90s", "10m"); the run is queued until it elapses.
	StartDelay string `json:"start_delay,omitempty"`
}

// RerunBody is the optional body of POST /v1/runs/{id}/rerun.
type RerunBody struct {
	// Input replaces the failed run's payload (to fix what made it fail); absent, the
	// re-run gets the same payload.
	Input json.RawMessage `json:"input,omitempty"`
}

// Created is the answer to POST /v1/runs and POST /v1/runs/{id}/rerun.
type Created struct {
	ID      string `json:"id"`
	RerunOf string `json:"rerun_of,omitempty"`
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	var b StartBody
	if err := s.decodeJSON(w, r, &b, false); err != nil {
		s.fail(w, r, err)
		return
	}
	req := runs.StartRequest{Workflow: b.Workflow, Payload: b.Input, ID: b.ID}
	if b.StartDelay != "" {
		d, err := time.ParseDuration(b.StartDelay)
		if err != nil {
			s.fail(w, r, badInput("start_delay %q: want a duration such as \"90s\" or \"10m\"", b.StartDelay))
			return
		}
		req.StartDelay = d
	}
	if b.ID != "" {
		// The rule every entry point shares (runs.Start applies it too).
		if err := api.ValidateRunID(b.ID); err != nil {
			s.fail(w, r, badInput("id: %v", err))
			return
		}
	}
	id, err := s.runsFor(r.Context()).Start(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", runPath(id))
	s.writeJSON(w, r, http.StatusCreated, Created{ID: id})
}

func runPath(id string) string { return "/v1/runs/" + url.PathEscape(id) }

// RunList is the answer to GET /v1/runs.
type RunList struct {
	Runs []runs.Summary `json:"runs"`
	// NextPageToken, when set, fetches the next page (?page_token=...).
	NextPageToken string `json:"next_page_token,omitempty"`
}

// listRequest reads GET /v1/runs's (and the runs page's) query parameters.
func listRequest(q url.Values) (runs.ListRequest, error) {
	var req runs.ListRequest
	if v := q.Get("status"); v != "" {
		st, err := api.ParseStatus(v)
		if err != nil {
			return req, badInput("status: %v", err)
		}
		req.Status = st
	}
	req.Workflow = q.Get("workflow")
	req.Search = strings.TrimSpace(q.Get("q"))
	limit, err := listLimit(q)
	if err != nil {
		return req, err
	}
	req.Limit = limit
	if v := q.Get("page_token"); v != "" {
		tok, err := decodePageToken(v)
		if err != nil {
			return req, err
		}
		req.PageToken = tok
	}
	return req, nil
}

// pageTokenSum is how many bytes of a page token's sha256 lead the token.
const pageTokenSum = 4

// encodePageToken wraps Temporal's next-page token for a URL, behind a short checksum:
// Temporal takes seconds to refuse a token it cannot read (and calls it an internal
// error), so one that was not issued here is refused before it is sent.
func encodePageToken(tok []byte) string {
	sum := sha256.Sum256(tok)
	return base64.RawURLEncoding.EncodeToString(append(sum[:pageTokenSum:pageTokenSum], tok...))
}

// decodePageToken is encodePageToken's inverse; anything else is a 400.
func decodePageToken(v string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err == nil && len(b) > pageTokenSum {
		tok := b[pageTokenSum:]
		if sum := sha256.Sum256(tok); bytes.Equal(sum[:pageTokenSum], b[:pageTokenSum]) {
			return tok, nil
		}
	}
	return nil, badInput("page_token %.40q is not a token this API returned; pass next_page_token as it came, or leave it out for the first page", v)
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	req, err := listRequest(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, next, err := s.runsFor(r.Context()).List(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rows == nil {
		rows = []runs.Summary{}
	}
	out := RunList{Runs: rows}
	if len(next) > 0 {
		out.NextPageToken = encodePageToken(next)
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	rec, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, rec)
}

// events answers GET /v1/runs/{id}/events: a live stream for Accept: text/event-stream,
// else the JSON array of events after ?after=SEQ.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	after, err := afterSeq(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if acceptsEventStream(r) {
		if p := principalFrom(r.Context()); p != nil && !p.limits.Unlimited() {
			// Before the stream opens, so a run outside the token's limits is the plain
			// 404 an unknown id gets, however long its record takes to read.
			if _, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id")); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		s.streamEvents(w, r, r.PathValue("id"), after)
		return
	}
	rec, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rec.Warning != "" {
		// The array has no room for it: the events may be missing, say so.
		w.Header().Set(headerRecordWarning, rec.Warning)
	}
	s.writeJSON(w, r, http.StatusOK, eventsAfter(rec, after))
}

// headerRecordWarning carries api.Record.Warning on the events list of a run whose record
// is incomplete.
const headerRecordWarning = "Nexo-Record-Warning"

// afterSeq is where a client's event list resumes: Last-Event-ID (set by an EventSource
// reconnecting) wins over ?after=.
func afterSeq(r *http.Request) (int64, error) {
	for _, src := range []struct{ name, v string }{
		{"Last-Event-ID", r.Header.Get("Last-Event-ID")},
		{"after", r.URL.Query().Get("after")},
	} {
		if src.v == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(src.v), 10, 64)
		if err != nil || n < 0 {
			return 0, badInput("%s %q: want an event seq (0 or more)", src.name, src.v)
		}
		return n, nil
	}
	return 0, nil
}

func acceptsEventStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

func eventsAfter(rec api.Record, after int64) []api.Event {
	out := []api.Event{}
	for _, ev := range rec.Events {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	return out
}

// ResumeBody is the body of POST /v1/runs/{id}/resume.
type ResumeBody struct {
	Input     map[string]any `json:"input,omitempty"`
	ResumeKey string         `json:"resume_key,omitempty"`
	// At (RFC 3339) or In (a Go duration) schedule the resume on a durable timer.
	At string `json:"at,omitempty"`
	In string `json:"in,omitempty"`
}

// Accepted is the answer to a request that signalled a run: Temporal has the signal;
// the run acts on it when a worker runs it (follow the events to see it happen).
type Accepted struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	// For decisions: what was decided and by whom.
	CallID   string `json:"call_id,omitempty"`
	Approved *bool  `json:"approved,omitempty"`
	Action   string `json:"action,omitempty"`
	By       string `json:"by,omitempty"`
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) {
	var b ResumeBody
	if err := s.decodeJSON(w, r, &b, true); err != nil {
		s.fail(w, r, err)
		return
	}
	req := runs.ResumeRequest{Input: b.Input, Key: b.ResumeKey}
	switch {
	case b.At != "" && b.In != "":
		s.fail(w, r, badInput("give at or in, not both"))
		return
	case b.At != "":
		at, err := time.Parse(time.RFC3339, b.At)
		if err != nil {
			s.fail(w, r, badInput("at %q: want RFC 3339 such as 2026-12-01T09:00:00Z", b.At))
			return
		}
		req.At = at
	case b.In != "":
		d, err := time.ParseDuration(b.In)
		if err != nil || d < 0 {
			s.fail(w, r, badInput("in %q: want a positive duration such as \"2h\"", b.In))
			return
		}
		req.At = time.Now().Add(d)
	}
	id := r.PathValue("id")
	if err := s.runsFor(r.Context()).Resume(r.Context(), id, req); err != nil {
		s.fail(w, r, err)
		return
	}
	msg := "resumed run " + id
	if !req.At.IsZero() {
		msg = fmt.Sprintf("run %s resumes at %s", id, req.At.UTC().Format(time.RFC3339))
	}
	s.writeJSON(w, r, http.StatusAccepted, Accepted{ID: id, Message: msg})
}

// DecisionBody is the body of POST /v1/runs/{id}/approvals/{call_id}.
type DecisionBody struct {
	// Approved is required unless Action is given: true approves, false denies.
	Approved *bool `json:"approved"`
	// Action, instead of Approved: "approve", "deny" or "answer" (tool calls only).
	Action string `json:"action,omitempty"`
	// Args, with an approval of a tool call, are edited arguments (a JSON object) the
	// call runs with instead of the model's.
	Args json.RawMessage `json:"args,omitempty"`
	// Result, with action "answer", is the text the model gets instead of the tool's.
	Result string `json:"result,omitempty"`
	// ArgsSHA256 is the pending call's args_sha256 (state __approval__); when empty the
	// gateway fills it from the record it reads.
	ArgsSHA256 string `json:"args_sha256,omitempty"`
	// Reason is required to deny; the workflow or the model sees it.
	Reason string `json:"reason,omitempty"`
	// Always approves this tool for the rest of the run (tool calls only).
	Always bool `json:"always,omitempty"`
	// By names the person a token acts for; it is recorded after the token's name
	// ("rails (ada)"). On an open gateway it is recorded as given (default "local").
	By string `json:"by,omitempty"`
	// Budget, with an approval of a budget pause, is what the reached bound is raised by.
	Budget *api.BudgetRaise `json:"budget,omitempty"`
}

// decide answers POST /v1/runs/{id}/approvals/{call_id}: a pending tool call gets the
// nexo.decide Update (a decision the run refuses is a 409 with the run's reason, and
// leaves no trace); call id "suspend" resumes a run paused by the workflow itself.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	var b DecisionBody
	if err := s.decodeJSON(w, r, &b, false); err != nil {
		s.fail(w, r, err)
		return
	}
	switch b.Action {
	case "":
		if b.Approved == nil {
			s.fail(w, r, badInput(`approved is required: true to approve, false to deny (or give action: approve, deny or answer)`))
			return
		}
	case api.DecideApprove, api.DecideDeny, api.DecideAnswer:
		approved := b.Action == api.DecideApprove
		if b.Approved != nil && *b.Approved != approved {
			s.fail(w, r, badInput("approved %v contradicts action %q; give one of them", *b.Approved, b.Action))
			return
		}
		b.Approved = &approved
	default:
		s.fail(w, r, badInput("action %q: want approve, deny or answer", b.Action))
		return
	}
	if b.Action != api.DecideAnswer && !*b.Approved && strings.TrimSpace(b.Reason) == "" {
		s.fail(w, r, badInput("a denial needs a reason (the workflow or the model sees it)"))
		return
	}
	if len(b.By) > maxByLength || strings.IndexFunc(b.By, unicode.IsControl) >= 0 {
		s.fail(w, r, badInput("by: want at most %d characters without control characters", maxByLength))
		return
	}
	id, callID := r.PathValue("id"), r.PathValue("call_id")
	d := runs.Decision{Approved: *b.Approved, Reason: b.Reason, Always: b.Always,
		By: principalFrom(r.Context()).decider(b.By), Action: b.Action, Args: b.Args, Result: b.Result, ArgsSHA256: b.ArgsSHA256,
		Budget: b.Budget}
	var (
		what string
		err  error
	)
	if callID == SuspendCallID {
		what, err = s.decideSuspend(r.Context(), id, d)
	} else {
		d.CallID = callID
		what, _, err = s.runsFor(r.Context()).Decide(r.Context(), id, d)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	acc := Accepted{ID: id, Message: what, CallID: callID, Approved: b.Approved, Action: b.Action, By: d.By}
	if b.Action == api.DecideAnswer {
		acc.Approved = nil // neither: the human answered instead of the tool
	}
	s.writeJSON(w, r, http.StatusAccepted, acc)
}

// decideSuspend decides a workflow's own pause, refusing when the run waits for a tool
// call instead: "suspend" must never approve a tool call its caller did not name.
func (s *Server) decideSuspend(ctx context.Context, id string, d runs.Decision) (string, error) {
	if d.Always {
		return "", badInput("always applies to tool calls only, not to call %q", SuspendCallID)
	}
	rec, err := s.runsFor(ctx).Get(ctx, id)
	if err != nil {
		return "", err
	}
	if a, ok := rec.Approval(); ok && rec.Status == api.StatusSuspended {
		return "", &runs.StateError{ID: id, Status: rec.Status, Want: "suspended by the workflow",
			Hint: fmt.Sprintf("it waits for approval of tool call %s (%s); decide /approvals/%s", a.CallID, a.Tool, a.CallID)}
	}
	return s.runsFor(ctx).DecideRecord(ctx, rec, d)
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	what, err := s.runsFor(r.Context()).Cancel(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, Accepted{ID: id, Message: what})
}

func (s *Server) rerunRun(w http.ResponseWriter, r *http.Request) {
	var b RerunBody
	if err := s.decodeJSON(w, r, &b, true); err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	newID, err := s.runsFor(r.Context()).Rerun(r.Context(), id, b.Input)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", runPath(newID))
	s.writeJSON(w, r, http.StatusCreated, Created{ID: newID, RerunOf: id})
}

func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) {
	rec, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list := rec.Artifacts
	if list == nil {
		list = []api.Artifact{}
	}
	s.writeJSON(w, r, http.StatusOK, list)
}

// getArtifact serves an artifact's bytes with a content type from its name. The bytes
// are whatever a workflow, a model or a tool wrote, so they are served sandboxed (no
// script, an opaque origin): an HTML artifact renders but cannot act as the page.
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	rec, err := s.runsFor(r.Context()).Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	a, ok := rec.FindArtifact(name)
	if !ok {
		names := make([]string, 0, len(rec.Artifacts))
		for _, a := range rec.Artifacts {
			names = append(names, a.Name)
		}
		s.fail(w, r, fmt.Errorf("run %s has no artifact %q (it has: %s): %w", id, name, strings.Join(names, ", "), artifacts.ErrNotFound))
		return
	}
	body, err := artifacts.Read(r.Context(), s.store, id, a)
	if err != nil {
		if errors.Is(err, artifacts.ErrNotFound) {
			err = fmt.Errorf("%w (the gateway reads the store at artifacts.url; is it the one the worker writes?)", err)
		}
		s.fail(w, r, err)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = http.DetectContentType(body)
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'")
	h.Set("Cache-Control", "private, no-cache")
	if a.SHA256 != "" {
		h.Set("ETag", `"`+a.SHA256+`"`)
	}
	disposition := "inline"
	if r.URL.Query().Has("download") {
		disposition = "attachment"
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": name}))
	http.ServeContent(w, r, "", a.At, bytes.NewReader(body))
}
