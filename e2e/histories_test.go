package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/mcptest"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestRecordHistories records the replay fixtures under workflows/testdata from real runs:
// the embedded server, the real worker and starter, the fake model. It runs only with
// NEXO_RECORD_HISTORIES=1.
//
// Fixtures are added, never overwritten: a fixture is the history of a run started by the
// workflow code of its day, and it must keep replaying after that code changes (guarded by
// workflow.GetVersion). So a file that exists is kept, a scenario whose files all exist is
// not run again, and a scenario added later records only its own files. To compare a fresh
// recording with the committed one, point NEXO_RECORD_DIR at an empty directory.
//
// Every history is replayed against the current workflow code before it is written, so a
// fixture that cannot replay is never committed. Open histories (a run waiting for an
// approval, an idle session) are recorded while they wait, with no workflow task pending.
func TestRecordHistories(t *testing.T) {
	if os.Getenv("NEXO_RECORD_HISTORIES") != "1" {
		t.Skip("set NEXO_RECORD_HISTORIES=1 to record the missing fixtures of workflows/testdata")
	}
	dir := os.Getenv("NEXO_RECORD_DIR")
	if dir == "" {
		dir = filepath.Join("..", "workflows", "testdata")
	}
	for _, sc := range historyScenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := &recorder{t: t, dir: dir, prefix: sc.prefix}
			var missing []string
			for _, f := range sc.files {
				if r.exists(f) {
					t.Logf("%s exists: kept", f)
				} else {
					missing = append(missing, f)
				}
			}
			if len(missing) == 0 {
				t.Skipf("every fixture of %s exists", sc.name)
			}
			sc.record(t, r)
			for _, f := range missing {
				if !r.saved[r.prefix+f] {
					t.Errorf("scenario %s did not record %s", sc.name, f)
				}
			}
		})
	}
}

