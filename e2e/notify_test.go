package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/workflows"
)

// notifySecret is the HMAC secret the worker gets through NOTIFY_SECRET; it must never
// reach history, events, logs or the sandbox.
const notifySecret = "whsec-e2e-3f9c1b7a"

// notifyReceiver is a receiver of approval notifications on loopback, as a Slack or ticket
// bridge would be: it checks each POST's signature with the shared secret and hands the
// decoded body to the test (a bad signature is a 401 and a test error).
type notifyReceiver struct {
	t   testing.TB
	srv *httptest.Server
	got chan api.Notification
}

func newNotifyReceiver(t testing.TB) *notifyReceiver {
	nr := &notifyReceiver{t: t, got: make(chan api.Notification, 16)}
	nr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(notifySecret))
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if !hmac.Equal([]byte(r.Header.Get("X-Nexo-Signature")), []byte(want)) {
			t.Errorf("notification with signature %q, want %q over the body %s", r.Header.Get("X-Nexo-Signature"), want, body)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("notification %s with Content-Type %q, want a JSON POST", r.Method, r.Header.Get("Content-Type"))
		}
		var n api.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("notification body is not JSON: %v\n%s", err, body)
		}
		t.Logf("notification %s %s\n%s", r.Header.Get("X-Nexo-Signature"), r.Header.Get("User-Agent"), body)
		w.WriteHeader(http.StatusNoContent)
		nr.got <- n
	}))
	t.Cleanup(nr.srv.Close)
	return nr
}

// next waits for the next notification of event type typ (others are kept for later calls
// in arrival order only when they match; the scenarios below expect them in order).
func (nr *notifyReceiver) next(typ string) api.Notification {
	nr.t.Helper()
	select {
	case n := <-nr.got:
		if n.Event != typ {
			nr.t.Fatalf("notification %s for call %s, want %s", n.Event, n.CallID, typ)
		}
		return n
	case <-time.After(30 * time.Second):
		nr.t.Fatalf("no %s notification within 30s", typ)
	}
	return api.Notification{}
}

// notifyConfig is the scribe agent under approve, with the receiver in approvals.notify as
// the README shows it (its example URL replaced by the receiver's, which is on loopback and
// so says allow_private: true, as the README tells an internal receiver to).
func notifyConfig(t *testing.T, baseURL, receiver string) string {
	block := readmeBlock(t, "yaml", "secret_env: NOTIFY_SECRET")
	hook := `url: "` + readmeHookURL + `"`
	if !strings.Contains(block, hook) {
		t.Fatalf("the README's approvals.notify block does not name %s:\n%s", readmeHookURL, block)
	}
	return historyAgentConfig(baseURL) + strings.ReplaceAll(block, hook, `url: "`+receiver+`/nexo", allow_private: true`)
}

// readmeHookURL is the receiver the README's example names.
const readmeHookURL = "https://hooks.example.com/nexo"

// notifiedRun runs the scenario: the model asks to write notes.md (denied by ada, with a
// reason), then to run `env` (approved by ada, edited to `env | sort`), then answers. It returns the four
// notifications in order: requested, decided (denied), requested, decided (approved).
func notifiedRun(t *testing.T, p *platform, model *fakellm.Server, nr *notifyReceiver) (string, []api.Notification) {
	t.Helper()
	id := p.startAgent("Write the note, then show the environment.")
	var got []api.Notification
	got = append(got, nr.next(api.EventApprovalRequested))
	wantPending(t, p, id, "1.1")
	p.ok("deny", id, "--reason", "not before the launch", "--by", "ada")
	got = append(got, nr.next(api.EventApprovalDecided))
	got = append(got, nr.next(api.EventApprovalRequested))
	wantPending(t, p, id, "2.1")
	p.ok("approve", id, "--call", "2.1", "--args", `{"command":"env | sort"}`, "--by", "ada")
	got = append(got, nr.next(api.EventApprovalDecided))
	p.waitStatus(id, api.StatusDone)
	return id, got
}

func notifyModel() *fakellm.Server {
	return fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "launch on Monday\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("env")}},
		fakellm.Reply{Content: "Done."},
	)
}

