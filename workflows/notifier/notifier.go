// Package notifier is the outbox of approval notifications: one long-lived workflow (not a
// Nexo run) per receiver and task queue, which the runs hand their notifications to
// (signal-with-start, api.SignalNotify) and which delivers them, so that a notification
// belongs to no run: the run closes or continues as new at once, and each notification
// keeps its whole retry window (api.NotifyRetryFor from its event) whatever its run does.
//
// Its workflow type name is api.WorkflowNotifier, registered by workflows.RegisterAll.
package notifier

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// continueAfter bounds the notifier's history: a hand-over adds about four events (the
// signal and a workflow task), an attempt about eight (the activity's three, a backoff
// timer's two, workflow tasks), so a thousand stay far below Temporal's limits.
const continueAfter = 1000

// maxPending bounds the notifications a notifier holds (and continue-as-new carries); one
// handed over beyond it is failed at once, named, rather than growing the state past
// Temporal's payload limit. Each holds a reference, not the notification's body.
const maxPending = 5000

// seenFor is how long a run's last seq is remembered once it has nothing pending: a
// hand-over is repeated only by its local activity's retries, within seconds.
const seenFor = time.Hour

// Backoff between the attempts of one notification: InitialBackoff doubling up to
// MaxBackoff, or what the receiver asked for with Retry-After.
const (
	InitialBackoff = 2 * time.Second
	MaxBackoff     = 10 * time.Minute
)

// attemptTimeout bounds one delivery attempt (the POST itself times out at 30 s).
const attemptTimeout = time.Minute

// state is the notifier's state, as api.NotifierInput carries it.
type state struct {
	in       api.NotifierInput
	lanes    map[string]bool // run id → its lane goroutine is running
	ops      int             // hand-overs and attempts since this execution started
	stopping bool            // continue-as-new is under way: lanes start nothing new
	running  int             // lane goroutines not yet returned
}

