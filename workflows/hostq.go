package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// Per-host task queues: every sandbox tier belongs to its run, on any fleet.
//
// A run's first sandbox activity is preceded by ClaimSandboxHost on the shared task queue:
// the worker that takes it answers with its own host queue ("<task_queue>@host-<id>"),
// which the run keeps in workflow state (from history, so replay and continue-as-new see
// the same) and in its memo (for the reapers). Every sandbox activity of the run then goes
// to that queue, whatever the tier: a local directory, a virtual sandbox in the worker's
// memory and a docker container all stay on the one machine that holds them.
//
// The workspace is snapshotted to the artifact store (SnapshotSandbox) at every suspend and,
// while the run works, after a write_file or shell call once the last snapshot is older
// than the host's park_every. A host-queue activity that no worker picks up within the
// host's host_timeout (a ScheduleToStart timeout) means the host is gone: the run claims a
// new host, restores its last snapshot and its recorded artifacts there, emits
// sandbox_host_lost and sandbox_restored (with parked_at, when the restored snapshot was
// taken) and runs the failed activity there once more. Release, snapshot and park never
// move a run: what a lost host held is reaped when it comes back.
//
// A run whose agent names a sandbox pool (sandbox: {pool: NAME}) claims on the pool's
// claim queue "<task_queue>@pool-<name>" instead of the shared one: only the pool's hosts
// (`worker --sandbox-host --pool NAME`, or a worker with --pool) poll it, so the run's
// sandbox, and after a move its new one, lives on a host of that pool.
//
// Runs recorded before this (workflow.DefaultVersion) keep the worker sessions of
// hostroute.go, docker only.

// defaultHostTimeout is the ScheduleToStart timeout of host-queue activities when the
// claiming worker named none.
const defaultHostTimeout = 30 * time.Second

// hostState is the run's host routing state.
type hostState struct {
	v *workflow.Version // the run's version of ChangeHostQueue, once asked
	// cur is the host the run's sandbox lives on (nil until the first claim).
	cur *api.SandboxHost
	// carried is the host a continued session brought along, adopted at its first use.
	carried *api.SandboxHost
	// since is when the run last snapshotted or claimed (the park_every clock).
	since    time.Time
	parkedAt *time.Time
	// mu serializes claiming and moving: tool calls of one reply may run concurrently
	// (tool_concurrency), and they must land on one host, claimed once.
	mu workflow.Mutex

	// snapV is the run's version of ChangeSnapshots, once asked.
	snapV *workflow.Version
	// snap is the run's last workspace snapshot and snapCall the call that took it
	// ("" for one taken at a suspend or a stage).
	snap     *api.SnapshotRef
	snapCall string
	// lostNote, when set, starts the next tool result the model sees: what a restore
	// could not bring back.
	lostNote string
}

// snapshotsOn reports whether the run takes a snapshot after every change.
func (rt *runtime) snapshotsOn(ctx workflow.Context) bool {
	if !rt.hostQueued(ctx) {
		return false
	}
	if rt.host.snapV == nil {
		v := workflow.GetVersion(ctx, ChangeSnapshots, workflow.DefaultVersion, 1)
		rt.host.snapV = &v
	}
	return *rt.host.snapV >= 1
}

// snapshotBase is the manifest a sandbox made anew for the run is rebuilt from.
func (rt *runtime) snapshotBase() string {
	if rt.host.snap == nil {
		return ""
	}
	return rt.host.snap.Manifest
}

// noteSnapshot makes ref the run's last snapshot unless a later one is already kept (two
// calls of one reply may end in either order).
func (rt *runtime) noteSnapshot(ctx workflow.Context, ref *api.SnapshotRef, callID string) {
	if ref == nil || ref.Manifest == "" {
		return
	}
	if rt.host.snap != nil && rt.host.snap.AtUnixNano > ref.AtUnixNano {
		return
	}
	r := *ref
	rt.host.snap, rt.host.snapCall = &r, callID
	t := time.Unix(0, ref.AtUnixNano).UTC()
	rt.host.parkedAt = &t
	rt.host.since = workflow.Now(ctx)
}

