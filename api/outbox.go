package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Notification outbox wire names. Approval notifications of runs recorded after
// ChangeNotifyOutbox are not the run's activities: the run hands each one to the notifier
// workflow of its receiver (one per receiver and task queue, not a run), which delivers
// them in seq order per run and retries each for NotifyRetryFor from its event, whether
// the run is still open, continued as new, or closed.
const (
	// WorkflowNotifier is the workflow type of a receiver's notifier (its outbox).
	WorkflowNotifier = "NexoNotifier"
	// SignalNotify hands a notifier one notification (NotifyItem); the run sends it with
	// signal-with-start (ActivityEnqueueNotification), so the first one starts the notifier.
	SignalNotify = "nexo.notify"
	// QueryNotifications answers a notifier's undelivered and failed notifications
	// (NotifierStatus).
	QueryNotifications = "nexo.notifications"
	// ActivityEnqueueNotification stores one notification's request in the blob store and
	// signals-with-start its receiver's notifier with the reference (a local activity of
	// the run).
	ActivityEnqueueNotification = "EnqueueNotification"
	// ActivityDeliverNotification makes one attempt to POST a stored notification to its
	// receiver (the notifier's activity; the notifier itself retries).
	ActivityDeliverNotification = "DeliverNotification"

	// NotifierIDPrefix starts the workflow id of a notifier (NotifierID); ordinary runs may
	// not take it.
	NotifierIDPrefix = "nexo-notify:"
)

// NotifyRetryFor is how long one notification is retried (5xx, 408, 429, a receiver that
// cannot be reached) from its event before it is given up.
const NotifyRetryFor = 6 * time.Hour

// Statuses of a notification in a notifier.
const (
	NotifyPending = "pending" // not delivered yet: waiting for its turn, being sent or retried
	NotifyFailed  = "failed"  // given up: refused (a 4xx, a secret the worker lacks) or out of time
)

// NotifierID is the workflow id of target's notifier on taskQueue: the receiver is named
// by a hash of what identifies it (its URL or the variable holding it, its secret's
// variable, allow_private), never by the URL itself, which may be a credential.
func NotifierID(taskQueue string, target NotifyTarget) string {
	return NotifierIDPrefix + taskQueue + ":" + ReceiverKey(target)
}

// ReceiverKey is the short hash that names target in its notifier's id.
func ReceiverKey(target NotifyTarget) string {
	h := sha256.New()
	for _, s := range []string{target.URL, target.URLEnv, target.SecretEnv, strconv.FormatBool(target.AllowPrivate)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// IsNotifierID reports whether id is a notifier's workflow id.
func IsNotifierID(id string) bool { return strings.HasPrefix(id, NotifierIDPrefix) }

// EnqueueNotificationRequest is the input of ActivityEnqueueNotification: the notification
// as the run's NotifyApproval activity used to take it, and the task queue of the run,
// whose workers hold the receiver's secret. It is a local activity's input, so it is not in
// the run's history; the notifier gets only a reference to it.
type EnqueueNotificationRequest struct {
	TaskQueue string                `json:"task_queue"`
	Request   NotifyApprovalRequest `json:"request"`
}

// NotifierInput starts a notifier and carries its state across continue-as-new.
type NotifierInput struct {
	// Target is the receiver; the notifier's activities read its secret (and its URL, when
	// URLEnv names it) on the worker.
	Target NotifyTarget `json:"target"`
	// Pending are the notifications not delivered yet, in the order they arrived.
	Pending []NotifyItem `json:"pending,omitempty"`
	// Failed are the latest notifications given up (at most NotifierKeepFailed).
	Failed []NotifyItem `json:"failed,omitempty"`
	// Delivered counts the notifications delivered since the notifier started.
	Delivered int64 `json:"delivered,omitempty"`
	// LastSeq is, per run, the highest seq handed over recently, so a repeated hand-over
	// (a retried local activity) is dropped.
	LastSeq map[string]NotifySeen `json:"last_seq,omitempty"`
	// ContinueAfter is the number of notifications handled after which the notifier
	// continues as new (0: its default). Tests lower it.
	ContinueAfter int `json:"continue_after,omitempty"`
}

// NotifierKeepFailed bounds the failed notifications a notifier keeps to show.
const NotifierKeepFailed = 100

// NotifySeen is the last seq of a run a notifier was handed, and when.
type NotifySeen struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
}

// NotifyItem is one notification in a notifier: which event of which run, where its
// request is stored (Ref, a blob sha256), and how its delivery goes.
type NotifyItem struct {
	RunID    string    `json:"run_id"`
	Workflow string    `json:"workflow,omitempty"`
	Agent    string    `json:"agent,omitempty"`
	Event    string    `json:"event"`
	Seq      int64     `json:"seq"`
	CallID   string    `json:"call_id,omitempty"`
	At       time.Time `json:"at"`
	Ref      string    `json:"ref"`
	// Status is NotifyPending or NotifyFailed.
	Status   string `json:"status"`
	Attempts int    `json:"attempts,omitempty"`
	// LastError is the last attempt's failure ("" before the first).
	LastError string `json:"last_error,omitempty"`
	// NextAttempt is when the next attempt is due, while it waits out a backoff.
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	// GaveUpAt is when a failed notification was given up.
	GaveUpAt *time.Time `json:"gave_up_at,omitempty"`
}

// NotifierStatus is a notifier's answer to QueryNotifications.
type NotifierStatus struct {
	// ID is the notifier's workflow id and Error why it did not answer (both set by the
	// client that asked, runs.Client.Notifications).
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
	// Receiver names the receiver as messages do (NotifyTarget.Name).
	Receiver  string       `json:"receiver"`
	Pending   []NotifyItem `json:"pending"`
	Failed    []NotifyItem `json:"failed"`
	Delivered int64        `json:"delivered"`
}

// DeliverNotificationRequest is the input of ActivityDeliverNotification.
type DeliverNotificationRequest struct {
	Target NotifyTarget `json:"target"`
	Ref    string       `json:"ref"`
}
