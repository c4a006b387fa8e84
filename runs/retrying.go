package runs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/nexo-temporal/nexo/api"
)

// Retrying activities. Temporal retries a failed activity without a word to history: the
// run's history (and so its record) says nothing until the activity completes or runs out
// of retries, which for a model call whose endpoint is down is hours (llm.retry_for). The
// server knows, though: DescribeWorkflowExecution lists the run's pending activities with
// their attempt, the last attempt's failure and when the next one starts. Get reads them
// with the Describe it makes anyway (api.Record.Retrying), and a follow re-reads them
// while an activity is pending (retryWatch), so `show`, `--wait`, `logs -f`, the API and
// the run page all say what the run is waiting on.

// retryPollEvery paces a follower's reads of a run's pending activities while one is
// pending: about the pace of the retries' first backoffs (the model call's start at 2 s),
// and one cheap call a second per follower, only while an activity runs.
const retryPollEvery = time.Second

// activityNames are the human names of the activities a user meets retrying; any other
// is named by its type.
var activityNames = map[string]string{
	api.ActivityCompleteChat:  "model call",
	api.ActivityRunTool:       "tool call",
	api.ActivityCallMCPTool:   "MCP tool call",
	api.ActivityCompactThread: "thread compaction",
}

// retryingOf lists the pending activities of desc that are being retried: an attempt
// after the first, with the previous attempt's failure. An activity on its first attempt
// is just running, however long it takes.
func retryingOf(desc *workflowservice.DescribeWorkflowExecutionResponse) []api.PendingActivity {
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	var out []api.PendingActivity
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetAttempt() <= 1 || pa.GetLastFailure() == nil {
			continue
		}
		typ := pa.GetActivityType().GetName()
		p := api.PendingActivity{
			Name:        activityNames[typ],
			Activity:    typ,
			ActivityID:  pa.GetActivityId(),
			Attempt:     pa.GetAttempt(),
			MaxAttempts: pa.GetMaximumAttempts(),
			LastFailure: failureText(pa.GetLastFailure().GetMessage()),
			Running:     pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED,
		}
		if p.Name == "" {
			p.Name = typ
		}
		if t := pa.GetNextAttemptScheduleTime(); t != nil && !p.Running {
			at := t.AsTime()
			p.NextAttemptAt = &at
		}
		if t := pa.GetExpirationTime(); t != nil && !t.AsTime().IsZero() && t.AsTime().Unix() > 0 {
			at := t.AsTime()
			p.GivesUpAt = &at
		}
		out = append(out, p)
	}
	return out
}

