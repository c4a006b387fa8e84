package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/payloads"
)

// Live text. A session's model call in flight publishes its reply so far as the heartbeat
// details of its CompleteChat activity (api.LiveText: at most the last api.LiveTextMax
// bytes, and their offset in the reply), which the server keeps with the pending activity,
// never in history. A follower reads them with DescribeWorkflowExecution while such a call
// is pending, and hands on only the text it has not handed on before. When the call
// returns, the workflow records the whole text once, as a text event {"content", "call"}.
// The model's reasoning goes the same way, on its own: the heartbeat's Thinking part (its
// last api.LiveTextMax bytes and their offset in the reasoning), handed on as new
// thinking, until the call's thinking event {"content", "call"} is delivered.

const (
	// livePollEvery paces the reads while a model call runs: about the pace at which the
	// worker sends its heartbeats (activities.HeartbeatThrottle).
	livePollEvery = 200 * time.Millisecond
	// liveWaitEvery paces them while the call waits for a worker or for its next attempt,
	// or after a read failed.
	liveWaitEvery = time.Second
	// liveFirstEvery paces the reads of a call that has no text yet, for its first
	// liveFirstFor: the model's first words are what a viewer waits for, and a call that
	// just began publishes them at once (the first heartbeat is not throttled).
	liveFirstEvery = 40 * time.Millisecond
	liveFirstFor   = 2 * time.Second
	// liveDoneKept is how many calls with a delivered text event are remembered, to drop a
	// read that was answered before the call ended but handled after its event.
	liveDoneKept = 16
)

// liveFollow delivers the live text and thinking of one session's model calls. Its mutex
// serialises deliver with the follower's record callback, so a call's live text (thinking)
// is never handed on after a record holding the call's text (thinking) event.
type liveFollow struct {
	c       *Client
	id      string
	deliver func(api.LiveText)

	wake chan struct{} // a model call may have begun (buffered: one pending wake is enough)

	mu    sync.Mutex
	tail  liveTail // the text handed on
	think liveTail // the thinking handed on, by the same rules
	seen  int64    // seq of the last event checked for a text event
	ready bool     // a record was delivered: live text before it would come before its turn
	turn  int      // the newest turn whose user_input was delivered
}

