package api

import (
	"encoding/json"
	"net/url"
	"time"
)

// ActivityNotifyApproval posts one approval notification to one receiver.
const ActivityNotifyApproval = "NotifyApproval"

// The approval events that notify the receivers of approvals.notify.
const (
	EventApprovalRequested = "approval_requested"
	EventApprovalEscalated = "approval_escalated"
	EventApprovalDecided   = "approval_decided"
)

// ErrTypeNotifyUnavailable: a receiver answered 408, 429 or 5xx, or could not be reached
// (retried).
const ErrTypeNotifyUnavailable = "NexoNotifyUnavailable"

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the exact body bytes>", keyed with
// the receiver's secret, on every notification.
const SignatureHeader = "X-Nexo-Signature"

// NotifyTarget is one receiver of approval notifications (config approvals.notify). It
// travels in the resolved agent spec, hence in history: the secret itself never does, only
// the name of the worker's environment variable that holds it.
type NotifyTarget struct {
	// URL the notification is POSTed to (http or https). A URL that is itself a credential
	// (a Slack incoming webhook, a URL with a token) goes in URLEnv instead, so that it
	// stays out of history too.
	URL string `json:"url,omitempty" mapstructure:"url" yaml:"url"`
	// URLEnv names the environment variable holding the URL, instead of URL.
	URLEnv string `json:"url_env,omitempty" mapstructure:"url_env" yaml:"url_env"`
	// SecretEnv names the environment variable holding the HMAC secret.
	SecretEnv string `json:"secret_env" mapstructure:"secret_env" yaml:"secret_env"`
	// AllowPrivate lets notifications reach a receiver on a loopback or private address (a
	// bridge on this machine or the internal network); without it such an address is
	// refused at load and when the notification is sent. Link-local and cloud metadata
	// addresses are refused even with it.
	AllowPrivate bool `json:"allow_private,omitempty" mapstructure:"allow_private" yaml:"allow_private"`
}

// NotifyApprovalRequest is the input of ActivityNotifyApproval: one event of one run for
// one receiver. Call is the event's data as recorded (sanitised like every event), with,
// for an escalated or decided call, what its request said (capability, detail, args).
type NotifyApprovalRequest struct {
	RunID    string          `json:"run_id"`
	Workflow string          `json:"workflow"`
	Agent    string          `json:"agent,omitempty"`
	Target   NotifyTarget    `json:"target"`
	Event    string          `json:"event"`
	Seq      int64           `json:"seq"`
	At       time.Time       `json:"at"`
	Call     json.RawMessage `json:"call"`
}

// Notification is the JSON body a receiver gets.
type Notification struct {
	// Event is approval_requested, approval_escalated or approval_decided.
	Event    string `json:"event"`
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	Agent    string `json:"agent,omitempty"`
	// Session is set when the run is a session's (agent, instance).
	Session *NotifySession `json:"session,omitempty"`
	// Seq is the event's seq in the run's events, so a receiver can drop a repeat.
	Seq        int64           `json:"seq"`
	At         time.Time       `json:"at"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Capability string          `json:"capability,omitempty"`
	Detail     string          `json:"detail,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	// Decision is set for approval_decided.
	Decision *NotifyDecision `json:"decision,omitempty"`
	Links    NotifyLinks     `json:"links"`
}

// NotifySession names the session a notified call belongs to.
type NotifySession struct {
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
}

// NotifyDecision is what a human decided.
type NotifyDecision struct {
	Approved bool   `json:"approved"`
	Action   string `json:"action,omitempty"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Always   bool   `json:"always,omitempty"`
	// EditedArgs are the arguments the call ran with when the human edited them.
	EditedArgs json.RawMessage `json:"edited_args,omitempty"`
	// Result is the human's answer when they answered instead of the tool.
	Result string `json:"result,omitempty"`
}

// NotifyLinks point at the run: its web page and its record on the HTTP API. Empty when
// the worker does not know where the gateway is (gateway.url).
type NotifyLinks struct {
	Page string `json:"page,omitempty"`
	API  string `json:"api,omitempty"`
}

// Name is how the target is named in messages, logs and activity failures (which are in
// history): its URL with any password in it replaced by "xxxxx", or "$" and the variable
// that holds it, never a URL read from one.
func (t NotifyTarget) Name() string {
	if t.URLEnv != "" {
		return "$" + t.URLEnv
	}
	return RedactURL(t.URL)
}

// RedactURL is raw with the password of its userinfo replaced by "xxxxx" (url.URL's
// Redacted); a string that does not parse as a URL but holds an "@" is replaced whole,
// since it may still carry a password.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		for i := 0; i < len(raw); i++ {
			if raw[i] == '@' {
				return "[a URL that does not parse]"
			}
		}
		return raw
	}
	return u.Redacted()
}