// Workflow delivers the notifications of one receiver (workflow id api.NotifierID). It is
// not a Nexo run: no run record, no NexoStatus, no events.
//
// Each run has a lane: its notifications are delivered one at a time in the order they
// were handed over, which is their seq order (a run hands them over one by one, waiting
// for each). Lanes of different runs do not wait for each other, so one run's refused or
// slow notification holds no other run's. Each attempt is one activity
// (api.ActivityDeliverNotification, no server-side retries), so the notifier itself knows
// and shows each notification's attempts and last error (api.QueryNotifications); a
// retryable failure (5xx, 408, 429, unreachable) is tried again after a backoff until
// api.NotifyRetryFor has passed since the event, any other is final.
//
// When its history grows long it continues as new, carrying what is pending: lanes stop at
// their next backoff (an attempt under way finishes first), and the new execution resumes
// each notification with its attempts, last error and the time its next attempt is due.
func Workflow(ctx workflow.Context, in api.NotifierInput) error {
	st := &state{in: in, lanes: map[string]bool{}}
	if st.in.LastSeq == nil {
		st.in.LastSeq = map[string]api.NotifySeen{}
	}
	limit := in.ContinueAfter
	if limit <= 0 {
		limit = continueAfter
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryNotifications, func() (api.NotifierStatus, error) {
		return st.status(), nil
	}); err != nil {
		return err
	}
	lctx, stopLanes := workflow.WithCancel(ctx)
	for _, it := range st.in.Pending {
		st.startLane(lctx, it.RunID)
	}
	handed := workflow.GetSignalChannel(ctx, api.SignalNotify)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var it api.NotifyItem
			if !handed.Receive(ctx, &it) {
				return
			}
			st.handOver(lctx, workflow.Now(ctx), it)
		}
	})
	if err := workflow.Await(ctx, func() bool {
		return st.ops >= limit || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	st.stopping = true
	stopLanes()
	if err := workflow.Await(ctx, func() bool { return st.running == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	// Hand-overs already delivered to this execution go with the state, or they would be
	// lost with it.
	for {
		var it api.NotifyItem
		if !handed.ReceiveAsync(&it) {
			break
		}
		st.handOver(lctx, workflow.Now(ctx), it)
	}
	st.prune(workflow.Now(ctx))
	return workflow.NewContinueAsNewError(ctx, api.WorkflowNotifier, st.in)
}

// handOver takes notification it: a repeat of one already handed over is dropped; one
// beyond maxPending fails at once; any other waits its turn in its run's lane.
func (st *state) handOver(ctx workflow.Context, now time.Time, it api.NotifyItem) {
	st.ops++
	if seen, ok := st.in.LastSeq[it.RunID]; ok && it.Seq <= seen.Seq {
		return
	}
	st.in.LastSeq[it.RunID] = api.NotifySeen{Seq: it.Seq, At: now}
	it.Status, it.Attempts, it.LastError, it.NextAttempt, it.GaveUpAt = api.NotifyPending, 0, "", nil, nil
	if len(st.in.Pending) >= maxPending {
		st.fail(it, now, fmt.Sprintf("not sent: the outbox of %s holds %d notifications not delivered yet, its limit", st.in.Target.Name(), maxPending))
		return
	}
	st.in.Pending = append(st.in.Pending, it)
	if !st.stopping {
		st.startLane(ctx, it.RunID)
	}
}

// startLane starts the lane of runID unless it runs already.
func (st *state) startLane(ctx workflow.Context, runID string) {
	if st.lanes[runID] {
		return
	}
	st.lanes[runID] = true
	st.running++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() {
			delete(st.lanes, runID)
			st.running--
		}()
		st.lane(ctx, runID)
	})
}

// lane delivers runID's pending notifications in order until none is left or the
// notifier stops (ctx canceled).
func (st *state) lane(ctx workflow.Context, runID string) {
	for !st.stopping {
		i := st.head(runID)
		if i < 0 {
			return
		}
		it := &st.in.Pending[i]
		if it.NextAttempt != nil {
			if wait := it.NextAttempt.Sub(workflow.Now(ctx)); wait > 0 {
				if err := workflow.Sleep(ctx, wait); err != nil {
					return // stopping: the notification goes on with the state
				}
			}
		}
		st.attempt(ctx, runID)
	}
}

// head is the index in Pending of runID's first notification, or -1.
func (st *state) head(runID string) int {
	for i, it := range st.in.Pending {
		if it.RunID == runID {
			return i
		}
	}
	return -1
}

// attempt makes one attempt at runID's first notification and records its outcome.
func (st *state) attempt(ctx workflow.Context, runID string) {
	now := workflow.Now(ctx)
	i := st.head(runID)
	it := st.in.Pending[i]
	deadline := it.At.Add(api.NotifyRetryFor)
	if !now.Before(deadline) {
		st.giveUp(runID, now, "")
		return
	}
	st.ops++
	// A disconnected context: stopping lets an attempt under way finish, so it is neither
	// lost nor sent twice for want of its answer.
	actx, _ := workflow.NewDisconnectedContext(ctx)
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		StartToCloseTimeout:    attemptTimeout,
		ScheduleToCloseTimeout: deadline.Sub(now),
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	err := workflow.ExecuteActivity(actx, api.ActivityDeliverNotification,
		api.DeliverNotificationRequest{Target: st.in.Target, Ref: it.Ref}).Get(actx, nil)
	now = workflow.Now(ctx)
	// The slice may have moved while the attempt ran (hand-overs append to it).
	i = st.head(runID)
	p := &st.in.Pending[i]
	p.Attempts++
	if err == nil {
		st.in.Pending = append(st.in.Pending[:i], st.in.Pending[i+1:]...)
		st.in.Delivered++
		return
	}
	msg, final, retryAfter := failure(err)
	p.LastError = msg
	if final {
		st.giveUp(runID, now, "refused")
		return
	}
	delay := backoff(p.Attempts)
	if retryAfter > 0 {
		delay = retryAfter
	}
	next := now.Add(delay)
	if !next.Before(deadline) {
		st.giveUp(runID, now, "")
		return
	}
	p.NextAttempt = &next
}

// giveUp fails runID's first notification: refused (a final answer), or out of time.
func (st *state) giveUp(runID string, now time.Time, why string) {
	i := st.head(runID)
	it := st.in.Pending[i]
	st.in.Pending = append(st.in.Pending[:i], st.in.Pending[i+1:]...)
	if why == "" {
		why = fmt.Sprintf("gave up: not delivered within %s of its event", api.NotifyRetryFor)
		if it.LastError != "" {
			why += "; last error: " + it.LastError
		}
	} else {
		why = it.LastError
	}
	st.fail(it, now, why)
}

// fail records it as given up with lastError, keeping the latest api.NotifierKeepFailed.
func (st *state) fail(it api.NotifyItem, now time.Time, lastError string) {
	it.Status, it.LastError, it.NextAttempt = api.NotifyFailed, lastError, nil
	it.GaveUpAt = &now
	st.in.Failed = append(st.in.Failed, it)
	if over := len(st.in.Failed) - api.NotifierKeepFailed; over > 0 {
		st.in.Failed = append([]api.NotifyItem(nil), st.in.Failed[over:]...)
	}
}

// prune forgets the last seq of runs with nothing pending that handed nothing over for
// seenFor.
func (st *state) prune(now time.Time) {
	pending := map[string]bool{}
	for _, it := range st.in.Pending {
		pending[it.RunID] = true
	}
	for _, run := range slices.Sorted(maps.Keys(st.in.LastSeq)) {
		if seen := st.in.LastSeq[run]; !pending[run] && now.Sub(seen.At) > seenFor {
			delete(st.in.LastSeq, run)
		}
	}
}

// status is the answer to api.QueryNotifications (copies: the caller may keep them).
func (st *state) status() api.NotifierStatus {
	return api.NotifierStatus{
		Receiver:  st.in.Target.Name(),
		Pending:   append([]api.NotifyItem{}, st.in.Pending...),
		Failed:    append([]api.NotifyItem{}, st.in.Failed...),
		Delivered: st.in.Delivered,
	}
}

// backoff is the wait after the attempts-th failed attempt.
func backoff(attempts int) time.Duration {
	d := InitialBackoff
	for i := 1; i < attempts && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// failure is what an attempt's error says: its message, whether it is final (a
// non-retryable application error: the receiver refused the notification, or this worker
// cannot send it), and the delay the receiver asked for (Retry-After), if any.
func failure(err error) (msg string, final bool, retryAfter time.Duration) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message(), app.NonRetryable(), app.NextRetryDelay()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "the attempt timed out (" + timeout.TimeoutType().String() + ")", false, 0
	}
	return err.Error(), false, 0
}