// historyScenarios are the recorded scenarios, each with the fixtures it writes. Add new
// scenarios (and new file names) here; never rename a file that is committed. A scenario
// whose workflow code changed shape is recorded again under a new prefix, so the histories
// from before the change stay (and keep replaying) beside those from after.
var historyScenarios = []struct {
	name   string
	prefix string
	files  []string
	record func(t *testing.T, r *recorder)
}{
	{"DocumentApproval and BuildDashboard", "", []string{
		"document_approval_approved.json", "document_approval_denied.json", "build_dashboard.json",
	}, recordExamples},
	{"agent approved", "", []string{"agent_approved.json"}, recordAgentApproved},
	{"agent denied and always", "", []string{"agent_denied.json", "agent_always.json"}, recordAgentDeniedAndAlways},
	{"agent suspended", "", []string{"agent_suspended_on_approval.json"}, recordAgentSuspended},
	{"agent large output", "", []string{"agent_large_tool_output.json"}, recordAgentLargeOutput},
	{"session", "", []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	{"agent MCP", "", []string{"agent_mcp_stdio.json"}, recordAgentMCP},
	{"agent skills", "", []string{"agent_skills.json"}, recordAgentSkills},
	// Threads by reference (workflows/thread.go, version 1 of "thread-by-reference"): the
	// agent and session scenarios again, on the new shape.
	{"agent approved, threads by reference", threadRefPrefix, []string{"agent_approved.json"}, recordAgentApproved},
	{"agent denied and always, threads by reference", threadRefPrefix, []string{"agent_denied.json", "agent_always.json"}, recordAgentDeniedAndAlways},
	{"agent suspended, threads by reference", threadRefPrefix, []string{"agent_suspended_on_approval.json"}, recordAgentSuspended},
	{"agent large output, threads by reference", threadRefPrefix, []string{"agent_large_tool_output.json"}, recordAgentLargeOutput},
	{"session, threads by reference", threadRefPrefix, []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	{"agent MCP, threads by reference", threadRefPrefix, []string{"agent_mcp_stdio.json"}, recordAgentMCP},
	{"agent skills, threads by reference", threadRefPrefix, []string{"agent_skills.json"}, recordAgentSkills},
	// DocumentApproval reads its resume input strictly (version 1 of "strict-resume-input").
	{"DocumentApproval and BuildDashboard, strict resume input", "strictresume_", []string{
		"document_approval_approved.json", "document_approval_denied.json", "build_dashboard.json",
	}, recordExamples},
	// The worker registry (workflows/registry): a worker's announcement, open.
	{"worker registry", "", []string{"registry_one_worker.json"}, recordRegistry},
	// The registry with two workers, the second announced then stopped with Ctrl-C (recorded
	// before the live rule of "registry-live": a stopped worker said nothing then).
	{"worker registry, two workers", "", []string{"registry_two_workers_one_stopped.json"}, recordRegistryTwoWorkers},
	// The same on the live rule (version 1 of "registry-live"): announcements with a TTL, the
	// stopped worker's goodbye, the memo of live identities.
	{"worker registry, two workers, live rule", "live_", []string{"registry_two_workers_one_stopped.json"}, recordRegistryTwoWorkers},
	// The same with the announcements in the memo (version 1 of "registry-memo").
	{"worker registry, two workers, announcements in the memo", "memo_", []string{"registry_two_workers_one_stopped.json"}, recordRegistryTwoWorkers},
	// A run canceled during a tool call closes canceled (version 1 of "cancel-outcome").
	{"agent canceled in a tool call", "", []string{"agent_canceled_in_tool_call.json"}, recordAgentCanceledInTool},
	// Issue 14: the scenarios no fixture held yet, on the code of their day.
	{"DocumentApproval resumed by a raw signal", issue14Prefix, []string{
		"document_approval_resumed_by_signal.json", "document_approval_suspended.json",
	}, recordDocumentApprovalBySignal},
	{"BuildDashboard partial failure and rerun", issue14Prefix, []string{
		"build_dashboard_partial_failure.json", "build_dashboard_rerun_seeded.json",
	}, recordDashboardRerun},
	{"agent turn limit", issue14Prefix, []string{"agent_turn_limit.json"}, recordAgentTurnLimit},
	{"agent Docker park and restore", issue14Prefix, []string{"agent_docker_parked_restored.json"}, recordAgentDockerPark},
	// The agent and session scenarios on today's code (threadref_* predate the heartbeat
	// timeouts and cancel-outcome), so the shape new runs have is guarded too.
	{"agent approved, issue 14", issue14Prefix, []string{"agent_approved.json"}, recordAgentApproved},
	{"agent denied and always, issue 14", issue14Prefix, []string{"agent_denied.json", "agent_always.json"}, recordAgentDeniedAndAlways},
	{"agent suspended, issue 14", issue14Prefix, []string{"agent_suspended_on_approval.json"}, recordAgentSuspended},
	{"agent MCP, issue 14", issue14Prefix, []string{"agent_mcp_stdio.json"}, recordAgentMCP},
	{"session, issue 14", issue14Prefix, []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	// A run that closes stores its record and references it in its memo (version 1 of
	// "record-at-close"): every way to close, again.
	{"DocumentApproval and BuildDashboard, record at close", recordClosePrefix, []string{
		"document_approval_approved.json", "document_approval_denied.json", "build_dashboard.json",
	}, recordExamples},
	{"BuildDashboard failed, record at close", recordClosePrefix, []string{"build_dashboard_failed.json"}, recordDashboardFailed},
	{"agent approved, record at close", recordClosePrefix, []string{"agent_approved.json"}, recordAgentApproved},
	{"agent canceled in a tool call, record at close", recordClosePrefix, []string{"agent_canceled_in_tool_call.json"}, recordAgentCanceledInTool},
	{"session, record at close", recordClosePrefix, []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	// The same with errors that keep their type (workflows.wrapError): the tool call's
	// cancellation reaches the run's outcome as a CanceledError, so "cancel-outcome" is
	// no longer asked (no marker).
	{"agent canceled in a tool call, typed errors", "typederrors_", []string{"agent_canceled_in_tool_call.json"}, recordAgentCanceledInTool},
	// A run keeps NexoApprovalAgent current while a call waits (version 1 of
	// "inbox-approval-attr"): the scenarios with approvals, again.
	{"agent approved, inbox", inboxPrefix, []string{"agent_approved.json"}, recordAgentApproved},
	{"agent denied and always, inbox", inboxPrefix, []string{"agent_denied.json", "agent_always.json"}, recordAgentDeniedAndAlways},
	{"agent suspended, inbox", inboxPrefix, []string{"agent_suspended_on_approval.json"}, recordAgentSuspended},
	{"session, inbox", inboxPrefix, []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	// Decisions as the nexo.decide Update (workflows/suspend.go): an edited call and an
	// answered one, each after a refused decision (which leaves no trace).
	{"agent edited and answered by nexo.decide", "decide_", []string{"agent_edited.json", "agent_answered.json"}, recordAgentDecided},
	// Approval notifications (version 1 of "approval-notify"): a denied and an edited
	// call, each notified when requested and when decided (e2e/notify_test.go).
	{"agent notified", "notify_", []string{"agent_denied_then_edited.json"}, recordAgentNotified},
	// Approval deadlines (version 1 of "approval-deadline"): a call denied by its timer, one
	// decided before it (the timer cancelled), one escalated and still waiting.
	{"agent approval deadlines", "deadline_", []string{"agent_timed_out.json", "agent_decided_in_time.json", "agent_escalated_waiting.json"}, recordAgentDeadlines},
	// Parallel tool calls (version 1 of "parallel-tools") with one gated call; a session
	// turn with thinking ("thinking-events") and a plan ("plan-tool"): e2e/toolpar_test.go.
	{"agent parallel tools with a gated call", toolsFixturePrefix, []string{"agent_parallel_gated.json"}, recordToolsParallelGated},
	{"session thinking and plan", toolsFixturePrefix, []string{"session_thinking_plan.json"}, recordToolsSessionThinkingPlan},
	// An agent and a session on a rate-limited endpoint (version 1 of
	// "model-endpoint-queue"): their model calls go to the endpoint's task queue
	// (e2e/ratelimit_test.go).
	{"agent on a rate-limited endpoint", "limits_", []string{"agent_paced.json", "session_paced_idle.json"}, recordAgentPaced},
	// Budgets (version 1 of "agent-budget"): a run raised then done, one denied (done), one
	// still paused on its budget (e2e/budget_test.go).
	{"agent budget", "budget_", []string{"agent_raised_done.json", "agent_denied_done.json", "agent_suspended_on_budget.json"}, recordAgentBudget},
	// Per-host task queues (version 1 of "host-queue", workflows/hostq.go): an agent on its
	// own local sandbox writing then reading (a host claimed, a snapshot at the suspend), a
	// session that continues as new with its host, a docker agent parked and restored.
	{"agent local write and read, host queue", "hostq_", []string{"agent_local_write_read.json"}, recordHostqLocal},
	{"session, host queue", "hostq_", []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	{"agent Docker park and restore, host queue", "hostq_", []string{"agent_docker_parked_restored.json"}, recordAgentDockerPark},
	// Workers that disagree (version 1 of "agent-unavailable"): a run that met a worker
	// without its agent, then ran on one with it (e2e/disagree_histories_test.go).
	{"agent unavailable on one worker", "deploy_", []string{"agent_unavailable_then_done.json"}, recordAgentUnavailable},
	// A run that closes with a notification still retrying gives it the close grace
	// (version 1 of "notify-before-close"), then abandons it (e2e/notify_test.go).
	{"agent notified, receiver down at close", "notifyclose_", []string{"agent_receiver_down_at_close.json"}, recordAgentNotifiedReceiverDown},
	// A run suspended on its approval while its receiver is down, recorded before the
	// notifications moved to the receivers' outbox (ChangeNotifyOutbox): its requested
	// notification is a NotifyApproval activity of the run, still retrying. A run like it
	// that is still open keeps that path to its end (e2e/notify_test.go).
	{"agent notified, suspended with the receiver down", "notifyopen_", []string{"agent_suspended_on_approval.json"}, recordAgentNotifiedSuspended},
	// The receivers' outboxes (version 1 of "notify-outbox", workflows/notifier): the
	// notifications scenario again, the run handing each notification over, and the
	// receiver's notifier after delivering them, open (e2e/notify_test.go).
	{"agent notified through the outbox", "outbox_", []string{"agent_denied_then_edited.json", "notifier_delivered_open.json"}, recordAgentNotifiedOutbox},
	// An endpoint with tokens_per_minute: its limiter (NexoTokenLimiter) open after two
	// reservations and their settles, and the agent run that made them (e2e/tokenlimit_test.go).
	{"token limiter", "tokens_", []string{"limiter_open.json", "agent_done.json"}, recordTokenLimiter},
	// Workspace snapshots (version 1 of "workspace-snapshots", workflows/hostq.go): a
	// snapshot after every write and shell call, one at the suspend; the host-queue
	// scenarios again, a session across continue-as-new, and forks of a run at its shell
	// call, asked again and with the call edited (e2e/workspace_test.go).
	{"agent local write and read, snapshots", "snap_", []string{"agent_local_write_read.json"}, recordHostqLocal},
	{"session, snapshots", "snap_", []string{
		"session_first_run_continued_as_new.json", "session_continued_run_closed.json",
		"session_reopened_suspended_on_approval.json", "session_reopened_idle.json",
	}, recordSession},
	{"agent Docker park and restore, snapshots", "snap_", []string{"agent_docker_parked_restored.json"}, recordAgentDockerPark},
	{"agent forked at a call", "snap_", []string{"agent_write_shell.json", "agent_forked.json", "agent_forked_edited.json"}, recordWorkspaceFork},
	// A session forked at its second turn (`starter session fork`): the source, and the
	// fork started from turn 1's thread and the snapshot turn 2 found (e2e/sessionfork_test.go).
	{"session forked at a turn", "snap_", []string{"session_fork_source.json", "session_forked.json"}, recordSessionFork},
	// A session turn interrupted in its shell call (version 1 of "session-interrupt"),
	// turns with --dir and --max-turns, and a steered turn (e2e/sessionopts_test.go).
	{"session with prompt options, interrupted and steered", "sessionopts_", []string{"session_interrupted_steered_idle.json"}, recordSessionOpts},
	// Sandbox pools (no change id: only a run whose agent names a pool claims on the
	// pool's queue, e2e/pool_test.go): a run of a pool agent on a worker that joined the
	// pool with --pool, its claim on <tq>@pool-gpu.
	{"agent on a pool", "pool_", []string{"agent_pool_write_read.json"}, recordPoolRun},
	// Typed results (version 1 of "typed-output"): a reply that is not JSON sent back
	// with the error, then a valid one, the run's result the object (e2e/typed_test.go).
	{"agent typed output retried", "typed_", []string{"agent_output_retried.json"}, recordAgentTypedRetried},
	// Agents as tools (version 1 of "agent-delegates"): a lead whose agent_researcher call
	// ran researcher as a child run, approved from the inbox, and that child
	// (e2e/delegate_test.go).
	{"agent delegated to a child run", "delegates_", []string{"lead_done.json", "child_approved_done.json"}, recordDelegate},
	// Remote A2A agents (version 1 of "a2a-tools"): the forecaster's tools built from the
	// remote's card, its approved a2a_weather call answered by an a2a-go server
	// (e2e/a2a_tool_test.go).
	{"agent called a remote A2A agent", "a2a_", []string{"forecaster_approved_done.json"}, recordA2ATool},
	// A pluggable loop (version 1 of "harness-loop"): the example's harnessed agent, its
	// steps HarnessStep activities on the run's host, its write approved
	// (e2e/harnessloop_test.go).
	{"agent harness loop approved", "harness_", []string{"agent_harness_approved.json"}, recordHarnessLoop},
}

// recordAgentDeadlines: scribe under approve with approval_timeout 2s: a write nobody
// decides is denied by the timer; another is approved before its deadline; a third, of the
// agent "herald" whose on_timeout is escalate, escalates and waits on.
func recordAgentDeadlines(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "Launch is on Monday.\n")}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	p.writeConfig(strings.Replace(historyAgentConfig(model.Start(t)), "permissions: {mode: approve}",
		"permissions: {mode: approve, approval_timeout: 2s, on_timeout: deny}", 1) + `  - name: herald
    permissions: {mode: approve, approval_timeout: 2s, on_timeout: escalate}
    sandbox: {type: local, dir: ./workspace}
`)
	p.writeWorkspace(historyBrief)
	p.start()
	c := p.dial()

	timedOut := p.startAgent("Write the note.")
	rec := p.waitStatus(timedOut, api.StatusDone)
	timedOutByTimer := false
	for _, e := range rec.Events {
		var d struct{ By string }
		_ = json.Unmarshal(e.Data, &d)
		timedOutByTimer = timedOutByTimer || (e.Type == "approval_decided" && d.By == "timeout")
	}
	if !timedOutByTimer {
		t.Fatalf("run %s was not decided by its deadline: %+v", timedOut, rec.Events)
	}
	inTime := p.startAgent("Write the note again.")
	wantPending(t, p, inTime, "1.1")
	p.ok("approve", inTime, "--call", "1.1", "--by", "ada")
	p.waitStatus(inTime, api.StatusDone)

	escalated := strings.TrimSpace(p.ok("agent", "herald", "Write the note once more."))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if a, ok := p.record(escalated).Approval(); ok && a.Escalated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never escalated", escalated)
		}
	}
	waitQuiet(t, c, escalated, "")
	r.save(c, "agent_timed_out.json", timedOut, "")
	r.save(c, "agent_decided_in_time.json", inTime, "")
	r.save(c, "agent_escalated_waiting.json", escalated, "")
}

// recordAgentDecided: a gated write_file is approved with edited arguments after a
// decision naming a wrong call was refused; another run's gated write_file is answered by
// a human instead of running.
func recordAgentDecided(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("notes.md", "Launch is on Monday.\n")}},
		fakellm.Reply{Content: "Done."},
	)
	p, c := agentPlatform(t, model, historyBrief)
	edited := p.startAgent("Write the note.")
	wantPending(t, p, edited, "1.1")
	if res := p.starter("approve", edited, "--call", "9.9"); res.code != 1 {
		t.Fatalf("approve --call 9.9: exit %d, want a refusal\n%s", res.code, res.stderr)
	}
	p.ok("approve", edited, "--call", "1.1", "--args", `{"path":"drafts/notes.md","content":"Launch is on Tuesday.\n"}`, "--by", "ada")
	p.waitStatus(edited, api.StatusDone)

	answered := p.startAgent("Write the note again.")
	wantPending(t, p, answered, "1.1")
	p.ok("answer", answered, "--call", "1.1", "--result", "The note is in the wiki already.", "--by", "ada")
	p.waitStatus(answered, api.StatusDone)
	r.save(c, "agent_edited.json", edited, "")
	r.save(c, "agent_answered.json", answered, "")
}