// TestApprovalNotifications: a real agent run's requested and decided calls reach a
// receiver as signed JSON with the run, the call, the decision and working links; the
// secret given through NOTIFY_SECRET is in no history, event, log or sandbox environment.
func TestApprovalNotifications(t *testing.T) {
	t.Parallel()
	model := notifyModel()
	nr := newNotifyReceiver(t)
	p := newPlatform(t)
	p.writeConfig(notifyConfig(t, model.Start(t), nr.srv.URL))
	p.writeWorkspace(historyBrief)
	p.extraEnv = []string{"NOTIFY_SECRET=" + notifySecret}
	p.start()

	id, got := notifiedRun(t, p, model, nr)
	page := fmt.Sprintf("http://127.0.0.1:%d", p.gateway)
	for i, n := range got {
		if n.RunID != id || n.Workflow != api.WorkflowAgentRun || n.Agent != "scribe" || n.Seq == 0 || n.At.IsZero() || n.Session != nil {
			t.Errorf("notification %d names run %q (%s, agent %q, seq %d, at %s, session %v), want run %s of scribe", i, n.RunID, n.Workflow, n.Agent, n.Seq, n.At, n.Session, id)
		}
		if n.Links.Page != page+"/runs/"+id || n.Links.API != page+"/v1/runs/"+id {
			t.Errorf("notification %d links %+v, want the run's page and record on %s", i, n.Links, page)
		}
	}
	write, denied, shell, approved := got[0], got[1], got[2], got[3]
	if write.CallID != "1.1" || write.Tool != "write_file" || write.Capability != "write" || write.Detail != "notes.md" ||
		!strings.Contains(string(write.Args), `"launch on Monday\n"`) || write.Decision != nil {
		t.Errorf("requested write: %+v (args %s), want call 1.1 write_file (write, notes.md) with its arguments and no decision", write, write.Args)
	}
	if denied.CallID != "1.1" || denied.Tool != "write_file" || denied.Capability != "write" || !strings.Contains(string(denied.Args), "notes.md") ||
		denied.Decision == nil || denied.Decision.Approved || denied.Decision.By != "ada" || denied.Decision.Reason != "not before the launch" {
		t.Errorf("decided write: %+v (decision %+v), want call 1.1 denied by ada: not before the launch", denied, denied.Decision)
	}
	if shell.CallID != "2.1" || shell.Tool != "shell" || shell.Detail != "env" || !strings.Contains(string(shell.Args), `"env"`) {
		t.Errorf("requested shell: %+v (args %s), want call 2.1 shell env", shell, shell.Args)
	}
	if approved.CallID != "2.1" || approved.Decision == nil || !approved.Decision.Approved || approved.Decision.By != "ada" ||
		string(approved.Decision.EditedArgs) != `{"command":"env | sort"}` || !strings.Contains(string(approved.Args), `"env"`) {
		t.Errorf("decided shell: %+v (decision %+v), want call 2.1 approved by ada, edited to env | sort", approved, approved.Decision)
	}
	if approved.Seq <= shell.Seq || shell.Seq <= denied.Seq || denied.Seq <= write.Seq {
		t.Errorf("seqs %d %d %d %d, want them increasing in event order", write.Seq, denied.Seq, shell.Seq, approved.Seq)
	}

	// The API link works: it is the run's record.
	resp, err := http.Get(approved.Links.API)
	if err != nil {
		t.Fatalf("GET %s: %v", approved.Links.API, err)
	}
	var rec api.Record
	_ = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || rec.ID != id {
		t.Errorf("GET %s: %d, record %q; want the run's record", approved.Links.API, resp.StatusCode, rec.ID)
	}

	// The secret: not in the sandbox's environment (what `env` printed to the model), the
	// run's history (every payload, the events and the spec among them), or the worker's log.
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if env, _ := last[len(last)-1]["content"].(string); env == "" {
		t.Errorf("the approved env call returned nothing to the model")
	} else if strings.Contains(env, notifySecret) || strings.Contains(env, "NOTIFY_SECRET") {
		t.Errorf("the sandbox's environment holds the notification secret:\n%s", env)
	}
	if h := historyText(t, rawHistory(t, p.dial(), id)); strings.Contains(h, notifySecret) {
		t.Error("the run's history holds the notification secret")
	} else if !strings.Contains(h, "NOTIFY_SECRET") || !strings.Contains(h, api.ActivityEnqueueNotification) {
		t.Error("the run's history names neither the secret's variable nor an EnqueueNotification hand-over")
	}
	// The receiver's outbox holds references to the notifications, and no secret either.
	outbox := api.NotifierID("nexo", api.NotifyTarget{URL: nr.srv.URL + "/nexo", SecretEnv: "NOTIFY_SECRET", AllowPrivate: true})
	if h := historyText(t, rawHistory(t, p.dial(), outbox)); strings.Contains(h, notifySecret) {
		t.Error("the outbox's history holds the notification secret")
	} else if strings.Contains(h, "launch on Monday") || !strings.Contains(h, api.ActivityDeliverNotification) {
		t.Errorf("the outbox's history holds a notification's arguments, or no delivery:\n%.2000s", h)
	}
	if strings.Contains(p.output(), notifySecret) {
		t.Error("the worker's log holds the notification secret")
	}
}

