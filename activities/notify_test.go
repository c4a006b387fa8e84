package activities_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// TestSignature: the header value is sha256= and the hex HMAC-SHA256 of the body, which a
// receiver checks with any HMAC library (here the RFC 4231-style well-known vector).
func TestSignature(t *testing.T) {
	t.Parallel()
	got := activities.Signature("key", []byte("The quick brown fox jumps over the lazy dog"))
	want := "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
	if got != want {
		t.Errorf("Signature = %s, want %s", got, want)
	}
}

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver answers status to every POST and hands each request to the test.
func receiver(t *testing.T, status int) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: body}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("answer from the receiver"))
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func notifyActivities(secrets map[string]string, pageURL string) *activities.Activities {
	return activities.New(activities.Deps{PageURL: pageURL, LookupEnv: func(k string) (string, bool) {
		v, ok := secrets[k]
		return v, ok
	}})
}

// TestNotifyApprovalBodyAndSignature: a decided call reaches the receiver as JSON with the
// run, the call (what its request said) and the decision, links to the page and the API,
// and a signature over the exact bytes with the secret the worker holds.
func TestNotifyApprovalBodyAndSignature(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusNoContent)
	a := notifyActivities(map[string]string{"HOOK_SECRET": "s3cret"}, "http://127.0.0.1:8234/")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	req := api.NotifyApprovalRequest{
		RunID: "0193-run", Workflow: api.WorkflowAgentRun, Agent: "coder",
		Target: api.NotifyTarget{URL: srv.URL + "/hook", SecretEnv: "HOOK_SECRET", AllowPrivate: true},
		Event:  api.EventApprovalDecided, Seq: 7, At: at,
		Call: json.RawMessage(`{"call_id":"2.1","tool":"shell","capability":"shell","detail":"go test ./...",` +
			`"args":{"command":"go test ./..."},"approved":false,"action":"deny","by":"ada","reason":"not now"}`),
	}
	if err := a.Notifier.NotifyApproval(context.Background(), req); err != nil {
		t.Fatalf("NotifyApproval: %v", err)
	}
	r := <-got
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(r.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); r.header.Get("X-Nexo-Signature") != want {
		t.Errorf("X-Nexo-Signature = %q, want %q (HMAC of the body received)", r.header.Get("X-Nexo-Signature"), want)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if ua := r.header.Get("User-Agent"); !strings.HasPrefix(ua, "nexo-notify/") {
		t.Errorf("User-Agent = %q, want nexo-notify/...", ua)
	}
	var n api.Notification
	if err := json.Unmarshal(r.body, &n); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	want := api.Notification{Event: "approval_decided", RunID: "0193-run", Workflow: "AgentRun", Agent: "coder", Seq: 7, At: at,
		CallID: "2.1", Tool: "shell", Capability: "shell", Detail: "go test ./...", Args: json.RawMessage(`{"command":"go test ./..."}`),
		Decision: &api.NotifyDecision{Approved: false, Action: "deny", By: "ada", Reason: "not now"},
		Links:    api.NotifyLinks{Page: "http://127.0.0.1:8234/runs/0193-run", API: "http://127.0.0.1:8234/v1/runs/0193-run"}}
	gotJSON, _ := json.Marshal(n)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("body =\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	if strings.Contains(string(r.body), "s3cret") {
		t.Errorf("the body carries the secret: %s", r.body)
	}
}

// TestNotifyApprovalSession: a session's call names the session, links to its page, and a
// requested call carries no decision.
func TestNotifyApprovalSession(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK)
	a := notifyActivities(map[string]string{"HOOK_SECRET": "s3cret"}, "https://nexo.example.com")
	err := a.Notifier.NotifyApproval(context.Background(), api.NotifyApprovalRequest{
		RunID: api.SessionID("coder", "ada"), Workflow: api.WorkflowSession, Agent: "coder",
		Target: api.NotifyTarget{URL: srv.URL, SecretEnv: "HOOK_SECRET", AllowPrivate: true}, Event: api.EventApprovalRequested, Seq: 3,
		Call: json.RawMessage(`{"call_id":"1.1","tool":"write_file","capability":"write","detail":"notes.md","args":{"path":"notes.md"}}`),
	})
	if err != nil {
		t.Fatalf("NotifyApproval: %v", err)
	}
	var n api.Notification
	_ = json.Unmarshal((<-got).body, &n)
	if n.Session == nil || *n.Session != (api.NotifySession{Agent: "coder", Instance: "ada"}) {
		t.Errorf("session = %+v, want coder/ada", n.Session)
	}
	if n.Decision != nil {
		t.Errorf("a requested call carries a decision: %+v", n.Decision)
	}
	if want := "https://nexo.example.com/sessions/coder/ada"; n.Links.Page != want || n.Links.API != "https://nexo.example.com/v1/sessions/coder/ada" {
		t.Errorf("links = %+v, want page %s and the API beside it", n.Links, want)
	}
}