// inboxPrefix names the fixtures recorded with the NexoApprovalAgent upserts.
const inboxPrefix = "inbox_"

// recordClosePrefix names the fixtures recorded with the record stored at close.
const recordClosePrefix = "recordclose_"

// recordDashboardFailed: a BuildDashboard whose second metric fails; the run closes
// failed.
func recordDashboardFailed(t *testing.T, r *recorder) {
	p := newPlatform(t)
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("run", "BuildDashboard", "--input", `{"metrics":["sales","bogus"]}`))
	p.waitStatus(id, api.StatusFailed)
	r.save(c, "build_dashboard_failed.json", id, "")
}

// issue14Prefix names the fixtures added for issue 14 (scenarios without one before).
const issue14Prefix = "issue14_"

// threadRefPrefix names the fixtures recorded with threads by reference.
const threadRefPrefix = "threadref_"

// recorder writes fixtures into dir.
type recorder struct {
	t     *testing.T
	dir   string
	saved map[string]bool
	// prefix starts the names of the files this scenario writes.
	prefix string
}

func (r *recorder) exists(name string) bool {
	_, err := os.Stat(filepath.Join(r.dir, r.prefix+name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.t.Fatal(err)
	}
	return err == nil
}

// save writes the history of the run (id, runID; runID "" is the latest) as name unless
// the file exists. The run must not have a workflow task in flight (see waitQuiet).
func (r *recorder) save(c client.Client, name, id, runID string) {
	r.t.Helper()
	if r.exists(name) {
		r.t.Logf("%s exists: kept", r.prefix+name)
		return
	}
	name = r.prefix + name
	var h historypb.History
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			r.t.Fatalf("history of %s (run %q): %v", id, runID, err)
		}
		h.Events = append(h.Events, ev)
	}
	rp := worker.NewWorkflowReplayer()
	workflows.RegisterAll(rp)
	demo.Register(rp)
	if err := rp.ReplayWorkflowHistory(nil, &h); err != nil {
		r.t.Fatalf("history of %s (run %q) does not replay, not writing %s: %v", id, runID, name, err)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	// O_EXCL: never over a file that appeared meanwhile.
	f, err := os.OpenFile(filepath.Join(r.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		r.t.Fatalf("write fixture: %v", err)
	}
	if _, err := f.Write(b); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		r.t.Fatal(err)
	}
	if r.saved == nil {
		r.saved = map[string]bool{}
	}
	r.saved[name] = true
	last := h.Events[len(h.Events)-1].GetEventType()
	r.t.Logf("recorded %s: %d events, %d bytes, last %s", name, len(h.Events), len(b), last)
}