// noteToolSnapshot takes in what a tool call's result says of the workspace: its
// snapshot, a snapshot that could not be taken, a sandbox rebuilt for it. What a restore
// lost is told to the model at the start of this result (or the next one).
func (rt *runtime) noteToolSnapshot(ctx workflow.Context, callID string, res *api.RunToolResult) {
	rt.noteSnapshot(ctx, res.Snapshot, callID)
	if res.SnapshotError != "" {
		rt.emit(ctx, "sandbox_snapshot_failed", map[string]string{"call_id": callID, "error": res.SnapshotError})
	}
	if rb := res.Rebuilt; rb != nil {
		data := map[string]any{"reason": "rebuilt", "call_id": callID, "snapshot": rt.snapshotBase(), "snapshot_call": rt.host.snapCall}
		if len(rb.Lost) > 0 {
			data["lost"], data["lost_count"] = boundedPaths(rb.Lost), len(rb.Lost)
		}
		if len(rb.Skipped) > 0 {
			data["skipped"] = boundedPaths(rb.Skipped)
		}
		rt.emit(ctx, "sandbox_restored", data)
		if note := lostNote(*rb); note != "" {
			rt.host.lostNote += note
		}
	}
	if rt.host.lostNote != "" {
		res.Content = rt.host.lostNote + res.Content
		rt.host.lostNote = ""
	}
}

// EventEgress is the event of one request a call's command made through the egress
// proxy: host, port, method, status, bytes, and why it was refused; never a header or a
// body.
const EventEgress = "egress"

// noteEgress appends an egress event for each request the call's commands made through
// the egress proxy, and one saying how many more there were past the activity's bound.
// Events are the record's own state, no command: histories recorded before (whose results
// have no egress) replay as they were.
func (rt *runtime) noteEgress(ctx workflow.Context, callID string, res *api.RunToolResult) {
	for _, r := range res.Egress {
		data := map[string]any{"call_id": callID, "host": r.Host, "method": r.Method, "status": r.Status,
			"bytes_up": r.BytesUp, "bytes_down": r.BytesDown}
		if r.Port != 0 {
			data["port"] = r.Port
		}
		if r.Denied != "" {
			data["denied"] = r.Denied
		}
		if r.Error != "" {
			data["error"] = r.Error
		}
		if r.Injected != "" {
			data["injected"] = r.Injected
		}
		rt.emit(ctx, EventEgress, data)
	}
	if n := res.EgressDropped; n > 0 {
		rt.emit(ctx, EventEgress, map[string]any{"call_id": callID, "dropped": n,
			"note": fmt.Sprintf("%d more requests of this call are not recorded (at most %d per call)", n, api.MaxEgressRecords)})
	}
	res.Egress, res.EgressDropped = nil, 0
}

// noteHooked appends a tool_hook event for each thing the agent's tool hooks did to the
// call (a denial with its reason, rewritten arguments or result, a hook that failed).
// Events are the record's own state, no command: the hooks run inside the tool
// activities, so histories recorded before (whose results say nothing of hooks) replay
// as they were.
func (rt *runtime) noteHooked(ctx workflow.Context, callID, tool string, res *api.RunToolResult) {
	for _, h := range res.Hooked {
		data := map[string]any{"call_id": callID, "tool": tool, "hook": h.Hook, "action": h.Action}
		if h.Reason != "" {
			data["reason"] = h.Reason
		}
		rt.emit(ctx, api.EventToolHook, data)
	}
	res.Hooked = nil
}

// maxNamedPaths bounds the paths a restore's note and event name: a workspace that lost
// thousands of files must not carry them all into history and the model's thread.
const maxNamedPaths = 20

