package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// The event stream of GET /v1/runs/{id}/events with Accept: text/event-stream:
//
//	retry: 2000                          once: reconnect after 2 s if the connection drops
//
//	id: 7                                one message per run event, id = seq, data = the
//	data: {"seq":7,"type":...}           event as in the record (no "event:" field, so an
//	                                     EventSource's onmessage gets them)
//
//	event: status                        when the status changes (and first): the status,
//	data: {"status":"suspended",...}     and what a suspended run waits for ("pending")
//
//	event: retrying                      when the run's retried activities change (an
//	data: {"id":...,"retrying":[...]}    attempt failed again; [] when the retries ended):
//	                                     what the run waits on while history says nothing
//
//	event: end                           the run closed; the server ends the stream. A
//	data: {"status":"done",...}          client closes its EventSource here, or it would
//	                                     reconnect and get "end" again
//
//	event: problem                       the stream failed after it began (RFC 9457 doc)
//
// Reconnecting with Last-Event-ID resumes after that seq, so no event is lost or repeated.
// Comments (": keep-alive") keep idle streams open through proxies.

// Pending is what a suspended run waits for: a tool call (kind "tool_call") or the
// workflow's own pause (kind "suspend", call id "suspend"). Decide it with POST
// /v1/runs/{id}/approvals/{call_id}.
type Pending struct {
	Kind       string          `json:"kind"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	// ArgsSHA256 is what a decision on the call carries back (nexo.decide).
	ArgsSHA256 string     `json:"args_sha256,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	ResumeAt   *time.Time `json:"resume_at,omitempty"`
	At         time.Time  `json:"at"`
}

// Kinds of Pending.
const (
	PendingToolCall = "tool_call"
	PendingSuspend  = "suspend"
)

// pendingOf returns what rec waits for, or nil.
func pendingOf(rec api.Record) *Pending {
	if rec.Status != api.StatusSuspended {
		return nil
	}
	if a, ok := rec.Approval(); ok {
		p := &Pending{Kind: PendingToolCall, CallID: a.CallID, Tool: a.Tool, Capability: a.Capability, ArgsSHA256: a.ArgsSHA256, At: a.At}
		if len(a.Args) > 0 && string(a.Args) != "null" {
			p.Args = a.Args
		}
		return p
	}
	if si, ok := rec.Suspend(); ok {
		return &Pending{Kind: PendingSuspend, CallID: SuspendCallID, Reason: si.Reason, ResumeAt: si.ResumeAt, At: si.At}
	}
	return nil
}