// TestNotifyApprovalRetries: 5xx, 408 and 429 are retried; any other 4xx is not, nor is a
// secret the worker does not hold (no request is made then); the error names the answer.
func TestNotifyApprovalRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		retryable bool
	}{
		{http.StatusInternalServerError, true},
		{http.StatusBadGateway, true},
		{http.StatusRequestTimeout, true},
		{http.StatusTooManyRequests, true},
		{http.StatusBadRequest, false},
		{http.StatusUnauthorized, false},
		{http.StatusNotFound, false},
		{http.StatusFound, false},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv, got := receiver(t, tc.status)
			a := notifyActivities(map[string]string{"HOOK_SECRET": "s3cret"}, "")
			err := a.Notifier.NotifyApproval(context.Background(), api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested,
				Target: api.NotifyTarget{URL: srv.URL, SecretEnv: "HOOK_SECRET", AllowPrivate: true}, Call: json.RawMessage(`{"call_id":"1"}`)})
			<-got
			var app *temporal.ApplicationError
			if !errors.As(err, &app) {
				t.Fatalf("NotifyApproval = %v, want an application error", err)
			}
			if app.NonRetryable() == tc.retryable {
				t.Errorf("answer %d: non-retryable %v, want %v (%v)", tc.status, app.NonRetryable(), !tc.retryable, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("answered %d", tc.status)) {
				t.Errorf("error %q does not say what the receiver answered", err)
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		a := notifyActivities(map[string]string{"HOOK_SECRET": "s3cret"}, "")
		err := a.Notifier.NotifyApproval(context.Background(), api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested,
			Target: api.NotifyTarget{URL: url, SecretEnv: "HOOK_SECRET", AllowPrivate: true}})
		var app *temporal.ApplicationError
		if err == nil || (errors.As(err, &app) && app.NonRetryable()) {
			t.Errorf("NotifyApproval to a closed port = %v, want a retryable error", err)
		}
	})

	t.Run("no secret", func(t *testing.T) {
		srv, got := receiver(t, http.StatusOK)
		a := notifyActivities(nil, "")
		err := a.Notifier.NotifyApproval(context.Background(), api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested,
			Target: api.NotifyTarget{URL: srv.URL, SecretEnv: "HOOK_SECRET", AllowPrivate: true}})
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "HOOK_SECRET") {
			t.Errorf("NotifyApproval without the secret = %v, want a non-retryable error naming HOOK_SECRET", err)
		}
		select {
		case r := <-got:
			t.Errorf("a request was made without a secret: %s", r.body)
		default:
		}
	})
}

// TestNotifyApprovalURLFromTheEnvironment: a receiver whose URL is a credential (url_env)
// is posted to at the URL the worker holds, and no error names that URL (activity failures
// are kept in history), whether the receiver refuses, cannot be reached or is not set.
func TestNotifyApprovalURLFromTheEnvironment(t *testing.T) {
	t.Parallel()
	target := api.NotifyTarget{URLEnv: "HOOK_URL", SecretEnv: "HOOK_SECRET", AllowPrivate: true}
	req := api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested, Target: target, Call: json.RawMessage(`{"call_id":"1"}`)}

	srv, got := receiver(t, http.StatusOK)
	hook := srv.URL + "/services/T000/B000/tokenXYZ"
	if err := notifyActivities(map[string]string{"HOOK_SECRET": "s3cret", "HOOK_URL": hook}, "").Notifier.NotifyApproval(context.Background(), req); err != nil {
		t.Fatalf("NotifyApproval to $HOOK_URL: %v", err)
	}
	if r := <-got; r.header.Get(api.SignatureHeader) != activities.Signature("s3cret", r.body) {
		t.Errorf("signature %q does not sign the body", r.header.Get(api.SignatureHeader))
	}

	refusing, _ := receiver(t, http.StatusForbidden)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, url := range map[string]string{"refused": refusing.URL + "/tokenXYZ", "unreachable": closed.URL + "/tokenXYZ", "unset": ""} {
		env := map[string]string{"HOOK_SECRET": "s3cret"}
		if url != "" {
			env["HOOK_URL"] = url
		}
		err := notifyActivities(env, "").Notifier.NotifyApproval(context.Background(), req)
		if err == nil || strings.Contains(err.Error(), "tokenXYZ") || strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "$HOOK_URL") {
			t.Errorf("%s: error %v: want one naming $HOOK_URL and not the URL", name, err)
		}
	}
	if raw, _ := json.Marshal(target); strings.Contains(string(raw), `"url":`) {
		t.Errorf("a url_env target carries a url field: %s", raw)
	}
}

// TestResolveAgentCarriesNotify: the resolved spec names the receivers (URLs and variable
// names), never the secret.
func TestResolveAgentCarriesNotify(t *testing.T) {
	t.Parallel()
	targets := []api.NotifyTarget{{URL: "https://hooks.example.com/nexo", SecretEnv: "HOOK_SECRET"}}
	a := activities.New(activities.Deps{Agents: []agents.Spec{{Name: "coder"}}, Notify: targets,
		LookupEnv: func(string) (string, bool) { return "s3cret", true }})
	spec, err := a.Model.ResolveAgent(context.Background(), "coder")
	if err != nil {
		t.Fatalf("ResolveAgent: %v", err)
	}
	if len(spec.Notify) != 1 || spec.Notify[0] != targets[0] {
		t.Errorf("spec.Notify = %+v, want %+v", spec.Notify, targets)
	}
	raw, _ := json.Marshal(spec)
	if strings.Contains(string(raw), "s3cret") {
		t.Errorf("the resolved spec carries the secret: %s", raw)
	}
}
