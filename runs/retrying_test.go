package runs

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/api"
)

const refused = `model fake-model: Post "http://127.0.0.1:1/v1/chat/completions": dial tcp 127.0.0.1:1: connect: connection refused`

// pendingCall is a pending activity of type typ at attempt, failed before with msg (none
// when ""), waiting for its next attempt at next (running when next is zero).
func pendingCall(typ, id string, attempt int32, msg string, next time.Time) *workflowpb.PendingActivityInfo {
	pa := &workflowpb.PendingActivityInfo{ActivityId: id, ActivityType: &commonpb.ActivityType{Name: typ},
		Attempt: attempt, MaximumAttempts: 21600, State: enumspb.PENDING_ACTIVITY_STATE_STARTED,
		ExpirationTime: timestamppb.New(t0.Add(6 * time.Hour))}
	if msg != "" {
		pa.LastFailure = &failurepb.Failure{Message: msg, StackTrace: "goroutine 1 [running]:\nmain.secret()",
			Cause: &failurepb.Failure{Message: "the cause, not shown"}}
	}
	if !next.IsZero() {
		pa.State = enumspb.PENDING_ACTIVITY_STATE_SCHEDULED
		pa.NextAttemptScheduleTime = timestamppb.New(next)
	}
	return pa
}

func running(pas ...*workflowpb.PendingActivityInfo) *workflowservice.DescribeWorkflowExecutionResponse {
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			Type: &commonpb.WorkflowType{Name: api.WorkflowAgentRun}, HistoryLength: 40},
		PendingActivities: pas,
	}
}

func TestRetryingOf(t *testing.T) {
	next := t0.Add(16 * time.Second)
	for _, tc := range []struct {
		name string
		desc *workflowservice.DescribeWorkflowExecutionResponse
		want []api.PendingActivity
	}{
		{"a first attempt is running, not retrying", running(pendingCall(api.ActivityCompleteChat, "7", 1, "", time.Time{})), nil},
		{"an attempt after a failure waits for its turn",
			running(pendingCall(api.ActivityCompleteChat, "7", 5, refused, next)),
			[]api.PendingActivity{{Name: "model call", Activity: api.ActivityCompleteChat, ActivityID: "7", Attempt: 5, MaxAttempts: 21600,
				LastFailure: refused, NextAttemptAt: &next}}},
		{"a tool call retried after a failure runs again",
			running(pendingCall(api.ActivityRunTool, "9", 2, "sandbox host gone", time.Time{})),
			[]api.PendingActivity{{Name: "tool call", Activity: api.ActivityRunTool, ActivityID: "9", Attempt: 2, MaxAttempts: 21600,
				LastFailure: "sandbox host gone", Running: true}}},
		{"another activity is named by its type",
			running(pendingCall(api.ActivityStageFiles, "3", 3, "disk full", next)),
			[]api.PendingActivity{{Name: api.ActivityStageFiles, Activity: api.ActivityStageFiles, ActivityID: "3", Attempt: 3, MaxAttempts: 21600,
				LastFailure: "disk full", NextAttemptAt: &next}}},
		{"a later attempt with no failure (a worker that vanished) is not a failure to show",
			running(pendingCall(api.ActivityCompleteChat, "7", 3, "", next)), nil},
		{"a closed run retries nothing", &workflowservice.DescribeWorkflowExecutionResponse{
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED},
			PendingActivities:     []*workflowpb.PendingActivityInfo{pendingCall(api.ActivityCompleteChat, "7", 5, refused, next)}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := retryingOf(tc.desc)
			for i := range got {
				if got[i].GivesUpAt == nil || !got[i].GivesUpAt.Equal(t0.Add(6*time.Hour)) {
					t.Errorf("gives up at %v, want %v", got[i].GivesUpAt, t0.Add(6*time.Hour))
				}
				got[i].GivesUpAt = nil
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if (g.NextAttemptAt == nil) != (w.NextAttemptAt == nil) || g.NextAttemptAt != nil && !g.NextAttemptAt.Equal(*w.NextAttemptAt) {
					t.Errorf("next attempt at %v, want %v", g.NextAttemptAt, w.NextAttemptAt)
				}
				g.NextAttemptAt, w.NextAttemptAt = nil, nil
				if g != w {
					t.Errorf("got %+v\nwant %+v", g, w)
				}
			}
		})
	}
}

func TestFailureText(t *testing.T) {
	long := strings.Repeat("é", 400)
	for _, tc := range []struct{ name, in, want string }{
		{"a plain message is kept", refused, refused},
		{"lines are one", "model m: HTTP 503:\n  upstream\tdown\n", "model m: HTTP 503: upstream down"},
		{"a URL's user information and query values are redacted",
			`Post "https://bob:hunter2@llm.example.com/v1/chat?key=AIzaSECRET&x=1#frag": EOF`,
			`Post "https://REDACTED@llm.example.com/v1/chat?key=REDACTED&x=REDACTED": EOF`},
		{"a bearer token is redacted", "proxy said: Authorization: Bearer abc.def-123 refused", "proxy said: Authorization: Bearer REDACTED refused"},
		{"an OpenAI-style key is redacted", "bad key sk-proj-0123456789abcdef given", "bad key sk-REDACTED given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureText(tc.in); got != tc.want {
				t.Errorf("failureText(%q)\n = %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("a long message is cut at a rune", func(t *testing.T) {
		got := failureText(long)
		if len(got) > api.MaxRetryFailure || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
			t.Fatalf("%d bytes: %q", len(got), got)
		}
		if strings.ContainsRune(strings.TrimSuffix(got, "…"), '\uFFFD') || strings.Trim(strings.TrimSuffix(got, "…"), "é") != "" {
			t.Errorf("cut inside a rune: %q", got)
		}
	})
}