// waitQuiet waits until the run has no workflow task and no activity in flight: what an
// open run looks like while it waits for a human or a prompt, and the only moment its
// history is a stable fixture.
func waitQuiet(t *testing.T, c client.Client, id, runID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, runID)
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		if d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still has work in flight after 30s: %v", id, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRunClosed waits until the run (id, runID) is closed and returns its status.
func waitRunClosed(t *testing.T, c client.Client, id, runID string) enumspb.WorkflowExecutionStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, runID)
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s/%s still open after 30s", id, runID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// currentRun is the run id of the workflow's latest run.
func currentRun(t *testing.T, c client.Client, id string) string {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// goStarter runs the starter in the background (a prompt that waits for an approval);
// the result arrives on the channel. Safe outside the test goroutine.
func (p *platform) goStarter(args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins.starter, args...)
		cmd.Dir, cmd.Env = p.dir, p.env()
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		res := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			res.code = ee.ExitCode()
		} else if err != nil {
			res.code, res.stderr = -1, err.Error()
		}
		ch <- res
	}()
	return ch
}

// writeWorkspace creates the agents' ./workspace with files, before the worker starts.
func (p *platform) writeWorkspace(files map[string]string) {
	p.t.Helper()
	for name, content := range files {
		path := filepath.Join(p.dir, "workspace", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

func toolCall(name string, args map[string]any) fakellm.Call {
	b, _ := json.Marshal(args)
	return fakellm.Call{Name: name, Arguments: b}
}

func readCall(path string) fakellm.Call { return toolCall("read_file", map[string]any{"path": path}) }
func globCall(pattern string) fakellm.Call {
	return toolCall("glob", map[string]any{"pattern": pattern})
}
func writeCall(path, content string) fakellm.Call {
	return toolCall("write_file", map[string]any{"path": path, "content": content})
}

// historyAgentConfig: agents under approve acting in ./workspace (local sandbox), the
// shape of the pre-change agent runs the fixtures hold.
func historyAgentConfig(baseURL string) string {
	return `llm:
  base_url: ` + baseURL + `
  model: fake-model
agents:
  - name: scribe
    instructions: You read and write files when asked.
    permissions: {mode: approve}
    sandbox: {type: local, dir: ./workspace}
    produces: ["notes.md"]
    max_turns: 5
`
}

var historyBrief = map[string]string{
	"brief.md": "# Brief\nWrite a two-line note about the launch.\n",
	"notes.md": "old notes\n",
}

// agentPlatform starts a worker whose scribe agent talks to model, with the brief in its
// workspace.
func agentPlatform(t *testing.T, model *fakellm.Server, files map[string]string) (*platform, client.Client) {
	p := newPlatform(t)
	p.writeConfig(historyAgentConfig(model.Start(t)))
	p.writeWorkspace(files)
	p.start()
	return p, p.dial()
}

// startAgent starts a scribe run and returns its id.
func (p *platform) startAgent(prompt string) string {
	p.t.Helper()
	return strings.TrimSpace(p.ok("agent", "scribe", prompt))
}

// wantPending checks the run waits for the approval of callID.
func wantPending(t *testing.T, p *platform, id, callID string) {
	t.Helper()
	rec := p.waitStatus(id, api.StatusSuspended)
	if a, ok := rec.Approval(); !ok || a.CallID != callID {
		t.Fatalf("run %s waits for %+v, want the approval of call %s", id, a, callID)
	}
}

// recordRegistry: the registry of the task queue after one worker announced itself, waiting
// for the next announcement (an open history).
func recordRegistry(t *testing.T, r *recorder) {
	p := newPlatform(t)
	p.start()
	c := p.dial()
	id := api.RegistryID("nexo")
	waitQuiet(t, c, id, "")
	r.save(c, "registry_one_worker.json", id, "")
}

// recordRegistryTwoWorkers: a worker --dev and a plain worker announce to the registry,
// then the plain one stops (Ctrl-C); recorded once the registry has nothing in flight.
func recordRegistryTwoWorkers(t *testing.T, r *recorder) {
	p := newPlatform(t)
	p.start()
	second := newPlatform(t)
	second.frontend, second.plain = p.frontend, true
	second.extraEnv = []string{"NEXO_ARTIFACTS_URL=file://" + p.artifactsDir()}
	second.start()
	second.stop()
	c := p.dial()
	id := api.RegistryID("nexo")
	waitQuiet(t, c, id, "")
	r.save(c, "registry_two_workers_one_stopped.json", id, "")
}

// recordAgentCanceledInTool: an approved shell command is running when the run is
// canceled; the run closes canceled.
func recordAgentCanceledInTool(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{toolCall("shell", map[string]any{"command": "sleep 30"})}},
		fakellm.Reply{Content: "unreachable"},
	)
	p, c := agentPlatform(t, model, historyBrief)
	id := p.startAgent("Wait a while.")
	wantPending(t, p, id, "1.1")
	p.ok("approve", id, "--by", "ada")
	deadline := time.Now().Add(30 * time.Second)
	for running := false; !running; {
		if time.Now().After(deadline) {
			t.Fatalf("the shell call of %s never started", id)
		}
		desc, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, pa := range desc.GetPendingActivities() {
			running = running || (pa.GetActivityType().GetName() == api.ActivityRunTool && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED)
		}
		time.Sleep(20 * time.Millisecond) // polling the server; no event to wait on from outside
	}
	p.ok("cancel", id)
	if rec := p.waitStatus(id, api.StatusCanceled); rec.Status != api.StatusCanceled {
		t.Fatalf("status %s, want canceled", rec.Status)
	}
	r.save(c, "agent_canceled_in_tool_call.json", id, "")
}

func recordExamples(t *testing.T, r *recorder) {
	p := newPlatform(t)
	p.start()
	c := p.dial()
	approved := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"h1"}`))
	p.waitStatus(approved, api.StatusSuspended)
	p.ok("approve", approved, "--by", "ada")
	p.waitStatus(approved, api.StatusDone)

	// A denied run that also received a malformed signal (recorded as signal_ignored).
	ignored := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"h2"}`))
	p.waitStatus(ignored, api.StatusSuspended)
	if err := c.SignalWorkflow(context.Background(), ignored, "", api.SignalResume, map[string]any{"aproved": true}); err != nil {
		t.Fatal(err)
	}
	p.ok("deny", ignored, "--reason", "typos")
	if rec := p.waitStatus(ignored, api.StatusDone); countEvents(rec, "signal_ignored") != 1 {
		t.Fatalf("signal_ignored events = %d, want 1", countEvents(rec, "signal_ignored"))
	}

	dash := strings.TrimSpace(p.ok("run", "BuildDashboard", "--input", `{"title":"H"}`))
	p.waitStatus(dash, api.StatusDone)
	r.save(c, "document_approval_approved.json", approved, "")
	r.save(c, "document_approval_denied.json", ignored, "")
	r.save(c, "build_dashboard.json", dash, "")
}