// namedPaths joins at most maxNamedPaths of ps, saying how many more there are.
func namedPaths(ps []string) string {
	if len(ps) <= maxNamedPaths {
		return strings.Join(ps, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ps[:maxNamedPaths], ", "), len(ps)-maxNamedPaths)
}

// boundedPaths is ps cut to maxNamedPaths, for an event.
func boundedPaths(ps []string) []string { return ps[:min(len(ps), maxNamedPaths)] }

// lostNote is what the model is told of a restore that could not bring everything back.
func lostNote(rb api.RestoreManifestResult) string {
	note := ""
	if len(rb.Lost) > 0 {
		note += fmt.Sprintf("[note: the workspace was restored from its last snapshot, but %d file(s) could not be (their stored bytes are missing or changed): %s]\n",
			len(rb.Lost), namedPaths(rb.Lost))
	}
	if len(rb.Skipped) > 0 {
		note += fmt.Sprintf("[note: symbolic links are not restored on this sandbox: %s]\n", namedPaths(rb.Skipped))
	}
	return note
}

// lockHost takes the run's host lock (made on first use; no command, so uncontended use
// leaves the command sequence as it was).
func (rt *runtime) lockHost(ctx workflow.Context) (func(), error) {
	if rt.host.mu == nil {
		rt.host.mu = workflow.NewMutex(ctx)
	}
	if err := rt.host.mu.Lock(ctx); err != nil {
		return nil, err
	}
	return rt.host.mu.Unlock, nil
}

// hostQueued reports whether the run routes its sandbox activities by host queue.
func (rt *runtime) hostQueued(ctx workflow.Context) bool {
	if rt.host.v == nil {
		v := workflow.GetVersion(ctx, ChangeHostQueue, workflow.DefaultVersion, 1)
		rt.host.v = &v
	}
	return *rt.host.v >= 1
}

// hostActive: the run has a host (host queues on, claimed).
func (rt *runtime) hostActive() bool {
	return rt.host.v != nil && *rt.host.v >= 1 && rt.host.cur != nil
}

func claimOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    ActivityHeartbeatTimeout,
		RetryPolicy:         defaultRetryPolicy(),
	}
}

// claimHost asks the shared task queue (or the claim queue of the agent's pool) for a
// host and makes it the run's.
func (rt *runtime) claimHost(ctx workflow.Context, fresh bool) error {
	opts := claimOptions()
	if pool := rt.sandbox.Pool; pool != "" {
		// Only the hosts of the pool poll its claim queue, so the run's sandbox (and, after
		// a move, its new one) lives on one of them. No workflow.GetVersion: the claim's
		// task queue changes only for a run whose sandbox names a pool, a field no run
		// recorded before it existed can hold (the spec comes from history), so every
		// older history schedules its claim exactly as before. No ScheduleToStart timeout
		// either: while the pool has no host up the claim waits for one (a start is
		// refused then, runs.Client.Start; a move waits for a host of the pool).
		opts.TaskQueue = api.PoolQueueName(workflow.GetInfo(ctx).TaskQueueName, pool)
	}
	cctx := workflow.WithActivityOptions(ctx, opts)
	var h api.SandboxHost
	if err := workflow.ExecuteActivity(cctx, api.ActivityClaimSandboxHost, api.ClaimHostRequest{RunID: rt.rec.ID, Fresh: fresh}).Get(ctx, &h); err != nil {
		return wrap(err, "claim a host for the run's sandbox")
	}
	if h.Queue == "" {
		return temporal.NewNonRetryableApplicationError("claim a host for the run's sandbox: the worker answered no host queue", api.ErrTypeBadInput, nil)
	}
	h.ParkedAt = nil
	rt.adoptHost(ctx, &h)
	return nil
}