func TestRetryLine(t *testing.T) {
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	p := api.PendingActivity{Name: "model call", Attempt: 5, LastFailure: "connection refused"}
	for _, tc := range []struct {
		name string
		edit func(*api.PendingActivity)
		want string
	}{
		{"waits for the next attempt", func(p *api.PendingActivity) { p.NextAttemptAt = at(15200 * time.Millisecond) },
			"model call retrying (attempt 5, next in 16 s): connection refused"},
		{"minutes", func(p *api.PendingActivity) { p.NextAttemptAt = at(125 * time.Second) },
			"model call retrying (attempt 5, next in 2 min 5 s): connection refused"},
		{"hours", func(p *api.PendingActivity) { p.NextAttemptAt = at(3*time.Hour + 10*time.Minute) },
			"model call retrying (attempt 5, next in 3 h 10 min): connection refused"},
		{"the attempt runs", func(p *api.PendingActivity) { p.Running = true },
			"model call retrying (attempt 5, running): connection refused"},
		{"the time has come and no worker took it yet", func(p *api.PendingActivity) { p.NextAttemptAt = at(-time.Second) },
			"model call retrying (attempt 5, due now): connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			tc.edit(&q)
			if got := RetryLine(q, t0); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// retryClient is one open run "r1" whose record is rec: Describe answers from a script
// (the last answer again once it runs out), and its history has nothing new, ever (a
// long poll that waits until its context ends), as while an activity is retried.
type retryClient struct {
	client.Client
	rec api.Record

	mu      sync.Mutex
	answers []*workflowservice.DescribeWorkflowExecutionResponse
	// delivered, when set, holds every read after the first until it is closed: the
	// follower has its first record, so the reads that follow are changes to it.
	delivered chan struct{}
	reads     int
}

func (c *retryClient) DescribeWorkflowExecution(ctx context.Context, _, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.mu.Lock()
	c.reads++
	wait := c.delivered != nil && c.reads > 1
	c.mu.Unlock()
	if wait {
		select {
		case <-c.delivered:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.answers[0]
	if len(c.answers) > 1 {
		c.answers = c.answers[1:]
	}
	return a, nil
}

func (c *retryClient) QueryWorkflow(_ context.Context, _, _ string, query string, _ ...any) (converter.EncodedValue, error) {
	pl, err := converter.GetDefaultDataConverter().ToPayloads(c.rec)
	if err != nil {
		return nil, err
	}
	return client.NewValue(pl), nil
}

func (c *retryClient) GetWorkflowHistory(ctx context.Context, _, _ string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	return quietHistory{ctx}
}

type quietHistory struct{ ctx context.Context }

func (quietHistory) HasNext() bool { return true }
func (q quietHistory) Next() (*historypb.HistoryEvent, error) {
	<-q.ctx.Done()
	return nil, q.ctx.Err()
}

func TestGetSaysWhatIsRetrying(t *testing.T) {
	t.Parallel()
	rec := api.Record{ID: "r1", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning}
	fc := &retryClient{rec: rec, answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		running(pendingCall(api.ActivityCompleteChat, "7", 5, refused, t0.Add(16*time.Second)))}}
	got, err := New(fc, "default", "nexo").Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Retrying) != 1 || got.Retrying[0].Attempt != 5 || got.Retrying[0].LastFailure != refused || got.Retrying[0].Name != "model call" {
		t.Fatalf("retrying %+v, want the model call's attempt 5", got.Retrying)
	}
	if line := RetryLine(got.Retrying[0], t0); line != "model call retrying (attempt 5, next in 16 s): "+refused {
		t.Errorf("line %q", line)
	}
}

// TestFollowSaysWhenARetryChanges: a follower waiting on a run whose history says
// nothing new gets the record again each time the retried attempt changes, and once
// more when the retries end; a callback that says stop then ends the follow.
func TestFollowSaysWhenARetryChanges(t *testing.T) {
	t.Parallel()
	rec := api.Record{ID: "r1", Workflow: api.WorkflowAgentRun, Status: api.StatusRunning, Events: events(2)}
	next := time.Now().Add(time.Hour)
	fc := &retryClient{rec: rec, answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		running(pendingCall(api.ActivityCompleteChat, "7", 1, "", time.Time{})), // the follow's own read
		running(pendingCall(api.ActivityCompleteChat, "7", 2, refused, next)),
		running(pendingCall(api.ActivityCompleteChat, "7", 2, refused, next)), // no change: not delivered
		running(pendingCall(api.ActivityCompleteChat, "7", 3, refused, next)),
		running(), // it succeeded
	}, delivered: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var attempts []int32
	returned := false
	var mu sync.Mutex
	var first sync.Once
	last, err := New(fc, "default", "nexo").Follow(ctx, "r1", func(r api.Record) bool {
		mu.Lock()
		defer mu.Unlock()
		defer first.Do(func() { close(fc.delivered) })
		if returned {
			t.Error("fn called after Follow returned")
		}
		switch len(r.Retrying) {
		case 0:
			attempts = append(attempts, 0)
		case 1:
			attempts = append(attempts, r.Retrying[0].Attempt)
		default:
			t.Errorf("retrying %+v", r.Retrying)
		}
		if len(r.Events) != 2 {
			t.Errorf("the record lost its events: %d", len(r.Events))
		}
		return len(attempts) == 4
	})
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if want := []int32{0, 2, 3, 0}; !equalInt32(attempts, want) {
		t.Errorf("records with attempts %v, want %v (none, 2, 3, none)", attempts, want)
	}
	if len(last.Retrying) != 0 || last.ID != "r1" {
		t.Errorf("last record %s retrying %+v", last.ID, last.Retrying)
	}
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