// recordAgentApproved: the agent reads (glob and two read_file in one reply), a gated
// write_file of a file it has read (the read-before-write stamp) is approved, the run ends
// with an answer and its produces artifact.
func recordAgentApproved(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*.md"), readCall("brief.md"), readCall("notes.md")}},
		fakellm.Reply{Content: "Writing the note now.", ToolCalls: []fakellm.Call{writeCall("notes.md", "Launch is on Monday.\nEveryone is invited.\n")}},
		fakellm.Reply{Content: "I read the brief and wrote notes.md."},
	)
	p, c := agentPlatform(t, model, historyBrief)
	id := p.startAgent("Read the brief and write the note.")
	wantPending(t, p, id, "2.1")
	p.ok("approve", id, "--by", "ada")
	rec := p.waitStatus(id, api.StatusDone)
	if a, ok := rec.FindArtifact("notes.md"); !ok || a.Content == nil || !strings.HasPrefix(*a.Content, "Launch is on Monday.") {
		t.Fatalf("notes.md artifact = %+v", rec.Artifacts)
	}
	r.save(c, "agent_approved.json", id, "")
}

// recordAgentDeniedAndAlways: a denial with a reason reaches the model; and an approval
// with --always covers the second write_file of the same reply, while a shell call of the
// next reply (another tool) waits for a human again.
func recordAgentDeniedAndAlways(t *testing.T, r *recorder) {
	// The two runs follow one script: the fake model answers by the thread's length.
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("brief.md"), writeCall("a.md", "first\n"), writeCall("b.md", "second\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{toolCall("shell", map[string]any{"command": "ls"})}},
		fakellm.Reply{Content: "Wrote what I was allowed to write."},
	)
	p, c := agentPlatform(t, model, historyBrief)

	denied := p.startAgent("Write a.md and b.md, then list the files.")
	wantPending(t, p, denied, "1.2")
	p.ok("deny", denied, "--reason", "not in production hours", "--by", "ada")
	wantPending(t, p, denied, "1.3")
	p.ok("deny", denied, "--reason", "still not", "--by", "ada")
	wantPending(t, p, denied, "2.1")
	p.ok("deny", denied, "--reason", "no shell", "--by", "ada")
	rec := p.waitStatus(denied, api.StatusDone)
	if countEvents(rec, "approval_decided") != 3 {
		t.Fatalf("denied run: approval_decided events = %d, want 3", countEvents(rec, "approval_decided"))
	}
	r.save(c, "agent_denied.json", denied, "")

	always := p.startAgent("Write a.md and b.md, then list the files.")
	wantPending(t, p, always, "1.2")
	p.ok("approve", always, "--always", "--by", "ada")
	wantPending(t, p, always, "2.1") // b.md went through: write_file is approved for the run
	p.ok("approve", always, "--by", "ada")
	rec = p.waitStatus(always, api.StatusDone)
	if countEvents(rec, "approval_requested") != 2 {
		t.Fatalf("always run: approval_requested events = %d, want 2", countEvents(rec, "approval_requested"))
	}
	if res := toolResults(t, rec)["shell"]; !strings.Contains(res, "b.md") {
		t.Fatalf("shell result %q, want b.md listed", res)
	}
	r.save(c, "agent_always.json", always, "")
}