// Redaction of a failure message: a provider's URL may carry credentials (user:password@,
// ?key=...), and an error may quote an Authorization header or a key.
var (
	urlInText    = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>]+`)
	bearerInText = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]+`)
	keyInText    = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{8,}`)
)

// redacted stands in for a secret.
const redacted = "REDACTED"

// failureText is msg as output may show it: one line, credentials redacted, at most
// api.MaxRetryFailure bytes (cut at a rune, marked with "…").
func failureText(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	msg = urlInText.ReplaceAllStringFunc(msg, redactURL)
	msg = bearerInText.ReplaceAllStringFunc(msg, func(s string) string {
		scheme, _, _ := strings.Cut(s, " ")
		return scheme + " " + redacted
	})
	msg = keyInText.ReplaceAllString(msg, "sk-"+redacted)
	if len(msg) <= api.MaxRetryFailure {
		return msg
	}
	const more = "…"
	cut := api.MaxRetryFailure - len(more)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + more
}

// redactURL keeps a URL's scheme, host, path and query keys, and replaces its user
// information and query values.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// RetryLine says what p waits on at now, as `show`, `--wait`, `logs -f` and the run page
// print it: "model call retrying (attempt 5, next in 16 s): connection refused".
func RetryLine(p api.PendingActivity, now time.Time) string {
	var when string
	switch {
	case p.Running:
		when = "running"
	case p.NextAttemptAt != nil && p.NextAttemptAt.After(now):
		when = "next in " + waitText(p.NextAttemptAt.Sub(now))
	default:
		when = "due now"
	}
	s := fmt.Sprintf("%s retrying (attempt %d, %s)", p.Name, p.Attempt, when)
	if p.LastFailure != "" {
		s += ": " + p.LastFailure
	}
	return s
}

// waitText is d in whole seconds, rounded up: "16 s", "2 min 5 s", "3 h 10 min".
func waitText(d time.Duration) string {
	secs := int64(math.Ceil(d.Seconds()))
	switch {
	case secs < 60:
		return fmt.Sprintf("%d s", secs)
	case secs < 3600:
		if secs%60 == 0 {
			return fmt.Sprintf("%d min", secs/60)
		}
		return fmt.Sprintf("%d min %d s", secs/60, secs%60)
	default:
		return fmt.Sprintf("%d h %d min", secs/3600, secs%3600/60)
	}
}

// sameRetrying reports whether a and b are the same attempts failing the same way: a
// follower is told again only when an attempt or its failure changes, not as the wait
// for the next attempt shortens.
func sameRetrying(a, b []api.PendingActivity) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ActivityID != b[i].ActivityID || a[i].Attempt != b[i].Attempt || a[i].LastFailure != b[i].LastFailure {
			return false
		}
	}
	return true
}

// retryWatch keeps a follow's records' Retrying current. The follow waits on the run's
// history, which a retry does not touch, so the watch reads the run's pending activities
// itself, every retryPollEvery while any is pending (the follow wakes it when one is
// scheduled or ends; an idle run costs nothing), and hands the follower the last record
// again, with the new Retrying, when the retried attempts change. Its mutex serialises
// the follower's callback between the follow and the watch.
type retryWatch struct {
	c    *Client
	id   string
	fn   func(api.Record) bool
	stop context.CancelFunc // ends the follow: fn said stop during a watch delivery
	wake chan struct{}      // an activity may have been scheduled or ended (one pending wake is enough)

	mu       sync.Mutex
	last     api.Record // the last record delivered; ID "" before the first
	retrying []api.PendingActivity
	done     bool // fn returned true
}

func newRetryWatch(c *Client, id string, fn func(api.Record) bool, stop context.CancelFunc) *retryWatch {
	return &retryWatch{c: c, id: id, fn: fn, stop: stop, wake: make(chan struct{}, 1)}
}

// poke asks for a read of the run's pending activities.
func (w *retryWatch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// deliver hands rec, with the retrying activities last read, to the follower, and says
// whether the follow is over (fn said stop now or before, or the run closed).
func (w *retryWatch) deliver(rec *api.Record) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		*rec = w.last
		return true
	}
	rec.Retrying = nil
	if !rec.Status.Closed() {
		rec.Retrying = w.retrying
	}
	w.last = *rec
	w.done = w.fn(*rec)
	return w.done || rec.Status.Closed()
}

// finished reports whether fn said stop during a watch delivery, and the record it got.
func (w *retryWatch) finished() (api.Record, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.done
}

// end stops the deliveries: the follow returns.
func (w *retryWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}

// update takes a new read; a change of the retried attempts is delivered with the last
// record (none before the follow delivered its first).
func (w *retryWatch) update(list []api.PendingActivity) {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := !sameRetrying(w.retrying, list)
	w.retrying = list
	if !changed || w.done || w.last.ID == "" || w.last.Status.Closed() {
		return
	}
	w.last.Retrying = list
	if w.done = w.fn(w.last); w.done {
		w.stop()
	}
}

// run reads the run's pending activities each time it is woken, until none is pending,
// and returns when ctx ends.
func (w *retryWatch) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for w.poll(ctx) {
			t.Reset(retryPollEvery)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// poll reads the run once and says whether to read again: while an activity is pending
// (or the read failed for a reason that may pass).
func (w *retryWatch) poll(ctx context.Context) bool {
	desc, err := w.c.tc.DescribeWorkflowExecution(ctx, w.id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		return ctx.Err() == nil && !errors.As(err, &nf)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false
	}
	w.update(retryingOf(desc))
	return len(desc.GetPendingActivities()) > 0
}
