package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/payloads"
)

func TestLiveTailNext(t *testing.T) {
	type step struct {
		snap api.LiveText
		want *api.LiveText // nil: nothing to hand on
	}
	lt := func(call string, from int, text string) *api.LiveText {
		return &api.LiveText{Call: call, From: from, Text: text}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"grows", []step{
			{*lt("3.2", 0, "Hel"), lt("3.2", 0, "Hel")},
			{*lt("3.2", 0, "Hello wor"), lt("3.2", 3, "lo wor")},
			{*lt("3.2", 0, "Hello wor"), nil},
			{*lt("3.2", 0, "Hello world"), lt("3.2", 9, "ld")},
		}},
		{"an older, shorter snapshot adds nothing", []step{
			{*lt("1.1", 0, "Hello wor"), lt("1.1", 0, "Hello wor")},
			{*lt("1.1", 0, "Hel"), nil},
			{*lt("1.1", 0, "Hello world"), lt("1.1", 9, "ld")},
		}},
		{"a retried attempt that writes differently replaces from the first difference", []step{
			{*lt("1.1", 0, "Hello wor"), lt("1.1", 0, "Hello wor")},
			{*lt("1.1", 0, "Help"), lt("1.1", 3, "p")},
			{*lt("1.1", 0, "Help me"), lt("1.1", 4, " me")},
		}},
		{"a difference inside a rune starts at the rune", []step{
			{*lt("1.1", 0, "café"), lt("1.1", 0, "café")},
			{*lt("1.1", 0, "cafè!"), lt("1.1", 3, "è!")},
		}},
		{"tails past the limit", []step{
			{*lt("1.1", 0, "abcdef"), lt("1.1", 0, "abcdef")},
			{*lt("1.1", 4, "efghij"), lt("1.1", 6, "ghij")},
			{*lt("1.1", 8, "ijklmn"), lt("1.1", 10, "klmn")},
		}},
		{"a follower that joins late gets the tail with its offset", []step{
			{*lt("1.1", 100, "xyz"), lt("1.1", 100, "xyz")},
			{*lt("1.1", 101, "yz!"), lt("1.1", 103, "!")},
		}},
		{"calls are apart", []step{
			{*lt("1.1", 0, "one"), lt("1.1", 0, "one")},
			{*lt("1.2", 0, "two"), lt("1.2", 0, "two")},
			{*lt("1.1", 0, "one more"), lt("1.1", 3, " more")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tail liveTail
			for i, s := range tc.steps {
				got, ok := tail.next(s.snap)
				switch {
				case s.want == nil && ok:
					t.Errorf("step %d: next(%+v) = %+v, want nothing", i, s.snap, got)
				case s.want != nil && (!ok || got != *s.want):
					t.Errorf("step %d: next(%+v) = %+v, %v; want %+v", i, s.snap, got, ok, *s.want)
				}
			}
		})
	}
}

func TestLiveTailFinish(t *testing.T) {
	var tail liveTail
	tail.next(api.LiveText{Call: "2.1", Text: "Hel"})
	tail.finish("2.1")
	if got, ok := tail.next(api.LiveText{Call: "2.1", Text: "Hello wor"}); ok {
		t.Errorf("after the call's text event, next = %+v, want nothing", got)
	}
	for i := range liveDoneKept + 4 {
		tail.finish("9." + strings.Repeat("x", i))
	}
	if len(tail.done) != liveDoneKept {
		t.Errorf("remembers %d ended calls, want %d", len(tail.done), liveDoneKept)
	}
}

// describer answers DescribeWorkflowExecution from a script, one answer per call (the
// last one again when the script runs out).
type describer struct {
	client.Client
	mu      sync.Mutex
	answers []*workflowservice.DescribeWorkflowExecutionResponse
	calls   int
}

func (d *describer) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if len(d.answers) == 0 {
		return nil, serviceerror.NewNotFound("no such workflow")
	}
	a := d.answers[0]
	if len(d.answers) > 1 {
		d.answers = d.answers[1:]
	}
	return a, nil
}