// StreamStatus is the data of the stream's status and end events.
type StreamStatus struct {
	ID      string          `json:"id"`
	Status  api.Status      `json:"status"`
	Pending *Pending        `json:"pending,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *string         `json:"error,omitempty"`
	// LastSeq is the seq of the run's last event (0: none yet).
	LastSeq int64 `json:"last_seq"`
	// Warning says the run's record is incomplete, and why (api.Record.Warning).
	Warning string `json:"warning,omitempty"`
}

func streamStatus(rec api.Record) StreamStatus {
	st := StreamStatus{ID: rec.ID, Status: rec.Status, Pending: pendingOf(rec), Error: rec.Error, Warning: rec.Warning}
	if rec.Status.Closed() && len(rec.Result) > 0 && string(rec.Result) != "null" {
		st.Result = rec.Result
	}
	if n := len(rec.Events); n > 0 {
		st.LastSeq = rec.Events[n-1].Seq
	}
	return st
}

// StreamRetrying is the data of the run event stream's retrying event: the activities of
// the run that Temporal is retrying now (api.Record.Retrying), none when the retries ended.
type StreamRetrying struct {
	ID       string                `json:"id"`
	Retrying []api.PendingActivity `json:"retrying"`
}

// retryKey is what a retrying event says, to send one only when it changes.
func retryKey(ps []api.PendingActivity) string {
	var b bytes.Buffer
	for _, p := range ps {
		fmt.Fprintf(&b, "%s/%d/%s\n", p.ActivityID, p.Attempt, p.LastFailure)
	}
	return b.String()
}

// headerDelay: the stream's headers go out with the first record, or after this long,
// so a missing run is still a plain 404 while a run with nothing to show yet (no worker
// has picked it up) opens its stream without waiting.
const headerDelay = 250 * time.Millisecond

type followUpdate struct {
	rec  api.Record
	err  error
	last bool // the follow returned: rec is its final record
	// live, when set, is new live text (or, with Thinking set, live thinking) of a model
	// call (a session's), and the update carries nothing else.
	live *api.LiveText
}

// streamEvents follows run id and writes its events after seq after as they are recorded,
// until the run closes, the client leaves, or the server shuts down.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, id string, after int64) {
	var lastStatus api.Status
	lastRetry := ""
	follow := func(ctx context.Context, send func(followUpdate) bool) {
		rec, err := s.runsFor(ctx).Follow(ctx, id, func(rec api.Record) bool { return !send(followUpdate{rec: rec}) })
		send(followUpdate{rec: rec, err: err, last: true})
	}
	s.serveStream(w, r, follow, func(_ context.Context, buf *bytes.Buffer, u followUpdate) (bool, error) {
		if u.err != nil {
			return true, u.err
		}
		after = writeEvents(buf, u.rec.Events, after)
		if u.rec.Status != lastStatus && u.rec.Status != "" {
			writeSSE(buf, "status", "", streamStatus(u.rec))
			lastStatus = u.rec.Status
		}
		if k := retryKey(u.rec.Retrying); k != lastRetry {
			retrying := u.rec.Retrying
			if retrying == nil {
				retrying = []api.PendingActivity{}
			}
			writeSSE(buf, "retrying", "", StreamRetrying{ID: u.rec.ID, Retrying: retrying})
			lastRetry = k
		}
		closed := u.rec.Status.Closed()
		if closed || u.last {
			writeSSE(buf, "end", "", streamStatus(u.rec))
		}
		return closed || u.last, nil
	})
}

// serveStream is the transport of both event streams. follow runs in its own goroutine
// and reports records through send (false: stop, the client left) and, when it returns,
// a last update with its error. write turns one update into messages and says whether the
// stream is complete; an error from it (or in the update) is a plain problem document
// while nothing was sent yet, and a problem event after. The stream's headers go out with
// the first update or after headerDelay; it ends when write says so, the client leaves or
// the server shuts down.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request,
	follow func(ctx context.Context, send func(followUpdate) bool),
	write func(ctx context.Context, buf *bytes.Buffer, u followUpdate) (bool, error)) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel)
	defer stop()
	rc := http.NewResponseController(w)

	updates := make(chan followUpdate)
	go follow(ctx, func(u followUpdate) bool {
		select {
		case updates <- u:
			return true
		case <-ctx.Done():
			return false
		}
	})

	started := false
	start := func() {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "retry: 2000\n\n")
		started = true
	}
	var buf bytes.Buffer
	flush := func() bool {
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		buf.Reset()
		return rc.Flush() == nil
	}
	headerTimer := time.NewTimer(headerDelay)
	defer headerTimer.Stop()
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-headerTimer.C:
			if !started {
				start()
				if !flush() {
					return
				}
			}
		case <-keepAlive.C:
			if started {
				buf.WriteString(": keep-alive\n\n")
				if !flush() {
					return
				}
			}
		case u := <-updates:
			done, err := write(ctx, &buf, u)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !started {
					s.fail(w, r, err)
					return
				}
				status := statusOf(err)
				if status >= 500 {
					s.logger.Error("gateway stream failed", "path", r.URL.Path, "error", err)
				}
				writeSSE(&buf, "problem", "", Problem{Type: "about:blank", Title: http.StatusText(status),
					Status: status, Detail: err.Error(), Instance: r.URL.Path})
				flush()
				return
			}
			if !started {
				start()
			}
			if !flush() || done {
				return
			}
		}
	}
}

// writeSSE appends one message. JSON is one line (newlines inside strings are escaped),
// so a message needs one data line.
// writeEvents writes the events with seq after after as SSE messages (id = seq) and returns
// the last seq written (after when none was).
func writeEvents(buf *bytes.Buffer, evs []api.Event, after int64) int64 {
	for _, ev := range evs {
		if ev.Seq > after {
			writeSSE(buf, "", strconv.FormatInt(ev.Seq, 10), ev)
			after = ev.Seq
		}
	}
	return after
}

func writeSSE(buf *bytes.Buffer, event, id string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(`{"error":"encode event"}`)
	}
	if id != "" {
		fmt.Fprintf(buf, "id: %s\n", id)
	}
	if event != "" {
		fmt.Fprintf(buf, "event: %s\n", event)
	}
	fmt.Fprintf(buf, "data: %s\n\n", data)
}
