package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

// Sessions over HTTP: a prompt is one request that waits for the reply (update-with-start:
// it creates or reopens the session), the materialised history is a GET, and the activity
// stream is a Server-Sent Events stream that replays from any offset (older segments come
// from the session's archived stream artifacts) and follows the session across
// continue-as-new until it closes:
//
//	id: 12                               one message per activity-stream event, id = seq,
//	data: {"seq":12,"type":"text",...}   data = the event (user_input, text, thinking,
//	                                     tool_call, turn_end, approval_requested, ...)
//
//	event: live                          the text of the model call in flight as the model
//	data: {"call":"3.2","from":0,        writes it: "text" is the reply from byte "from"
//	       "text":"Hel"}                 on (append it when from is the end of what came
//	                                     before, replace from there when it is less); read
//	                                     from the call's heartbeat, not part of the stream
//	                                     (no id: a reconnect does not replay it). The call's
//	                                     text event (same "call") then has the whole text.
//
//	event: status                        first, and when the status changes (suspended:
//	data: {"status":"suspended",...}     a tool call waits for approval, see "pending")
//
//	event: end                           the session closed; the server ends the stream
//
//	event: problem                       the stream failed after it began (RFC 9457 doc)

// PromptBody is the body of POST /v1/sessions/{agent}/{instance}/prompt.
type PromptBody struct {
	Text string `json:"text"`
	// MaxTurns bounds this turn's model calls (absent: the agent's max_turns).
	MaxTurns *int `json:"max_turns,omitempty"`
	// Dir is the working directory of this turn's tools, relative to the workspace.
	Dir string `json:"dir,omitempty"`
}

// SteerBody is the body of POST /v1/sessions/{agent}/{instance}/steer.
type SteerBody struct {
	Text string `json:"text"`
}

// SessionList is the answer to GET /v1/sessions.
type SessionList struct {
	Sessions []runs.SessionSummary `json:"sessions"`
}

// maxAgentName bounds an agent name in a path.
const maxAgentName = 100

// sessionAddress reads and checks the {agent} and {instance} of a session route.
func sessionAddress(r *http.Request) (agent, instance string, err error) {
	agent, instance = r.PathValue("agent"), r.PathValue("instance")
	if err := checkAgentName(agent); err != nil {
		return "", "", err
	}
	if err := api.ValidateInstance(instance); err != nil {
		return "", "", badInput("%v", err)
	}
	return agent, instance, nil
}

// checkAgentName refuses names no agent can have: the session id is
// "session:<agent>:<instance>", so an agent name holds no ':'.
func checkAgentName(agent string) error {
	if agent == "" || len(agent) > maxAgentName || strings.ContainsAny(agent, ":/\\?#%") ||
		strings.IndexFunc(agent, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return badInput("agent %q: want the name of a configured agent (1-%d characters without spaces, ':' or '/')", agent, maxAgentName)
	}
	return nil
}

// sessionPath is the API path of a session.
func sessionPath(agent, instance string) string {
	return "/v1/sessions/" + url.PathEscape(agent) + "/" + url.PathEscape(instance)
}