func (d *describer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// chatPending is a session's describe answer with one pending model call; details nil:
// no heartbeat details; beatAt before the attempt's start: details of an earlier attempt.
func chatPending(t *testing.T, state enumspb.PendingActivityState, details any, beatAt time.Time) *workflowservice.DescribeWorkflowExecutionResponse {
	pa := &workflowpb.PendingActivityInfo{ActivityId: "5", ActivityType: &commonpb.ActivityType{Name: api.ActivityCompleteChat},
		State: state, LastStartedTime: timestamppb.New(t0), LastHeartbeatTime: timestamppb.New(beatAt)}
	if details != nil {
		p, err := converter.GetDefaultDataConverter().ToPayloads(details)
		if err != nil {
			t.Fatal(err)
		}
		pa.HeartbeatDetails = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
		PendingActivities: []*workflowpb.PendingActivityInfo{
			{ActivityId: "4", ActivityType: &commonpb.ActivityType{Name: api.ActivityRunTool}, State: enumspb.PENDING_ACTIVITY_STATE_STARTED},
			pa,
		},
	}
}

// asHarnessStep is r with its pending model call a pluggable loop's step instead.
func asHarnessStep(r *workflowservice.DescribeWorkflowExecutionResponse) *workflowservice.DescribeWorkflowExecutionResponse {
	r.PendingActivities[1].ActivityType.Name = api.ActivityHarnessStep
	return r
}

func idle() *workflowservice.DescribeWorkflowExecutionResponse {
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}
}

func TestLivePoll(t *testing.T) {
	started, scheduled := enumspb.PENDING_ACTIVITY_STATE_STARTED, enumspb.PENDING_ACTIVITY_STATE_SCHEDULED
	after := t0.Add(time.Second)
	for _, tc := range []struct {
		name    string
		answers []*workflowservice.DescribeWorkflowExecutionResponse
		want    []api.LiveText
		waits   []time.Duration // 0: stop polling
	}{
		{"text as it grows, then the call ends",
			[]*workflowservice.DescribeWorkflowExecutionResponse{
				chatPending(t, started, nil, t0), // written nothing yet
				chatPending(t, started, api.LiveText{Call: "3.2", Text: "Hel"}, after),
				chatPending(t, started, api.LiveText{Call: "3.2", Text: "Hello wor"}, after),
				idle(),
			},
			[]api.LiveText{{Call: "3.2", Text: "Hel"}, {Call: "3.2", From: 3, Text: "lo wor"}},
			[]time.Duration{livePollEvery, livePollEvery, livePollEvery, 0}},
		{"a harness step's text, as it grows, as a model call's",
			[]*workflowservice.DescribeWorkflowExecutionResponse{
				asHarnessStep(chatPending(t, started, api.LiveText{Call: "2", Text: "Half "}, after)),
				asHarnessStep(chatPending(t, started, api.LiveText{Call: "2", Text: "Half done."}, after)),
				idle(),
			},
			[]api.LiveText{{Call: "2", Text: "Half "}, {Call: "2", From: 5, Text: "done."}},
			[]time.Duration{livePollEvery, livePollEvery, 0}},
		{"thinking as it grows, then the text beside it, each handed on apart",
			[]*workflowservice.DescribeWorkflowExecutionResponse{
				chatPending(t, started, api.LiveText{Call: "3.2", Thinking: &api.LiveThinking{Text: "Let me"}}, after),
				chatPending(t, started, api.LiveText{Call: "3.2", Thinking: &api.LiveThinking{Text: "Let me see."}}, after),
				chatPending(t, started, api.LiveText{Call: "3.2", Text: "Yes", Thinking: &api.LiveThinking{Text: "Let me see."}}, after),
				chatPending(t, started, api.LiveText{Call: "3.2", Text: "Yes, it is", Thinking: &api.LiveThinking{Text: "Let me see."}}, after),
				idle(),
			},
			[]api.LiveText{
				{Call: "3.2", Thinking: &api.LiveThinking{Text: "Let me"}},
				{Call: "3.2", Thinking: &api.LiveThinking{From: 6, Text: " see."}},
				{Call: "3.2", Text: "Yes"},
				{Call: "3.2", From: 3, Text: ", it is"},
			},
			[]time.Duration{livePollEvery, livePollEvery, livePollEvery, livePollEvery, 0}},
		{"a retried attempt that thinks differently replaces the thinking from where it differs; a cut tail is a gap",
			[]*workflowservice.DescribeWorkflowExecutionResponse{
				chatPending(t, started, api.LiveText{Call: "1.1", Thinking: &api.LiveThinking{Text: "The user wants"}}, after),
				chatPending(t, started, api.LiveText{Call: "1.1", Thinking: &api.LiveThinking{Text: "The user asks"}}, after),
				chatPending(t, started, api.LiveText{Call: "1.1", Thinking: &api.LiveThinking{From: 40, Text: "tail"}}, after),
			},
			[]api.LiveText{
				{Call: "1.1", Thinking: &api.LiveThinking{Text: "The user wants"}},
				{Call: "1.1", Thinking: &api.LiveThinking{From: 9, Text: "asks"}},
				{Call: "1.1", Thinking: &api.LiveThinking{From: 40, Text: "tail"}},
			},
			[]time.Duration{livePollEvery, livePollEvery, livePollEvery}},
		{"details of an earlier attempt are not shown; a call waiting for a worker is read slowly",
			[]*workflowservice.DescribeWorkflowExecutionResponse{
				chatPending(t, started, api.LiveText{Call: "1.1", Text: "stale"}, t0.Add(-time.Second)),
				chatPending(t, scheduled, nil, t0),
			},
			nil,
			[]time.Duration{livePollEvery, liveWaitEvery}},
		{"keep-alive details of a run recorded before live text are not text",
			[]*workflowservice.DescribeWorkflowExecutionResponse{chatPending(t, started, "not live text", after)},
			nil,
			[]time.Duration{livePollEvery}},
		{"a closed session ends the polling",
			[]*workflowservice.DescribeWorkflowExecutionResponse{{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
				Status: enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW}}},
			nil,
			[]time.Duration{0}},
		{"a missing session ends the polling", nil, nil, []time.Duration{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []api.LiveText
			lf := newLiveFollow(New(&describer{answers: tc.answers}, "default", "q"), "session:a:b", func(l api.LiveText) { got = append(got, l) })
			lf.record(api.Record{}, func(api.Record) bool { return false })
			for i, want := range tc.waits {
				wait, more := lf.poll(context.Background())
				if !more {
					wait = 0
				}
				if wait != want {
					t.Errorf("poll %d: wait %v (more %v), want %v", i, wait, more, want)
				}
			}
			if !equalLive(got, tc.want) {
				t.Errorf("delivered %s, want %s", liveString(got), liveString(tc.want))
			}
		})
	}
}