// recordAgentNotified: the notifications scenario, for the replay fixtures (version 1 of
// "approval-notify").
func recordAgentNotified(t *testing.T, r *recorder) {
	model := notifyModel()
	nr := newNotifyReceiver(t)
	p := newPlatform(t)
	p.writeConfig(notifyConfig(t, model.Start(t), nr.srv.URL))
	p.writeWorkspace(historyBrief)
	p.extraEnv = []string{"NOTIFY_SECRET=" + notifySecret}
	p.start()
	id, _ := notifiedRun(t, p, model, nr)
	r.save(p.dial(), "agent_denied_then_edited.json", id, "")
}

// recordAgentNotifiedOutbox: the notifications scenario on the outbox, and the receiver's
// notifier once it delivered the four notifications, waiting for more.
func recordAgentNotifiedOutbox(t *testing.T, r *recorder) {
	model := notifyModel()
	nr := newNotifyReceiver(t)
	p := newPlatform(t)
	p.writeConfig(notifyConfig(t, model.Start(t), nr.srv.URL))
	p.writeWorkspace(historyBrief)
	p.extraEnv = []string{"NOTIFY_SECRET=" + notifySecret}
	p.start()
	id, _ := notifiedRun(t, p, model, nr)
	c := p.dial()
	r.save(c, "agent_denied_then_edited.json", id, "")
	outbox := api.NotifierID("nexo", api.NotifyTarget{URL: nr.srv.URL + "/nexo", SecretEnv: "NOTIFY_SECRET", AllowPrivate: true})
	waitQuiet(t, c, outbox, "")
	r.save(c, "notifier_delivered_open.json", outbox, "")
}

