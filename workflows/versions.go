package workflows

import "github.com/nexo-temporal/nexo/workflows/registry"

// The change ids of every workflow.GetVersion call in this project's workflows: the run
// runtime's, the agent loop's, the session's and the example workflows'. Each guards one
// change of a workflow's command sequence, so that a run recorded before the change replays
// the commands it recorded (workflow.DefaultVersion) and a run started after it takes the
// new path (version 1). The string is what history records in the change's "Version"
// marker: it never changes, and an id is never reused for another change.
//
// Every id here has at least one recorded history under testdata that exercises it
// (TestEveryChangeIDHasFixture), and no GetVersion call spells an id as a literal
// (TestGetVersionUsesListedIDs), so this list is the whole of what open runs may depend on.
//
// Legacy mechanisms that live on beside their replacements, each behind its id, until
// `check-replay` shows no open run needs them:
//   - worker sessions for a docker sandbox (hostroute.go): ChangeHostQueue at
//     DefaultVersion; version 1 routes by host queue (hostq.go).
//   - model output streamed to the run as nexo.stream signals (SignalStream): the
//     by-value thread's path, so ChangeThreadByRef at DefaultVersion; by reference a
//     session's text streams live (StreamLive) and is no signal.
//   - the thread carried by value in every model call (thread.go): ChangeThreadByRef at
//     DefaultVersion.
//   - the nexo.approval signal is behind no change id: registering a signal handler is no
//     command. It is the client's fallback for workers older than the nexo.decide update
//     (runs.Client.Decide), a wire matter, not a replay one.
//
// A user's own workflow picks its own change ids; these are not part of the authoring API's
// contract, only listed here so one place holds them all.
const (
	// ChangeA2ATools: an agent's a2a: remotes are described by a DescribeA2AAgents
	// activity when its tools are built, and an a2a_<name> call is a CallA2AAgent
	// activity. Asked only for a spec with remotes, which no spec recorded before them had.
	ChangeA2ATools = "a2a-tools"

	// ChangeAgentUnavailable: a worker that lacks the run's agent no longer fails the run.
	// The workflow records which worker could not (event agent_unavailable, once per
	// worker) and asks again after a backoff, so another worker of the task queue takes it;
	// only when none has offered the agent for AgentUnavailableFor does the run fail,
	// naming the agent.
	ChangeAgentUnavailable = "agent-unavailable"

	// ChangeApprovalDeadline: a call that needs approval under a policy or rule with an
	// approval_timeout starts a durable timer while it waits.
	ChangeApprovalDeadline = "approval-deadline"

	// ChangeApprovalNotify: approval events start a NotifyApproval activity per receiver of
	// the agent's recorded spec (approvals.notify). Runs whose spec names no receiver, which
	// is every run recorded before this change, schedule nothing and never ask.
	ChangeApprovalNotify = "approval-notify"

	// ChangeBudget: an agent whose recorded spec has a budget checks it before each model
	// call and, once it is spent, suspends for a human (a pending decision of capability
	// budget) instead of calling on. Specs recorded before budgets have none, so their runs
	// never ask.
	ChangeBudget = "agent-budget"

	// ChangeCancelOutcome: a canceled run returns a CanceledError whatever its step made of
	// the cancellation (runs canceled before it could close failed).
	ChangeCancelOutcome = "cancel-outcome"

	// ChangeDelegates: an agent_<name> tool call (an agent's delegates) starts the agent
	// as a child AgentRun and waits for it. Asked only at such a call, which no spec
	// recorded before delegates could offer.
	ChangeDelegates = "agent-delegates"

	// ChangeHarnessLoop: an agent with a pluggable loop (agents.Spec.Loop) runs each turn
	// as a HarnessStep activity on the run's sandbox host instead of a CompleteChat model
	// call. Asked only for such an agent, which no spec recorded before loops could name.
	ChangeHarnessLoop = "harness-loop"

	// ChangeHostQueue: sandbox activities go to the host queue the run claimed, the run
	// snapshots its workspace, and moves when its host is lost. Runs recorded before keep
	// the worker sessions of hostroute.go, docker only.
	ChangeHostQueue = "host-queue"

	// ChangeInbox: the run keeps NexoApprovalAgent current while a tool call waits for a
	// decision (an upsert when the call starts waiting and when it is decided). Runs that
	// asked before it have no such commands.
	ChangeInbox = "inbox-approval-attr"

	// ChangeLiveRegistry: the worker registry (workflows/registry) keeps a worker for the
	// TTL its announcement names (a minute by default) instead of 25 hours, drops one that
	// says goodbye (nexo.deregister) at once, and keeps the identities it holds in its memo
	// (api.MemoRegistryLive). A registry recorded before continues as new at the first
	// message of the rule it receives. Declared in package registry, which cannot import
	// this one; the string is spelled there once.
	ChangeLiveRegistry = registry.ChangeLiveRegistry

	// ChangeRegistryMemo: the worker registry also publishes each worker's announcement in
	// its memo (api.MemoRegistryWorkers), so the check before a start needs no worker's
	// task to answer. Defined in workflows/registry.
	ChangeRegistryMemo = registry.ChangeRegistryMemo

	// ChangeModelEndpointQueue: the model calls (CompleteChat, CompactThread) of an agent
	// whose endpoint has a request rate limit go to the endpoint's own task queue
	// (spec.ModelQueue, api.ModelTaskQueue), which every worker polls at the endpoint's
	// rate, so the Temporal server paces the calls of every run on the fleet together. Runs
	// whose recorded spec names no such queue never ask, so their histories are unchanged.
	ChangeModelEndpointQueue = "model-endpoint-queue"

	// ChangeNotifyBeforeClose: a run that closes while approval notifications are still
	// under way waits up to NotifyCloseGrace for them before closing (before, they were
	// abandoned at once, so the notification of the last decision of a run that then
	// finished quickly was often never sent). Asked only when a notification is pending at
	// the close.
	ChangeNotifyBeforeClose = "notify-before-close"

	// ChangeNotifyOutbox: an approval event's notifications are handed to the notifier
	// workflow of each receiver (package workflows/notifier; a local activity per receiver,
	// EnqueueNotification) instead of being NotifyApproval activities of the run, so the
	// run closes at once and no notification is abandoned at its close or continue-as-new.
	// Asked at the first notified approval event; a run that asked before (DefaultVersion)
	// keeps its activities and the close grace of notify-before-close to its end.
	ChangeNotifyOutbox = "notify-outbox"

	// ChangeParallelTools: an agent with tool_concurrency > 1 runs the tool calls of one
	// model reply concurrently. Asked only for such an agent's reply with two calls or more,
	// so every history recorded before (tool_concurrency did not exist) replays the
	// one-by-one loop it recorded.
	ChangeParallelTools = "parallel-tools"

	// ChangePlanTool: the update_plan tool records the plan (a plan update or agent_plan
	// event) and answers with a short acknowledgement, in the workflow, with no activity.
	ChangePlanTool = "plan-tool"

	// ChangeRecordAtClose: a run that closes (done, failed, canceled) stores its final
	// record in the blob store and upserts its reference into the memo (api.MemoRecord), so
	// clients read a closed run with no worker. Runs that closed before it replay without
	// these commands; clients read them by replaying the query.
	ChangeRecordAtClose = "record-at-close"

	// ChangeSessionInterrupt: nexo.interrupt cancels the session turn in flight (its model
	// or tool call: a cancel command) and clears what the turn waited on. Asked in the
	// update's handler, so only a run that was interrupted records it.
	ChangeSessionInterrupt = "session-interrupt"

	// ChangeSnapshots: every call that can change the workspace (write_file, shell, staged
	// files, the snapshot at a suspend) stores an incremental content-addressed snapshot,
	// the run keeps its last one, and a move or a sandbox made anew restores it; the
	// interval snapshot (park_every) is no longer taken. Runs recorded before keep the
	// archive.
	ChangeSnapshots = "workspace-snapshots"

	// ChangeStrictResume: DocumentApproval ignores a resume input that is not a decision
	// (DocumentApprovalDecision) instead of taking it as a denial.
	ChangeStrictResume = "strict-resume-input"

	// ChangeThinkingEvents: a model reply with reasoning output records it, as a session's
	// thinking update or a run's agent_thinking event. Asked only for a reply that carries
	// reasoning, which no result recorded before had, so older histories never ask.
	ChangeThinkingEvents = "thinking-events"

	// ChangeTypedOutput: an agent with an output_schema whose final reply is not JSON, or
	// does not validate, gets the reply and the errors back as a user message (the error's
	// wording recorded by a side effect) and is asked again, up to output_retries times,
	// then the run fails. Asked only at such a reply, which no spec recorded before
	// output_schema could lead to.
	ChangeTypedOutput = "typed-output"

	// ChangeThreadByRef guards the switch from threads carried by value in every model call
	// to threads stored in the blob store and named by reference (ARCHITECTURE §10). Runs
	// and session runs recorded before it (DefaultVersion) keep the by-value shape to their
	// end; a session continues as new on the new shape.
	ChangeThreadByRef = "thread-by-reference"
)

// ChangeIDs returns every change id above, in alphabetical order (a fresh slice).
func ChangeIDs() []string {
	return []string{
		ChangeA2ATools,
		ChangeAgentUnavailable,
		ChangeApprovalDeadline,
		ChangeApprovalNotify,
		ChangeBudget,
		ChangeCancelOutcome,
		ChangeDelegates,
		ChangeHarnessLoop,
		ChangeHostQueue,
		ChangeInbox,
		ChangeLiveRegistry,
		ChangeModelEndpointQueue,
		ChangeNotifyBeforeClose,
		ChangeNotifyOutbox,
		ChangeParallelTools,
		ChangePlanTool,
		ChangeRecordAtClose,
		ChangeRegistryMemo,
		ChangeSessionInterrupt,
		ChangeSnapshots,
		ChangeStrictResume,
		ChangeThinkingEvents,
		ChangeThreadByRef,
		ChangeTypedOutput,
	}
}