// sessionErr says "no session" where package runs says "no run session:…", and what
// creates one; other errors pass as they are.
func sessionErr(agent, instance string, err error) error {
	var nf *runs.NotFoundError
	if errors.As(err, &nf) {
		return &inputError{status: http.StatusNotFound,
			msg: fmt.Sprintf("no session of agent %q with instance %q (a prompt creates it: POST %s/prompt)", agent, instance, sessionPath(agent, instance))}
	}
	var st *runs.StateError
	if errors.As(err, &st) && st.Hint == "" && st.Status.Closed() {
		c := *st
		c.Hint = "the session is closed; a prompt reopens it with its thread"
		return &c
	}
	return err
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	limit, err := listLimit(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := s.runsFor(r.Context()).ListSessions(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rows == nil {
		rows = []runs.SessionSummary{}
	}
	s.writeJSON(w, r, http.StatusOK, SessionList{Sessions: rows})
}

// listLimit reads ?limit= of a list (0: the runs package's default).
func listLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, badInput("limit %q: want a number from 1 to %d", v, maxListLimit)
	}
	return n, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	view, err := s.runsFor(r.Context()).Session(r.Context(), agent, instance)
	if err != nil {
		s.fail(w, r, sessionErr(agent, instance, err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, view)
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.runsFor(r.Context()).CloseSession(r.Context(), agent, instance); err != nil {
		s.fail(w, r, sessionErr(agent, instance, err))
		return
	}
	id := api.SessionID(agent, instance)
	s.writeJSON(w, r, http.StatusOK, Accepted{ID: id, Message: "closed session " + id + "; a prompt reopens it with its thread"})
}

// interruptSession answers POST /v1/sessions/{agent}/{instance}/interrupt once the turn
// in flight has ended (409 when none runs).
func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply, err := s.runsFor(r.Context()).Interrupt(r.Context(), agent, instance)
	if err != nil {
		s.fail(w, r, sessionErr(agent, instance, err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, reply)
}

// steerSession answers POST /v1/sessions/{agent}/{instance}/steer once a model call of
// the turn in flight took the message (409 when no turn runs, or it answered first).
func (s *Server) steerSession(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b SteerBody
	if err := s.decodeJSON(w, r, &b, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(b.Text) == "" {
		s.fail(w, r, badInput(`text is empty; send the message as {"text": "..."}`))
		return
	}
	reply, err := s.runsFor(r.Context()).Steer(r.Context(), agent, instance, b.Text)
	if err != nil {
		s.fail(w, r, sessionErr(agent, instance, err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, reply)
}

// promptSession answers POST /v1/sessions/{agent}/{instance}/prompt with the reply. The
// request lasts as long as the turn (a turn that waits for an approval waits with it).
func (s *Server) promptSession(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b PromptBody
	if err := s.decodeJSON(w, r, &b, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(b.Text) == "" {
		s.fail(w, r, badInput(`text is empty; send the prompt as {"text": "..."}`))
		return
	}
	opts := runs.PromptOptions{Dir: b.Dir}
	if b.MaxTurns != nil {
		if *b.MaxTurns < 1 || *b.MaxTurns > api.MaxPromptTurns {
			s.fail(w, r, badInput("max_turns %d: want a number of model calls from 1 to %d (leave it out for the agent's max_turns)", *b.MaxTurns, api.MaxPromptTurns))
			return
		}
		opts.MaxTurns = *b.MaxTurns
	}
	if _, err := api.CleanDir(b.Dir); err != nil {
		s.fail(w, r, badInput("%v", err))
		return
	}
	reply, err := s.prompt(r.Context(), agent, instance, b.Text, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, reply)
}

// prompt sends text to the session, giving up with a 503 when no worker takes the
// session up (an update that no worker accepts would otherwise wait forever).
func (s *Server) prompt(ctx context.Context, agent, instance, text string, opts runs.PromptOptions) (api.PromptReply, error) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go s.watchForWorker(pctx, cancel, agent, instance)
	reply, err := s.runsFor(pctx).Prompt(pctx, agent, instance, text, opts)
	if err == nil {
		return reply, nil
	}
	var noWorker *inputError
	if cause := context.Cause(pctx); ctx.Err() == nil && errors.As(cause, &noWorker) {
		return api.PromptReply{}, cause
	}
	return api.PromptReply{}, s.promptFailure(ctx, agent, instance, err)
}

// watchForWorker cancels a prompt whose session no worker takes up: two looks, half of
// workerWait apart, that both find the session never started by a worker (pending) or
// its worker not answering. One look could fall into the moment a session hands over to
// its continue-as-new run.
func (s *Server) watchForWorker(ctx context.Context, cancel context.CancelCauseFunc, agent, instance string) {
	id := api.SessionID(agent, instance)
	tick := time.NewTicker(s.workerWait / 2)
	defer tick.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rec, err := s.runs.Get(ctx, id)
		var nw *runs.NoWorkerError
		if errors.As(err, &nw) || (err == nil && (rec.Status == api.StatusPending || rec.Status == api.StatusQueued)) {
			misses++
		} else {
			misses = 0
		}
		if misses >= 2 {
			cancel(&inputError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf(
				"no worker took up session %s within %s (is a worker polling the platform's task queue?); "+
					"the prompt was not answered and may still be served once a worker runs, so check GET %s before sending it again",
				id, s.workerWait, sessionPath(agent, instance))})
			return
		}
	}
}

// promptFailure names what went wrong with a prompt: a session that could not start (404
// when the worker has no such agent or skill, else 502), or a turn that failed (502: the
// model or a tool failed; the session goes on).
func (s *Server) promptFailure(ctx context.Context, agent, instance string, err error) error {
	var start *runs.SessionStartError
	if errors.As(err, &start) {
		status := http.StatusBadGateway
		if start.Type == api.ErrTypeNotFound || start.Type == api.ErrTypeAgentUnavailable {
			status = http.StatusNotFound
		}
		return &inputError{status: status, msg: start.Error()}
	}
	if statusOf(err) != http.StatusInternalServerError || ctx.Err() != nil {
		return sessionErr(agent, instance, err)
	}
	if view, verr := s.runs.Session(ctx, agent, instance); verr == nil {
		for _, t := range slices.Backward(view.Turns) {
			if t.Error != "" && strings.Contains(err.Error(), t.Error) {
				return &inputError{status: http.StatusBadGateway,
					msg: fmt.Sprintf("turn %d of session %s failed: %s (the session goes on; its thread is as it was before this prompt)", t.N, view.ID, t.Error)}
			}
		}
	}
	return err
}

// sessionStream answers GET /v1/sessions/{agent}/{instance}/stream: the activity stream
// after ?after= (or Last-Event-ID), archived segments first, then live until the session
// closes.
func (s *Server) sessionStream(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := afterSeq(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var lastStatus api.Status
	follow := func(ctx context.Context, send func(followUpdate) bool) {
		var last api.Record
		err := s.runsFor(ctx).FollowSessionLive(ctx, agent, instance, func(rec api.Record) bool {
			last = rec
			return !send(followUpdate{rec: rec})
		}, func(l api.LiveText) { send(followUpdate{live: &l}) })
		send(followUpdate{rec: last, err: sessionErr(agent, instance, err), last: true})
	}
	s.serveStream(w, r, follow, func(ctx context.Context, buf *bytes.Buffer, u followUpdate) (bool, error) {
		if u.err != nil {
			return true, u.err
		}
		if l := u.live; l != nil {
			// Live thinking is an event of its own, of the same shape as live text:
			// {"call", "from", "text"}, text the reasoning from byte from on.
			if th := l.Thinking; th != nil {
				writeSSE(buf, "live_thinking", "", api.LiveText{Call: l.Call, From: th.From, Text: th.Text})
			} else {
				writeSSE(buf, "live", "", l)
			}
			return false, nil
		}
		// Events the record no longer holds (the session continued as new since) are in
		// its archived segments.
		first := int64(math.MaxInt64)
		if len(u.rec.Events) > 0 {
			first = u.rec.Events[0].Seq
		}
		if first > after+1 {
			old, err := s.archivedEvents(ctx, u.rec, after, first)
			after = writeEvents(buf, old, after)
			if err != nil {
				return true, err
			}
		}
		after = writeEvents(buf, u.rec.Events, after)
		// pending and queued are the moment a continue-as-new run has not begun: not news.
		if st := u.rec.Status; st != lastStatus && st != "" && st != api.StatusPending && st != api.StatusQueued && !u.last {
			writeSSE(buf, "status", "", sessionStatus(u.rec, after))
			lastStatus = st
		}
		if u.last {
			writeSSE(buf, "end", "", sessionStatus(u.rec, after))
		}
		return u.last, nil
	})
}

// sessionStatus is the data of a session stream's status and end events: a run's, without
// the result (a closed session's result is its whole thread).
func sessionStatus(rec api.Record, last int64) StreamStatus {
	st := streamStatus(rec)
	st.Result = nil
	st.LastSeq = max(st.LastSeq, last)
	return st
}

// archivedEvents returns the events with after < seq < before from rec's archived stream
// segments, in seq order (artifacts.StreamEvents).
func (s *Server) archivedEvents(ctx context.Context, rec api.Record, after, before int64) ([]api.Event, error) {
	out, err := artifacts.StreamEvents(ctx, s.store, rec, after, before)
	var seg *artifacts.SegmentError
	if errors.As(err, &seg) {
		err = fmt.Errorf("read archived stream segment %s of session %s (the gateway reads the store at artifacts.url; is it the one the worker writes?): %w",
			seg.Segment, seg.RunID, seg.Err)
	}
	return out, err
}
