package activities

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/netguard"
)

// NotifyUserAgent is the User-Agent of approval notifications.
const NotifyUserAgent = "nexo-notify/1"

// notifyTimeout bounds one POST to a receiver; the activity's retry policy does the rest.
const notifyTimeout = 30 * time.Second

// notifyClients post notifications, one for receivers on public addresses only and one
// for those that allow private ones (AllowPrivate). The address is vetted where it is
// dialled (netguard.Control), after DNS resolution, so a receiver's name that resolves or
// rebinds to an internal or metadata address is refused too; no proxy is used, since a
// proxy would dial for us past the guard. They do not follow redirects: a POST redirected
// with 301/302 would arrive as a GET, so a 3xx answer fails the notification, naming the
// answer.
var notifyClients = [2]*http.Client{newNotifyClient(false), newNotifyClient(true)}

func newNotifyClient(allowPrivate bool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, Control: netguard.Control(allowPrivate)}).DialContext
	return &http.Client{
		Timeout:       notifyTimeout,
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func notifyClient(t api.NotifyTarget) *http.Client {
	if t.AllowPrivate {
		return notifyClients[1]
	}
	return notifyClients[0]
}

// withNotify gives spec the worker's receivers of approval notifications
// (approvals.notify) unless its definition names its own. The resolved spec is recorded,
// so the run notifies the receivers it started with.
func (a *Model) withNotify(spec agents.Spec) agents.Spec {
	if len(spec.Notify) == 0 && len(a.notify) > 0 {
		spec.Notify = append([]api.NotifyTarget(nil), a.notify...)
	}
	return spec
}

// Register registers NotifyApproval (the runs recorded before the outbox) and the outbox's
// EnqueueNotification (a run's local activity) and DeliverNotification (a notifier's).
func (a *Notifier) Register(r Registry) {
	r.RegisterActivityWithOptions(a.NotifyApproval, activity.RegisterOptions{Name: api.ActivityNotifyApproval})
	r.RegisterActivityWithOptions(a.EnqueueNotification, activity.RegisterOptions{Name: api.ActivityEnqueueNotification})
	r.RegisterActivityWithOptions(a.DeliverNotification, activity.RegisterOptions{Name: api.ActivityDeliverNotification})
}

// NotifyApproval POSTs one approval notification (a JSON api.Notification) to one receiver,
// signed with the secret its SecretEnv names: header X-Nexo-Signature is
// "sha256=" + hex(HMAC-SHA256(secret, body)). A 2xx answer delivers it. 408, 429, 5xx and a
// receiver that cannot be reached are retried by Temporal (the workflow's notifyOptions); any
// other answer, and a secret this worker does not hold, are non-retryable.
func (a *Notifier) NotifyApproval(ctx context.Context, req api.NotifyApprovalRequest) error {
	secret, ok := a.secret(req.Target.SecretEnv)
	if !ok || secret == "" {
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("approval notification not sent: its secret is not set", "receiver", req.Target.Name(),
				"secret_env", req.Target.SecretEnv, "run_id", req.RunID)
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"notify %s of %s in run %s: the environment variable %s (approvals.notify secret_env) is not set on this worker",
			req.Target.Name(), req.Event, req.RunID, req.Target.SecretEnv), api.ErrTypeBadInput, nil)
	}
	target := req.Target.URL
	if req.Target.URLEnv != "" {
		// The URL is a credential: read here, never named in a message (which history keeps).
		if target, ok = a.secret(req.Target.URLEnv); !ok || target == "" {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"notify %s of %s in run %s: the environment variable %s (approvals.notify url_env) is not set on this worker",
				req.Target.Name(), req.Event, req.RunID, req.Target.URLEnv), api.ErrTypeBadInput, nil)
		}
	}
	body, err := json.Marshal(a.notification(req))
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify %s: encode the body: %v", req.Target.Name(), err), api.ErrTypeBadInput, nil)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify %s: %v", req.Target.Name(), hideURL(req.Target, err)), api.ErrTypeBadInput, nil)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", NotifyUserAgent)
	hreq.Header.Set(api.SignatureHeader, Signature(secret, body))
	resp, err := notifyClient(req.Target).Do(hreq)
	if errors.Is(err, netguard.ErrBlocked) {
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("approval notification refused: the receiver's address is not allowed", "receiver", req.Target.Name(),
				"event", req.Event, "run_id", req.RunID)
		}
		hint := " (a receiver of yours on this machine or the private network needs allow_private: true in approvals.notify)"
		if req.Target.AllowPrivate {
			hint = ""
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify %s of %s in run %s: %v%s",
			req.Target.Name(), req.Event, req.RunID, blockedReason(err), hint), api.ErrTypeBadInput, nil)
	}
	if err != nil {
		return fmt.Errorf("notify %s of %s in run %s: %w", req.Target.Name(), req.Event, req.RunID, hideURL(req.Target, err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	msg := fmt.Sprintf("notify %s of %s in run %s: the receiver answered %s", req.Target.Name(), req.Event, req.RunID, resp.Status)
	if s := strings.TrimSpace(string(answer)); s != "" {
		msg += ": " + s
	}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return temporal.NewApplicationErrorWithOptions(msg, api.ErrTypeNotifyUnavailable, temporal.ApplicationErrorOptions{
			NextRetryDelay: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		})
	default:
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("approval notification refused, not retried", "receiver", req.Target.Name(),
				"event", req.Event, "run_id", req.RunID, "status", resp.StatusCode)
		}
		return temporal.NewNonRetryableApplicationError(msg, api.ErrTypeBadInput, nil)
	}
}

