package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
)

// TestNotifyApprovalRefusesPrivateAddresses: the send path vets the address it dials,
// after DNS: a receiver named localhost (loopback once resolved) is refused, not retried,
// with what to set, unless it allows private addresses; the metadata address is refused
// even then. Nothing reaches a refused receiver.
func TestNotifyApprovalRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusNoContent)
	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hook"
	a := notifyActivities(map[string]string{"HOOK_SECRET": "s3cret"}, "")
	send := func(target api.NotifyTarget) error {
		return a.Notifier.NotifyApproval(context.Background(), api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested,
			Target: target, Call: json.RawMessage(`{"call_id":"1"}`)})
	}
	nonRetryable := func(err error, want ...string) {
		t.Helper()
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || !app.NonRetryable() {
			t.Fatalf("err = %v, want a non-retryable refusal", err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
	}

	nonRetryable(send(api.NotifyTarget{URL: byName, SecretEnv: "HOOK_SECRET"}), "loopback, private", "allow_private: true")
	if len(got) != 0 {
		t.Fatal("a refused receiver got the notification")
	}
	if err := send(api.NotifyTarget{URL: byName, SecretEnv: "HOOK_SECRET", AllowPrivate: true}); err != nil {
		t.Fatalf("NotifyApproval to %s with allow_private: %v", byName, err)
	}
	<-got
	nonRetryable(send(api.NotifyTarget{URL: "http://169.254.169.254/latest/meta-data/", SecretEnv: "HOOK_SECRET", AllowPrivate: true}), "metadata")
}

// TestNotifyApprovalHidesURLPassword: a receiver URL with a password in its userinfo is
// never written to the worker's log nor to the failure Temporal records, whether the
// receiver refuses or cannot be reached.
func TestNotifyApprovalHidesURLPassword(t *testing.T) {
	t.Parallel()
	const password = "hunter2-pw"
	var logs syncBuffer
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	notifyActivities(map[string]string{"HOOK_SECRET": "s3cret"}, "").Notifier.Register(env)

	refusing, _ := receiver(t, http.StatusForbidden)
	for name, raw := range map[string]string{
		"refused":    strings.Replace(refusing.URL, "http://", "http://ada:"+password+"@", 1) + "/hook",
		"no secret":  "http://ada:" + password + "@127.0.0.1:1/hook",
		"bad url":    "http://ada:" + password + "@127.0.0.1:1/ho%zzok",
		"unreachble": "http://ada:" + password + "@127.0.0.1:1/hook",
	} {
		secret := "HOOK_SECRET"
		if name == "no secret" {
			secret = "UNSET_SECRET"
		}
		_, err := env.ExecuteActivity(api.ActivityNotifyApproval, api.NotifyApprovalRequest{RunID: "r", Event: api.EventApprovalRequested,
			Target: api.NotifyTarget{URL: raw, SecretEnv: secret, AllowPrivate: true}, Call: json.RawMessage(`{"call_id":"1"}`)})
		if err == nil || strings.Contains(err.Error(), password) {
			t.Errorf("%s: error %v: want a failure without the password", name, err)
		}
	}
	if out := logs.String(); strings.Contains(out, password) || !strings.Contains(out, "ada:xxxxx@") {
		t.Errorf("worker log names the password, or not the redacted receiver:\n%s", out)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