// adoptHost makes h the run's host and records it in the memo.
func (rt *runtime) adoptHost(ctx workflow.Context, h *api.SandboxHost) {
	rt.host.cur = h
	rt.host.since = workflow.Now(ctx)
	if err := workflow.UpsertMemo(ctx, map[string]any{api.MemoSandboxHost: h.Queue}); err != nil {
		workflow.GetLogger(ctx).Warn("upsert memo "+api.MemoSandboxHost+" failed", "error", err)
	}
}

// hostCtx is ctx (with opts, when given) routed to the run's host, claimed (or adopted
// from a continued session) on first use; a docker workspace parked while the run waited
// is restored there first.
func (rt *runtime) hostCtx(ctx workflow.Context, opts *workflow.ActivityOptions) (workflow.Context, error) {
	unlock, err := rt.lockHost(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rt.host.cur == nil {
		if c := rt.host.carried; c != nil {
			rt.host.carried = nil
			rt.host.parkedAt = c.ParkedAt
			h := *c
			h.ParkedAt = nil
			rt.adoptHost(ctx, &h)
		} else if err := rt.claimHost(ctx, true); err != nil {
			return nil, err
		}
	}
	if rt.parked {
		rt.parked = false
		if err := rt.restoreHere(ctx, false); err != nil {
			return nil, err
		}
	}
	return rt.onHostQueue(ctx, opts), nil
}

// onHostQueue returns ctx with opts (nil: ctx's options) sent to the run's host queue.
func (rt *runtime) onHostQueue(ctx workflow.Context, opts *workflow.ActivityOptions) workflow.Context {
	ao := workflow.GetActivityOptions(ctx)
	if opts != nil {
		ao = *opts
	}
	ao.TaskQueue = rt.host.cur.Queue
	ao.ScheduleToStartTimeout = time.Duration(rt.host.cur.HostTimeout)
	if ao.ScheduleToStartTimeout <= 0 {
		ao.ScheduleToStartTimeout = defaultHostTimeout
	}
	return workflow.WithActivityOptions(ctx, ao)
}

// movable: the activities after which a lost host moves the run (work on the sandbox).
func movable(activity string) bool {
	switch activity {
	case api.ActivityReleaseSandbox, api.ActivitySnapshotSandbox, api.ActivityParkSandbox:
		return false
	}
	return true
}

// hostLost reports whether err is a host-queue activity no worker picked up in time.
func hostLost(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// onHost runs a sandbox activity on the run's host; when the host is lost it moves the
// run and runs the activity once more on the new host.
func (rt *runtime) onHost(ctx workflow.Context, opts *workflow.ActivityOptions, activity string, arg, out any) error {
	for attempt := 0; ; attempt++ {
		hctx, err := rt.hostCtx(ctx, opts)
		if err != nil {
			return err
		}
		used := rt.host.cur.Queue
		err = workflow.ExecuteActivity(hctx, activity, arg).Get(ctx, out)
		if err == nil || !hostLost(err) || !movable(activity) || attempt > 0 {
			return err
		}
		if merr := rt.moveOnce(ctx, used); merr != nil {
			return merr
		}
		arg = reissued(arg)
	}
}

// movedNote starts the result of a tool call run again on a new host after its host was
// lost. The call is a new activity there (attempt 1), so the retry note the worker adds
// for Temporal's own retries (attempt > 1) would not say it; yet the lost host may have
// run it partly (a command half done, a file written outside the workspace, a request
// sent), and the model should check before it repeats or builds on the call.
const movedNote = "note: this call is a retry (its host was lost, and it runs again on a new host): an earlier attempt may have run partly\n"

// reissued is arg as the new host gets it: a tool call carries movedNote (only the input
// changes, not the command).
func reissued(arg any) any {
	if req, ok := arg.(api.RunToolRequest); ok {
		req.Note = movedNote + req.Note
		return req
	}
	return arg
}

// moveOnce moves the run off the host queue used, unless a concurrent call (of the same
// model reply) already moved it.
func (rt *runtime) moveOnce(ctx workflow.Context, used string) error {
	unlock, err := rt.lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if rt.host.cur == nil || rt.host.cur.Queue != used {
		return nil
	}
	return rt.moveHost(ctx)
}

// moveHost gives the run a new host after its host was lost: a new claim, the last
// snapshot and the run's recorded artifacts restored there, the agents' skill files
// copied again.
func (rt *runtime) moveHost(ctx workflow.Context) error {
	from := rt.host.cur.Queue
	rt.host.cur = nil
	if err := rt.claimHost(ctx, false); err != nil {
		return err
	}
	var names []string
	for _, a := range rt.rec.Artifacts {
		names = append(names, a.Name)
	}
	rt.emit(ctx, "sandbox_host_lost", map[string]any{"from": from, "to": rt.host.cur.Queue, "restored_artifacts": names})
	return rt.restoreHere(ctx, true)
}

// restoreHere rebuilds the run's sandbox on its current host from the last snapshot (and
// after a move, its recorded artifacts) and emits sandbox_restored.
func (rt *runtime) restoreHere(ctx workflow.Context, moved bool) error {
	// A session's first sandbox use comes from its prompt's update handler, whose context
	// has no activity options (a fork's restore is the first activity there): without
	// defaults the restore could not be scheduled at all.
	ctx = withDefaultOptions(ctx)
	hctx := rt.onHostQueue(ctx, nil)
	req := api.ReleaseSandboxRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox}
	if rt.snapshotsOn(ctx) {
		req.Manifest = rt.snapshotBase()
	}
	var res api.RestoreOnHostResult
	err := workflow.ExecuteActivity(hctx, api.ActivityRestoreSandboxOnHost, req).Get(ctx, &res)
	unreadable := ""
	if err != nil && req.Manifest != "" && !hostLost(err) {
		// The snapshot itself cannot be read (its manifest is missing or changed): the
		// workspace starts empty, and the model is told so; never a silent reset.
		unreadable = errorMessage(err)
		req.Manifest = ""
		res = api.RestoreOnHostResult{}
		err = workflow.ExecuteActivity(hctx, api.ActivityRestoreSandboxOnHost, req).Get(ctx, &res)
		res.Found = false
	}
	if err != nil {
		rt.emit(ctx, "sandbox_restore_failed", map[string]string{"error": errorMessage(err)})
		return wrap(err, "restore the run's sandbox on host %s", rt.host.cur.Queue)
	}
	data := map[string]any{"archive_bytes": res.Bytes, "host": rt.host.cur.Queue}
	if res.Found && rt.host.parkedAt != nil {
		data["parked_at"] = rt.host.parkedAt.UTC()
	} else {
		data["parked_at"] = nil // never snapshotted: the workspace starts empty
	}
	if req.Manifest != "" {
		data["snapshot"], data["snapshot_call"] = req.Manifest, rt.host.snapCall
		if len(res.Lost) > 0 {
			data["lost"], data["lost_count"] = boundedPaths(res.Lost), len(res.Lost)
		}
		if len(res.Skipped) > 0 {
			data["skipped"] = boundedPaths(res.Skipped)
		}
		rt.host.lostNote += lostNote(res.RestoreManifestResult)
	}
	if unreadable != "" {
		data["snapshot"], data["error"] = rt.snapshotBase(), unreadable
		rt.host.lostNote += fmt.Sprintf("[note: this run moved to another host and its workspace snapshot could not be read (%s): the workspace was restored empty, so files written before may be missing]\n", unreadable)
		rt.host.snap, rt.host.snapCall = nil, ""
	}
	if moved {
		var names []string
		for _, a := range rt.rec.Artifacts {
			names = append(names, a.Name)
		}
		if len(names) > 0 {
			rreq := api.RestoreArtifactsRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox, Names: names, FromRun: rt.rec.ID}
			if err := workflow.ExecuteActivity(hctx, api.ActivityRestoreArtifacts, rreq).Get(ctx, nil); err != nil {
				rt.emit(ctx, "sandbox_restore_failed", map[string]string{"error": errorMessage(err)})
			}
		}
		data["artifacts"] = names
	}
	rt.emit(ctx, "sandbox_restored", data)
	rt.rematerializeSkills(ctx, hctx)
	return nil
}

func snapshotOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    ActivityHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{api.ErrTypeTooLarge}},
	}
}

// snapshot archives the run's workspace to the artifact store. Best effort: a failure is
// a sandbox_park_failed event; the run goes on with its files on its host.
func (rt *runtime) snapshot(ctx workflow.Context, reason string) {
	if !rt.hostActive() || !rt.sandboxUsed || rt.parked {
		return
	}
	opts := snapshotOptions()
	var res api.SnapshotResult
	req := api.ReleaseSandboxRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox}
	incremental := rt.snapshotsOn(ctx)
	if incremental {
		req.Manifest = api.ManifestRequested
	}
	if err := rt.onHost(ctx, &opts, api.ActivitySnapshotSandbox, req, &res); err != nil {
		rt.emit(ctx, "sandbox_park_failed", map[string]string{"error": errorMessage(err), "reason": reason})
		return
	}
	if incremental {
		if res.Ref == nil {
			return // a user's dir: not the run's to snapshot
		}
		rt.noteSnapshot(ctx, res.Ref, "")
		rt.emit(ctx, "sandbox_snapshot", map[string]any{"snapshot": res.Ref.Manifest, "files": res.Ref.Files, "bytes": res.Ref.Bytes,
			"uploaded": res.Ref.Uploaded, "reason": reason, "host": rt.host.cur.Queue})
		return
	}
	now := workflow.Now(ctx)
	rt.host.since, rt.host.parkedAt = now, &now
	rt.emit(ctx, "sandbox_snapshot", map[string]any{"archive_bytes": res.Bytes, "reason": reason, "host": rt.host.cur.Queue})
}