// TestApprovalNotificationsOutliveTheRun: a receiver that answers 503 to one run's
// notifications for a while holds neither that run nor another: the run closes within
// seconds of its decision (no close grace), `starter notifications` shows what is pending
// with its attempts and last error, the other run's notifications are delivered meanwhile,
// and once the receiver is back it gets the closed run's request and decision, in seq
// order.
func TestApprovalNotificationsOutliveTheRun(t *testing.T) {
	t.Parallel()
	var downFor atomic.Value // the run id the receiver refuses, "" once it is back
	downFor.Store("")
	refused := make(chan string, 256)
	got := make(chan api.Notification, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(notifySecret))
		mac.Write(body)
		if !hmac.Equal([]byte(r.Header.Get("X-Nexo-Signature")), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {
			t.Errorf("notification with a bad signature: %s", body)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var n api.Notification
		_ = json.Unmarshal(body, &n)
		if down := downFor.Load().(string); down != "" && n.RunID == down {
			select {
			case refused <- n.Event:
			default:
			}
			w.Header().Set("Retry-After", "1") // retried every second, so the test is quick
			http.Error(w, "bridge is down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		got <- n
	}))
	t.Cleanup(srv.Close)
	next := func(what string) api.Notification {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-time.After(60 * time.Second):
			t.Fatalf("no notification within 60s, want %s", what)
		}
		return api.Notification{}
	}
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "launch on Monday\n")}},
		fakellm.Reply{Content: "Wrote notes.md."},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("later.md", "after the launch\n")}},
		fakellm.Reply{Content: "Wrote later.md."},
	)
	p := newPlatform(t)
	p.writeConfig(notifyConfig(t, model.Start(t), srv.URL))
	p.writeWorkspace(historyBrief)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p.extraEnv = []string{"NOTIFY_SECRET=" + notifySecret, "NEXO_METRICS_ADDR=" + metricsAddr}
	p.start()
	pendingSeries := fmt.Sprintf(`nexo_notifications{receiver="%s/nexo",status="pending"}`, srv.URL)

	// Run A: its receiver refuses it from its first notification on.
	a := "outlive-a"
	downFor.Store(a)
	if id := strings.TrimSpace(p.ok("agent", "scribe", "Write the note.", "--id", a)); id != a {
		t.Fatalf("started %q, want %q", id, a)
	}
	for seen := 0; seen < 2; seen++ {
		select {
		case <-refused:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver refused %d notifications of %s within 30s, want its request retried", seen, a)
		}
	}
	wantPending(t, p, a, "1.1")
	var outboxes []api.NotifierStatus
	if err := json.Unmarshal([]byte(p.ok("notifications", "--json")), &outboxes); err != nil {
		t.Fatal(err)
	}
	if len(outboxes) != 1 || len(outboxes[0].Pending) != 1 {
		t.Fatalf("starter notifications --json = %+v, want one receiver with run %s's request pending", outboxes, a)
	}
	if it := outboxes[0].Pending[0]; it.RunID != a || it.Event != api.EventApprovalRequested || it.Attempts < 1 ||
		!strings.Contains(it.LastError, "503") || outboxes[0].Receiver != srv.URL+"/nexo" {
		t.Errorf("pending %+v of %s, want %s's request with its attempts and the 503", it, outboxes[0].Receiver, a)
	}
	if out := p.ok("notifications"); !strings.Contains(out, "pending") || !strings.Contains(out, a) || !strings.Contains(out, "503") {
		t.Errorf("starter notifications does not show the pending request with its last error:\n%s", out)
	}
	if r := p.starter("doctor"); r.code == 0 || !strings.Contains(r.stdout, "FAIL  notifications: receiver "+srv.URL+"/nexo: 1 retrying (oldest: run "+a) ||
		!strings.Contains(r.stdout, "503") {
		t.Errorf("starter doctor with a refused notification: exit %d, want 1 with a FAIL naming the receiver, run %s and the 503:\n%s", r.code, a, r.stdout)
	}

	if v, ok := sample(scrape(t, metricsAddr), pendingSeries); !ok || v != 1 {
		t.Errorf("%s = %v (found %v), want 1\n%s", pendingSeries, v, ok, grepLines(scrape(t, metricsAddr), "nexo_notifications"))
	}

	// The decision: the run closes at once, its notifications still undelivered.
	began := time.Now()
	ar := p.starter("approve", a, "--by", "ada", "--wait")
	took := time.Since(began)
	t.Logf("approve --wait with the receiver down took %s", took)
	if ar.code != 0 || !strings.Contains(ar.stderr, "is done") || took > 10*time.Second {
		t.Fatalf("approve --wait took %s with the receiver down, exit %d (want the run done within seconds, not after a close grace):\n%s%s", took, ar.code, ar.stdout, ar.stderr)
	}
	rec := p.waitStatus(a, api.StatusDone)
	var decidedAt time.Time
	for _, e := range rec.Events {
		if e.Type == api.EventApprovalDecided {
			decidedAt = e.At
		}
	}
	if closed := rec.UpdatedAt.Sub(decidedAt); closed > 5*time.Second {
		t.Errorf("run %s closed %s after its decision, want within seconds", a, closed)
	}
	h := rawHistory(t, p.dial(), a)
	for _, ev := range h.Events {
		if at := ev.GetActivityTaskScheduledEventAttributes(); at != nil && at.GetActivityType().GetName() == api.ActivityNotifyApproval {
			t.Errorf("run %s scheduled a NotifyApproval activity of its own; want its notifications in the receiver's outbox", a)
		}
		if tm := ev.GetTimerStartedEventAttributes(); tm != nil && tm.GetStartToFireTimeout().AsDuration() == workflows.NotifyCloseGrace {
			t.Errorf("run %s waited the close grace for its notifications", a)
		}
	}

	// Run B goes through while A's notifications are still refused.
	b := p.startAgent("Write the later note.")
	if n := next("run " + b + "'s request"); n.RunID != b || n.Event != api.EventApprovalRequested {
		t.Fatalf("got %s of %s, want %s's request (A's are refused)", n.Event, n.RunID, b)
	}
	p.ok("approve", b, "--by", "ada", "--wait")
	if n := next("run " + b + "'s decision"); n.RunID != b || n.Event != api.EventApprovalDecided {
		t.Fatalf("got %s of %s, want %s's decision", n.Event, n.RunID, b)
	}

	// The receiver is back: the closed run's request, then its decision.
	downFor.Store("")
	req, dec := next("run "+a+"'s request, after its close"), next("run "+a+"'s decision, after its close")
	if req.RunID != a || req.Event != api.EventApprovalRequested || dec.RunID != a || dec.Event != api.EventApprovalDecided ||
		dec.Seq <= req.Seq || dec.Decision == nil || !dec.Decision.Approved || dec.Decision.By != "ada" {
		t.Fatalf("after the receiver came back: %s %s (seq %d), %s %s (seq %d, decision %+v); want %s's request then its approval by ada",
			req.RunID, req.Event, req.Seq, dec.RunID, dec.Event, dec.Seq, dec.Decision, a)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		outboxes = nil
		_ = json.Unmarshal([]byte(p.ok("notifications", "--json")), &outboxes)
		if len(outboxes) == 1 && len(outboxes[0].Pending) == 0 && outboxes[0].Delivered == 4 && len(outboxes[0].Failed) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("starter notifications --json = %+v, want nothing pending or failed, 4 delivered", outboxes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, ok := sample(scrape(t, metricsAddr), pendingSeries); !ok || v != 0 {
		t.Errorf("%s = %v (found %v) once all was delivered, want 0", pendingSeries, v, ok)
	}
}

// recordAgentNotifiedReceiverDown: the run of TestApprovalNotificationsNeverHoldTheRun, which
// closes with its decided notification still retrying (version 1 of "notify-before-close").
func recordAgentNotifiedReceiverDown(t *testing.T, r *recorder) {
	p, id := runWithReceiverDown(t)
	r.save(p.dial(), "agent_receiver_down_at_close.json", id, "")
}

// runWithReceiverDown runs an agent whose only receiver answers 503 to everything: the run
// waits for its human, takes the decision and finishes, giving its pending notification the
// close grace, then abandoning it.
func runWithReceiverDown(t *testing.T) (*platform, string) {
	attempts := make(chan string, 64)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n api.Notification
		_ = json.NewDecoder(r.Body).Decode(&n)
		select {
		case attempts <- n.Event:
		default:
		}
		http.Error(w, "bridge is down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "launch on Monday\n")}},
		fakellm.Reply{Content: "Wrote notes.md."},
	)
	p := newPlatform(t)
	p.writeConfig(notifyConfig(t, model.Start(t), down.URL))
	p.writeWorkspace(historyBrief)
	p.extraEnv = []string{"NOTIFY_SECRET=" + notifySecret}
	p.start()

	id := p.startAgent("Write the note.")
	for seen := 0; seen < 2; seen++ { // the first attempt and a retry of the requested call
		select {
		case ev := <-attempts:
			if ev != api.EventApprovalRequested {
				t.Fatalf("attempt for %s before the call was decided", ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver got %d attempts within 30s, want the requested call retried", seen)
		}
	}
	wantPending(t, p, id, "1.1")
	r := p.starter("approve", id, "--by", "ada", "--wait")
	if out := r.stdout + r.stderr; r.code != 0 || !strings.Contains(out, "is done") {
		t.Fatalf("approve --wait with a receiver down:\n%s", out)
	}
	return p, id
}

// recordAgentNotifiedSuspended: a run waiting for its human while its only receiver
// answers 503, recorded once the requested notification was tried twice (so it is
// retrying, not finished) and no workflow task is pending.
func recordAgentNotifiedSuspended(t *testing.T, r *recorder) {
	attempts := make(chan string, 64)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case attempts <- r.URL.Path:
		default:
		}
		http.Error(w, "bridge is down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "launch on Monday\n")}},
		fakellm.Reply{Content: "Wrote notes.md."},
	)
	p := newPlatform(t)
	p.writeConfig(notifyConfig(t, model.Start(t), down.URL))
	p.writeWorkspace(historyBrief)
	p.extraEnv = []string{"NOTIFY_SECRET=" + notifySecret}
	p.start()
	id := p.startAgent("Write the note.")
	for seen := 0; seen < 2; seen++ {
		select {
		case <-attempts:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver got %d attempts within 30s, want the requested call retried", seen)
		}
	}
	wantPending(t, p, id, "1.1")
	c := p.dial()
	// No workflow task in flight; the notification's activity is, and stays so: its
	// retries are the server's and add nothing to the history.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		if d.GetPendingWorkflowTask() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still has a workflow task in flight after 30s", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.save(c, "agent_suspended_on_approval.json", id, "")
}