// recordAgentSuspended: a run left waiting for the approval of the second call of a
// reply; the fixture is an open history, to be finished by the upgraded worker.
func recordAgentSuspended(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("brief.md"), writeCall("notes.md", "waiting\n")}},
		fakellm.Reply{Content: "Done."},
	)
	p, c := agentPlatform(t, model, historyBrief)
	id := p.startAgent("Read the brief and write the note.")
	wantPending(t, p, id, "1.2")
	waitQuiet(t, c, id, "")
	r.save(c, "agent_suspended_on_approval.json", id, "")
}

// largeFile is about 100 KB of numbered lines.
func largeFile() string {
	var b strings.Builder
	for i := 1; b.Len() < 100_000; i++ {
		fmt.Fprintf(&b, "line %05d: the quick brown fox jumps over the lazy dog\n", i)
	}
	return b.String()
}

// recordAgentLargeOutput: a read_file of a 100 KB file, whose output then rides in the
// thread of every later model call (by value, today).
func recordAgentLargeOutput(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("big.txt")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*.txt")}},
		fakellm.Reply{Content: "big.txt has numbered lines."},
	)
	p, c := agentPlatform(t, model, map[string]string{"big.txt": largeFile()})
	id := p.startAgent("What is in big.txt?")
	rec := p.waitStatus(id, api.StatusDone)
	if n := len(model.Requests()); n != 3 {
		t.Fatalf("model requests = %d, want 3", n)
	}
	if countEvents(rec, "agent_tool_result") != 2 {
		t.Fatalf("agent_tool_result events = %d, want 2", countEvents(rec, "agent_tool_result"))
	}
	r.save(c, "agent_large_tool_output.json", id, "")
}