// parkIfDue snapshots after a sandbox-changing tool call when the last snapshot (or the
// claim) is older than the host's park_every.
func (rt *runtime) parkIfDue(ctx workflow.Context, tool string) {
	if tool != agents.ToolWriteFile && tool != agents.ToolShell {
		return
	}
	if !rt.hostActive() || rt.host.cur.ParkEvery <= 0 || rt.snapshotsOn(ctx) {
		return // with snapshots every call already stored one
	}
	if workflow.Now(ctx).Sub(rt.host.since) < time.Duration(rt.host.cur.ParkEvery) {
		return
	}
	rt.snapshot(ctx, "interval")
}

// noteParked records a docker park (ParkSandbox) as the run's last snapshot.
func (rt *runtime) noteParked(ctx workflow.Context) {
	if rt.hostActive() {
		now := workflow.Now(ctx)
		rt.host.since, rt.host.parkedAt = now, &now
	}
}

// parkAtSuspend snapshots the workspace of a run that starts to wait for a human.
func (rt *runtime) parkAtSuspend(ctx workflow.Context) { rt.snapshot(ctx, "suspend") }

// hostCarry is the host a session hands to its continue-as-new run (nil: none yet).
func (rt *runtime) hostCarry() *api.SandboxHost {
	h := rt.host.cur
	if h == nil {
		h = rt.host.carried
	}
	if h == nil {
		return nil
	}
	c := *h
	c.ParkedAt = rt.host.parkedAt
	c.Snapshot, c.SnapshotCall = rt.host.snap, rt.host.snapCall
	return &c
}

// carryHost takes the host a continued session brought along.
func (rt *runtime) carryHost(h *api.SandboxHost) {
	if h != nil && h.Queue != "" {
		c := *h
		c.Snapshot, c.SnapshotCall = nil, ""
		rt.host.carried = &c
		rt.host.parkedAt = h.ParkedAt
		rt.host.snap, rt.host.snapCall = h.Snapshot, h.SnapshotCall
	}
}