func equalLive(a, b []api.LiveText) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if (x.Thinking == nil) != (y.Thinking == nil) || x.Thinking != nil && *x.Thinking != *y.Thinking {
			return false
		}
		x.Thinking, y.Thinking = nil, nil
		if x != y {
			return false
		}
	}
	return true
}

// A call's thinking event ends its live thinking only: its live text goes on until its
// text event.
func TestLiveAfterThinkingEvent(t *testing.T) {
	beat := func(text, thinking string) *workflowservice.DescribeWorkflowExecutionResponse {
		return chatPending(t, enumspb.PENDING_ACTIVITY_STATE_STARTED,
			api.LiveText{Call: "3.2", Text: text, Thinking: &api.LiveThinking{Text: thinking}}, t0.Add(time.Second))
	}
	d := &describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{beat("", "Hm, so"), beat("Hello", "Hm, so it is")}}
	var got []api.LiveText
	lf := newLiveFollow(New(d, "default", "q"), "session:a:b", func(l api.LiveText) { got = append(got, l) })
	lf.record(api.Record{}, func(api.Record) bool { return false })
	lf.poll(context.Background())
	data, _ := json.Marshal(map[string]string{"content": "Hm, so it is", "call": "3.2"})
	lf.record(api.Record{Events: []api.Event{{Seq: 7, Type: api.StreamThinking, Data: data}}}, func(api.Record) bool { return false })
	lf.poll(context.Background())
	want := []api.LiveText{{Call: "3.2", Thinking: &api.LiveThinking{Text: "Hm, so"}}, {Call: "3.2", Text: "Hello"}}
	if !equalLive(got, want) {
		t.Errorf("delivered %s, want %s", liveString(got), liveString(want))
	}
}

// liveString renders deliveries for a failure message (Thinking is a pointer).
func liveString(ls []api.LiveText) string {
	b, _ := json.Marshal(ls)
	return string(b)
}

// A read answered before the call ended but handled after the record with the call's
// text event hands nothing on: the follower has shown the whole text already.
func TestLiveAfterTextEvent(t *testing.T) {
	d := &describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		chatPending(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, api.LiveText{Call: "3.2", Text: "Hello wor"}, t0.Add(time.Second))}}
	var got []api.LiveText
	lf := newLiveFollow(New(d, "default", "q"), "session:a:b", func(l api.LiveText) { got = append(got, l) })
	data, _ := json.Marshal(map[string]string{"content": "Hello world", "call": "3.2"})
	lf.record(api.Record{Events: []api.Event{{Seq: 7, Type: api.StreamText, Data: data}}}, func(api.Record) bool { return false })
	lf.poll(context.Background())
	if len(got) != 0 {
		t.Errorf("delivered %+v after the call's text event, want nothing", got)
	}
}