// recordSession: a session created by update-with-start, forced to continue as new after
// two turns (continue_after_turns); prompts with tool calls, one of them approved inside
// the turn; replies streamed as nexo.stream chunks. The continued run (from a carry with
// the thread by value) serves a third prompt and is closed with nexo.close; a fourth
// prompt reopens it from the close's carry, waits for an approval (recorded open), and is
// then recorded open and idle.
func recordSession(t *testing.T, r *recorder) {
	streamed := func(text string, calls ...fakellm.Call) fakellm.Reply {
		return fakellm.Reply{Content: text, ToolCalls: calls, ChunkDelayMS: 80}
	}
	model := fakellm.New(
		// turn 1
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("brief.md")}},
		streamed("The brief asks for a two-line note about the launch, and nothing else for now."),
		// turn 2: a write that needs approval
		streamed("I will write it now.", writeCall("notes.md", "Launch is on Monday.\nEveryone is invited.\n")),
		streamed("I wrote notes.md with the two lines you asked for, after your approval."),
		// turn 3, in the continued run
		fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*.md")}},
		streamed("There are two files in the workspace: brief.md and notes.md, both short."),
		// turn 4, in the reopened run: read before write, the write waits for a human
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("notes.md"), writeCall("notes.md", "Launch is on Monday.\nEveryone is invited.\nBring a friend.\n")}},
		streamed("notes.md now has a third line."),
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: assistant
    instructions: You are a helpful assistant with a workspace.
    permissions: {mode: approve}
    sandbox: {type: local, dir: ./workspace}
    max_turns: 5
`)
	p.writeWorkspace(map[string]string{"brief.md": historyBrief["brief.md"]})
	p.start()
	c := p.dial()
	id := api.SessionID("assistant", "hist")
	prompt := func(text string, extra ...string) {
		t.Helper()
		out := p.ok(append([]string{"session", "prompt", "assistant", "hist", text}, extra...)...)
		if strings.TrimSpace(out) == "" {
			t.Fatalf("prompt %q: empty reply", text)
		}
	}
	// promptApproved sends a prompt whose turn waits for the approval of callID, records
	// the open history under name (when set), approves, and waits for the reply.
	promptApproved := func(text, callID, name string) {
		t.Helper()
		done := p.goStarter("session", "prompt", "assistant", "hist", text)
		wantPending(t, p, id, callID)
		if name != "" {
			waitQuiet(t, c, id, "")
			r.save(c, name, id, "")
		}
		p.ok("approve", id, "--by", "ada")
		res := <-done
		if res.code != 0 || strings.TrimSpace(res.stdout) == "" {
			t.Fatalf("prompt %q: exit %d\n%s\n%s\nworker:\n%s", text, res.code, res.stdout, res.stderr, p.output())
		}
	}

	prompt("What does the brief say?", "--continue-after-turns", "2")
	first := currentRun(t, c, id)
	promptApproved("Write the note.", "2.1.1", "")
	if st := waitRunClosed(t, c, id, first); st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		t.Fatalf("first run ended %s, want continued as new after two turns", st)
	}
	prompt("Which files are there?")
	second := currentRun(t, c, id)
	if second == first {
		t.Fatal("the third prompt did not reach the continued run")
	}
	p.ok("session", "close", "assistant", "hist")
	if st := waitRunClosed(t, c, id, second); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("continued run ended %s, want completed by nexo.close", st)
	}
	promptApproved("Add a third line.", "4.1.2", "session_reopened_suspended_on_approval.json")
	third := currentRun(t, c, id)
	if third == second {
		t.Fatal("the fourth prompt did not reopen the session")
	}
	waitQuiet(t, c, id, third)

	var view api.SessionView
	if err := json.Unmarshal([]byte(p.ok("session", "show", "assistant", "hist", "--json")), &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Turns) != 4 || view.Runs != 3 {
		t.Fatalf("session view: %d turns, %d runs; want 4 and 3", len(view.Turns), view.Runs)
	}
	// Before threads by reference, streamed text reached the session as signals; since,
	// live text is the model call's heartbeat and never history.
	if n := streamSignals(t, c, id, first); r.prefix == "" && n < 2 {
		t.Fatalf("first run received %d %s signals, want streamed chunks in its history", n, api.SignalStream)
	} else if r.prefix != "" && n != 0 {
		t.Fatalf("first run received %d %s signals, want none (live text is not history)", n, api.SignalStream)
	}
	r.save(c, "session_first_run_continued_as_new.json", id, first)
	r.save(c, "session_continued_run_closed.json", id, second)
	r.save(c, "session_reopened_idle.json", id, third)
}

// streamSignals counts the nexo.stream signals in a run's history.
func streamSignals(t *testing.T, c client.Client, id, runID string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s != nil && s.GetSignalName() == api.SignalStream {
			n++
		}
	}
	return n
}

// recordAgentMCP: an agent with a stdio MCP server (the mcptest server): the tool list is
// an activity, a pre-approved call (mcp_allow) runs at once, a second one is approved by a
// human, and the run's end closes the client.
func recordAgentMCP(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{
			toolCall("local__echo", map[string]any{"text": "from stdio"}),
			toolCall("local__add", map[string]any{"a": 40, "b": 2}),
		}},
		fakellm.Reply{Content: "All done."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: mcper
    instructions: You use MCP tools.
    permissions:
      mode: approve
      mcp_allow: [local__echo]
    sandbox: {type: local, dir: ./workspace}
    max_turns: 4
    mcp:
      - name: local
        transport: stdio
        command: ` + mcptest.BuildServer(t) + `
`)
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "mcper", "Use your tools."))
	wantPending(t, p, id, "1.2")
	p.ok("approve", id, "--by", "ada")
	rec := p.waitStatus(id, api.StatusDone)
	if res := toolResults(t, rec); res["local__echo"] != "from stdio" || res["local__add"] != "42" {
		t.Fatalf("tool results = %v", res)
	}
	r.save(c, "agent_mcp_stdio.json", id, "")
}