// callTurn is the session turn of a model call's tag ("3.2": turn 3's second call), or 0
// for a tag of another shape.
func callTurn(call string) int {
	head, _, _ := strings.Cut(call, ".")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func newLiveFollow(c *Client, id string, deliver func(api.LiveText)) *liveFollow {
	return &liveFollow{c: c, id: id, deliver: deliver, wake: make(chan struct{}, 1)}
}

// poke says a model call may be pending: the poller reads until none is.
func (lf *liveFollow) poke() {
	if lf == nil {
		return
	}
	select {
	case lf.wake <- struct{}{}:
	default:
	}
}

// record is the follower's callback for rec, run under the same lock as deliveries; the
// text (thinking) events of rec end their calls' live text (thinking).
func (lf *liveFollow) record(rec api.Record, fn func(api.Record) bool) bool {
	if lf == nil {
		return fn(rec)
	}
	lf.mu.Lock()
	defer lf.mu.Unlock()
	lf.ready = true
	for _, ev := range rec.Events {
		if ev.Seq <= lf.seen {
			continue
		}
		lf.seen = ev.Seq
		tail := &lf.tail
		switch ev.Type {
		case api.StreamUserInput:
			var d struct {
				Turn int `json:"turn"`
			}
			if json.Unmarshal(ev.Data, &d) == nil && d.Turn > lf.turn {
				lf.turn = d.Turn
			}
			continue
		case api.StreamText:
		case api.StreamThinking:
			tail = &lf.think
		default:
			continue
		}
		var d struct {
			Call string `json:"call"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Call != "" {
			tail.finish(d.Call)
		}
	}
	return fn(rec)
}

// run reads the session's model calls each time it is woken, until none is pending, and
// returns when ctx ends.
func (lf *liveFollow) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-lf.wake:
		}
		for {
			wait, more := lf.poll(ctx)
			if !more {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// poll reads the session once, delivers the new live text of its pending model calls, and
// says whether to read again and after how long: while a CompleteChat activity is pending.
func (lf *liveFollow) poll(ctx context.Context) (wait time.Duration, more bool) {
	desc, err := lf.c.tc.DescribeWorkflowExecution(ctx, lf.id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		return liveWaitEvery, ctx.Err() == nil && !errors.As(err, &nf)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return 0, false
	}
	wait = liveWaitEvery
	var snaps []api.LiveText
	for _, pa := range desc.GetPendingActivities() {
		if n := pa.GetActivityType().GetName(); n != api.ActivityCompleteChat && n != api.ActivityHarnessStep {
			continue // a harness step streams its text as a model call does
		}
		more = true
		since := pa.GetScheduledTime()
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			wait = min(wait, livePollEvery)
			since = pa.GetLastStartedTime()
		}
		if pa.GetHeartbeatDetails() == nil && since != nil && time.Since(since.AsTime()) < liveFirstFor {
			wait = min(wait, liveFirstEvery)
		}
		if lt, ok := lf.liveText(ctx, pa); ok {
			snaps = append(snaps, lt)
		}
	}
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if !more {
		// No call in flight: a long session keeps no state of ended ones.
		lf.tail.calls, lf.think.calls = nil, nil
	}
	if !lf.ready {
		return wait, more // the next read hands the text on, after the record of its turn
	}
	for _, lt := range snaps {
		if lf.turn > 0 && callTurn(lt.Call) > lf.turn {
			// A turn's prompt (user_input) was delivered, but not this call's turn's yet:
			// its record comes after this read, e.g. the first of a run continued as new.
			// The next read hands the text on after it. (A record that shows no prompt at
			// all leaves the rule off: live text is never held for a prompt it cannot see.)
			continue
		}
		lf.handOn(lt)
	}
	return wait, more
}

// handOn delivers what is new in one snapshot: its thinking first (the model thinks
// before it writes), as a LiveText with only Thinking set, then its text, as a LiveText
// without Thinking. Called with lf.mu held.
func (lf *liveFollow) handOn(lt api.LiveText) {
	if th := lt.Thinking; th != nil && th.From >= 0 {
		if d, ok := lf.think.next(api.LiveText{Call: lt.Call, From: th.From, Text: th.Text}); ok {
			lf.deliver(api.LiveText{Call: d.Call, Thinking: &api.LiveThinking{From: d.From, Text: d.Text}})
		}
	}
	lt.Thinking = nil
	if d, ok := lf.tail.next(lt); ok {
		lf.deliver(d)
	}
}

// liveText decodes a pending model call's heartbeat details. A call without them (it has
// written nothing yet, or streams by signal: a run recorded before live text) or whose
// details are from an earlier attempt (the server keeps them until the new attempt beats)
// has none. Details over the worker's External Storage threshold are a reference, which
// DescribeWorkflowExecution does not resolve: they are read from the blob store.
func (lf *liveFollow) liveText(ctx context.Context, pa *workflowpb.PendingActivityInfo) (api.LiveText, bool) {
	details := pa.GetHeartbeatDetails()
	if len(details.GetPayloads()) != 1 {
		return api.LiveText{}, false
	}
	if hb, st := pa.GetLastHeartbeatTime(), pa.GetLastStartedTime(); hb == nil || (st != nil && hb.AsTime().Before(st.AsTime())) {
		return api.LiveText{}, false
	}
	p := details.GetPayloads()[0]
	if payloads.IsReference(p) {
		if lf.c.Payloads == nil {
			return api.LiveText{}, false
		}
		var err error
		if p, err = lf.c.Payloads.Resolve(ctx, p); err != nil {
			return api.LiveText{}, false
		}
	}
	var lt api.LiveText
	if err := lf.c.DataConverter.FromPayload(p, &lt); err != nil || lt.Call == "" || lt.From < 0 {
		return api.LiveText{}, false
	}
	return lt, true
}

// liveTail turns heartbeat snapshots of model calls (the reply's text from an offset)
// into the text a follower has not been given yet. Not safe for concurrent use.
type liveTail struct {
	calls map[string]*liveCall // calls with text handed on, by LiveText.Call
	done  []string             // the last liveDoneKept calls whose text event was delivered
}

// liveCall is what was handed on of one call's reply.
type liveCall struct {
	end  int    // offset after the last byte handed on
	tail string // the last bytes handed on (at most api.LiveTextMax), ending at end
}

// next returns the part of snap not handed on yet, as a LiveText whose Text starts at
// byte From of the reply:
//   - From equals the end of what was handed on for the call: new text to append;
//   - From is less: the text from From on replaces what was handed on from there (a
//     retried attempt that writes differently);
//   - From is more: the text between was never seen (a follower that joined after the
//     tail was cut); the call's text event carries all of it.
//
// A snapshot with nothing new, or of a call whose text event was delivered, gives false.
func (t *liveTail) next(snap api.LiveText) (api.LiveText, bool) {
	if snap.Call == "" || slices.Contains(t.done, snap.Call) {
		return api.LiveText{}, false
	}
	if t.calls == nil {
		t.calls = map[string]*liveCall{}
	}
	c := t.calls[snap.Call]
	if c == nil {
		c = &liveCall{}
		t.calls[snap.Call] = c
	}
	end := snap.From + len(snap.Text)
	out := api.LiveText{Call: snap.Call}
	switch lo, hi := max(snap.From, c.end-len(c.tail)), min(end, c.end); {
	case lo < hi && c.tail[lo-(c.end-len(c.tail)):hi-(c.end-len(c.tail))] != snap.Text[lo-snap.From:hi-snap.From]:
		// Replaced: hand on from the first byte that differs, at a rune start.
		had, now := c.tail[lo-(c.end-len(c.tail)):], snap.Text[lo-snap.From:]
		i := 0
		for i < len(had) && i < len(now) && had[i] == now[i] {
			i++
		}
		for i > 0 && !utf8.RuneStart(now[i]) {
			i--
		}
		out.From, out.Text = lo+i, now[i:]
	case end <= c.end:
		return api.LiveText{}, false
	case snap.From > c.end:
		out.From, out.Text = snap.From, snap.Text
	default:
		out.From, out.Text = c.end, snap.Text[c.end-snap.From:]
	}
	c.end, c.tail = end, snap.Text
	return out, true
}

// finish ends a call's live text: its text event was delivered.
func (t *liveTail) finish(call string) {
	delete(t.calls, call)
	if slices.Contains(t.done, call) {
		return
	}
	t.done = append(t.done, call)
	if len(t.done) > liveDoneKept {
		t.done = slices.Delete(t.done, 0, len(t.done)-liveDoneKept)
	}
}