// The poller reads only while woken and a model call is pending.
func TestLiveRunStopsWhenNoCallIsPending(t *testing.T) {
	d := &describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		chatPending(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, api.LiveText{Call: "1.1", Text: "Hi"}, t0.Add(time.Second)),
		idle(),
	}}
	delivered := make(chan api.LiveText, 4)
	lf := newLiveFollow(New(d, "default", "q"), "session:a:b", func(l api.LiveText) { delivered <- l })
	lf.record(api.Record{}, func(api.Record) bool { return false })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go lf.run(ctx)
	time.Sleep(3 * livePollEvery)
	if n := d.count(); n != 0 {
		t.Fatalf("the poller read the session %d times before a model call began, want 0", n)
	}
	lf.poke()
	select {
	case l := <-delivered:
		if l.Text != "Hi" {
			t.Errorf("delivered %+v, want Hi", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live text within 5 s of a wake")
	}
	deadline := time.Now().Add(5 * time.Second)
	for d.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	n := d.count()
	time.Sleep(3 * livePollEvery)
	if m := d.count(); n != 2 || m != n {
		t.Errorf("reads: %d, then %d after the call ended; want 2 and no more", n, m)
	}
}

// Live text waits for the follower's first record, which holds the turn it belongs to.
func TestLiveWaitsForTheFirstRecord(t *testing.T) {
	snap := chatPending(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, api.LiveText{Call: "1.1", Text: "Hi"}, t0.Add(time.Second))
	var got []api.LiveText
	lf := newLiveFollow(New(&describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{snap}}, "default", "q"),
		"session:a:b", func(l api.LiveText) { got = append(got, l) })
	lf.poll(context.Background())
	if len(got) != 0 {
		t.Fatalf("delivered %+v before any record", got)
	}
	lf.record(api.Record{}, func(api.Record) bool { return false })
	lf.poll(context.Background())
	if len(got) != 1 || got[0].Text != "Hi" {
		t.Errorf("after the first record: delivered %+v, want Hi", got)
	}
}

// Heartbeat details over the worker's External Storage threshold are a reference, which
// DescribeWorkflowExecution hands over as is: the live text is read from the blob store.
func TestLiveOffloadedDetails(t *testing.T) {
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	desc := chatPending(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, api.LiveText{Call: "1.1", Text: "offloaded text"}, t0.Add(time.Second))
	pa := desc.PendingActivities[1]
	// Through the SDK's own External Storage path, with a threshold the details pass.
	h, err := converter.NewPayloadHTTPHandler(converter.PayloadHTTPHandlerOptions{ExternalStorage: payloads.ExternalStorage(store, 16)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := protojson.Marshal(pa.HeartbeatDetails)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/encode", bytes.NewReader(body)))
	var encoded commonpb.Payloads
	if err := protojson.Unmarshal(rec.Body.Bytes(), &encoded); err != nil || !payloads.IsReference(encoded.Payloads[0]) {
		t.Fatalf("encode: %d %s (%v), want a reference", rec.Code, rec.Body, err)
	}
	pa.HeartbeatDetails = &encoded

	for _, withStore := range []bool{true, false} {
		var got []api.LiveText
		c := New(&describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{desc}}, "default", "q")
		if withStore {
			c.Payloads = payloads.NewDriver(store)
		}
		lf := newLiveFollow(c, "session:a:b", func(l api.LiveText) { got = append(got, l) })
		lf.record(api.Record{}, func(api.Record) bool { return false })
		lf.poll(context.Background())
		switch {
		case withStore && (len(got) != 1 || got[0].Text != "offloaded text"):
			t.Errorf("with the blob store: delivered %+v, want the offloaded text", got)
		case !withStore && len(got) != 0:
			t.Errorf("without the blob store: delivered %+v, want nothing", got)
		}
	}
}

// The first read of a turn's model call can come before the record of its prompt, e.g.
// in the run a session continued as new into: its live text waits for that record, so a
// watcher never sees a turn's text under the turn before it.
func TestLiveWaitsForItsTurnsPrompt(t *testing.T) {
	snap := chatPending(t, enumspb.PENDING_ACTIVITY_STATE_STARTED, api.LiveText{Call: "3.1", Text: "three"}, t0.Add(time.Second))
	var got []api.LiveText
	lf := newLiveFollow(New(&describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{snap}}, "default", "q"),
		"session:a:b", func(l api.LiveText) { got = append(got, l) })
	prompt := func(seq int64, turn int) api.Event {
		return api.Event{Seq: seq, Type: api.StreamUserInput, Data: json.RawMessage(fmt.Sprintf(`{"text":"p","turn":%d}`, turn))}
	}
	lf.record(api.Record{Events: []api.Event{prompt(1, 2)}}, func(api.Record) bool { return false })
	lf.poll(context.Background())
	if len(got) != 0 {
		t.Fatalf("delivered %+v of turn 3 while the record showed turn 2's prompt only", got)
	}
	lf.record(api.Record{Events: []api.Event{prompt(1, 2), prompt(2, 3)}}, func(api.Record) bool { return false })
	lf.poll(context.Background())
	if len(got) != 1 || got[0].Text != "three" {
		t.Errorf("after turn 3's prompt: delivered %+v, want three", got)
	}
}