// recordAgentSkills: the README's skills example (examples/skills) on a local sandbox:
// requires probed, the skill recorded and copied into the workspace, its script run
// (pre-approved), the report collected as artifacts.
func recordAgentSkills(t *testing.T, r *recorder) {
	p, _ := skillExample(t)
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "reporter", "Report on Q4"))
	rec := p.waitStatus(id, api.StatusDone)
	if countEvents(rec, "skills_materialized") != 1 || artifactSum(rec, "index.html") == "" {
		t.Fatalf("skills run: events %+v artifacts %+v", rec.Events, rec.Artifacts)
	}
	r.save(c, "agent_skills.json", id, "")
}

// recordDocumentApprovalBySignal: a DocumentApproval resumed by a plain Temporal signal, as
// `temporal workflow signal --workflow-id <id> --name nexo.resume --input
// '{"input":{"approved":true,"approver":"cli"}}'` sends it (the temporal CLI is not a
// dependency of this module, so the test sends that exact JSON payload with the SDK); and one
// left suspended, an open history for the upgraded worker to finish.
func recordDocumentApprovalBySignal(t *testing.T, r *recorder) {
	p := newPlatform(t)
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"cli"}`))
	p.waitStatus(id, api.StatusSuspended)
	var sig map[string]any
	if err := json.Unmarshal([]byte(`{"input":{"approved":true,"approver":"cli"}}`), &sig); err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(context.Background(), id, "", api.SignalResume, sig); err != nil {
		t.Fatal(err)
	}
	rec := p.waitStatus(id, api.StatusDone)
	var res demo.DocumentApprovalResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Approver != "cli" || res.Published == "" {
		t.Fatalf("result %s (%v), want published and approved by cli", rec.Result, err)
	}
	waiting := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"later"}`))
	p.waitStatus(waiting, api.StatusSuspended)
	waitQuiet(t, c, waiting, "")
	r.save(c, "document_approval_resumed_by_signal.json", id, "")
	r.save(c, "document_approval_suspended.json", waiting, "")
}

// recordDashboardRerun: a BuildDashboard whose second metric fails after the first was
// stored (CheckpointAll), and its rerun with the input fixed, seeded with the stored
// checkpoint, which runs only the missing metric and completes.
func recordDashboardRerun(t *testing.T, r *recorder) {
	p := newPlatform(t)
	p.start()
	c := p.dial()
	failed := strings.TrimSpace(p.ok("run", "BuildDashboard", "--input", `{"metrics":["sales","bogus"]}`))
	if rec := p.waitStatus(failed, api.StatusFailed); rec.State["sales"] == nil {
		t.Fatalf("failed run: state %v, want sales stored", rec.State)
	}
	rerun := strings.Fields(p.ok("rerun", failed, "--input", `{"metrics":["sales","traffic"]}`))[0]
	rec := p.waitStatus(rerun, api.StatusDone)
	if countEvents(rec, "rerun") != 1 || countEvents(rec, "checkpoint") != 1 {
		t.Fatalf("rerun: %d rerun, %d checkpoint events; want 1 and 1 (only traffic runs)", countEvents(rec, "rerun"), countEvents(rec, "checkpoint"))
	}
	r.save(c, "build_dashboard_partial_failure.json", failed, "")
	r.save(c, "build_dashboard_rerun_seeded.json", rerun, "")
}

// recordAgentTurnLimit: an agent that keeps calling tools is stopped by --max-turns 2 and
// the run fails with the turn limit.
func recordAgentTurnLimit(t *testing.T, r *recorder) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{globCall("*.md")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{readCall("brief.md")}},
		fakellm.Reply{Content: "unreachable: the limit is two model calls"},
	)
	p, c := agentPlatform(t, model, historyBrief)
	id := strings.TrimSpace(p.ok("agent", "scribe", "Look around.", "--max-turns", "2"))
	rec := p.waitStatus(id, api.StatusFailed)
	if rec.Error == nil || !strings.Contains(*rec.Error, workflows.ErrTurnLimit.Error()) {
		t.Fatalf("run error %+v, want %q", rec.Error, workflows.ErrTurnLimit)
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("model requests = %d, want 2", n)
	}
	r.save(c, "agent_turn_limit.json", id, "")
}

// recordAgentDockerPark: an agent in a Docker sandbox whose workspace is parked (archived,
// container removed) while it waits for an approval longer than the idle timeout, and
// restored into a fresh container after it; skipped where no Docker engine runs.
func recordAgentDockerPark(t *testing.T, r *recorder) {
	requireSandboxImage(t)
	// TestDockerAgentParksWhileWaiting's agent and script: the write runs at once, both
	// shell commands wait for a human.
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("kept across the park"), shellCall("echo scratch > scratch.txt")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("cat notes.md scratch.txt")}},
		fakellm.Reply{Content: "All files were still there."},
	)
	p := newPlatform(t)
	p.writeConfig(boxedAgentConfig(model.Start(t)))
	p.start()
	c := p.dial()
	id := strings.TrimSpace(p.ok("agent", "boxed", "Keep notes."))
	wantPending(t, p, id, "1.2")
	deadline := time.Now().Add(30 * time.Second)
	for countEvents(p.record(id), "sandbox_parked") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not parked after 30s: %+v", p.record(id).Events)
		}
		time.Sleep(200 * time.Millisecond) // polling the record; the park has no signal to wait on
	}
	p.ok("approve", id, "--call", "1.2")
	wantPending(t, p, id, "2.1")
	p.ok("approve", id, "--call", "2.1")
	rec := p.waitStatus(id, api.StatusDone)
	if countEvents(rec, "sandbox_restored") != 1 {
		t.Fatalf("sandbox_restored events = %d, want 1", countEvents(rec, "sandbox_restored"))
	}
	r.save(c, "agent_docker_parked_restored.json", id, "")
}