// Signature is the X-Nexo-Signature value of body signed with secret:
// "sha256=" + lower-case hex of HMAC-SHA256(secret, body). A receiver computes it over the
// exact bytes it received and compares in constant time (hmac.Equal).
func Signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (a *Notifier) secret(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if a.lookupEnv != nil {
		return a.lookupEnv(name) // the worker took its secrets out of the environment at start
	}
	return os.LookupEnv(name)
}

// notification is the body of req: the event's call, its decision when decided, and links
// to the run's page and record.
func (a *Notifier) notification(req api.NotifyApprovalRequest) api.Notification {
	var call struct {
		CallID     string          `json:"call_id"`
		Tool       string          `json:"tool"`
		Capability string          `json:"capability"`
		Detail     string          `json:"detail"`
		Args       json.RawMessage `json:"args"`
		Approved   bool            `json:"approved"`
		Action     string          `json:"action"`
		By         string          `json:"by"`
		Reason     string          `json:"reason"`
		Always     bool            `json:"always"`
		EditedArgs json.RawMessage `json:"edited_args"`
		Result     string          `json:"result"`
	}
	_ = json.Unmarshal(req.Call, &call) // the workflow's own event data; a field it lacks stays empty
	n := api.Notification{
		Event: req.Event, RunID: req.RunID, Workflow: req.Workflow, Agent: req.Agent, Seq: req.Seq, At: req.At,
		CallID: call.CallID, Tool: call.Tool, Capability: call.Capability, Detail: call.Detail, Args: call.Args,
	}
	if string(n.Args) == "null" {
		n.Args = nil
	}
	if req.Event == api.EventApprovalDecided {
		n.Decision = &api.NotifyDecision{Approved: call.Approved, Action: call.Action, By: call.By, Reason: call.Reason,
			Always: call.Always, EditedArgs: call.EditedArgs, Result: call.Result}
	}
	page, apiPath := "/runs/"+url.PathEscape(req.RunID), "/v1/runs/"+url.PathEscape(req.RunID)
	if agent, instance, ok := api.ParseSessionID(req.RunID); ok {
		n.Session = &api.NotifySession{Agent: agent, Instance: instance}
		p := "/sessions/" + url.PathEscape(agent) + "/" + url.PathEscape(instance)
		page, apiPath = p, "/v1"+p
	}
	if a.pageURL != "" {
		n.Links = api.NotifyLinks{Page: a.pageURL + page, API: a.pageURL + apiPath}
	}
	return n
}

// blockedReason is the guard's refusal inside a dial error, without the URL.
func blockedReason(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), netguard.ErrBlocked.Error()) {
			return e
		}
	}
	return netguard.ErrBlocked
}

// hideURL is err without the URL in it when the target's URL is a credential (url_env, or
// a password in its userinfo): the HTTP client's *url.Error names the URL it posted to.
func hideURL(t api.NotifyTarget, err error) error {
	var ue *url.Error
	if t.URLEnv == "" && !hasPassword(t.URL) {
		return err
	}
	if !errors.As(err, &ue) {
		return errors.New("the URL does not parse")
	}
	// The client's errors below it name the address too (dial tcp host:port): keep only
	// what failed and why, which is what an operator acts on.
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(ue.Err, &dns):
		return fmt.Errorf("%s: the receiver's host name does not resolve", ue.Op)
	case errors.As(ue.Err, &op):
		return fmt.Errorf("%s: %s: %w", ue.Op, op.Op, op.Err)
	case ue.Timeout():
		return fmt.Errorf("%s: timed out", ue.Op)
	}
	return fmt.Errorf("%s: the request failed", ue.Op)
}

// hasPassword reports whether raw carries a password in its userinfo (or does not parse,
// so it cannot be told).
func hasPassword(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return strings.Contains(raw, "@")
	}
	_, ok := u.User.Password()
	return ok
}
