package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// A docker sandbox lives on the Docker host of the worker that created it, so every
// activity that touches it must reach that worker. Such runs open a Temporal worker
// session: activities run in it go to the same worker. If that worker is lost the session
// fails; the run opens a new one (on any worker), which gets a fresh container with the
// parked workspace (if the run had parked it) and the run's recorded artifacts restored,
// and the failed activity runs again there. A run that parks its container while it waits
// for a human closes its session, so it holds no worker while it waits.

// sandboxSessionOptions: a session heartbeats; a worker silent this long is taken as lost.
var sandboxSessionOptions = workflow.SessionOptions{
	CreationTimeout:  2 * time.Minute,
	ExecutionTimeout: 365 * 24 * time.Hour,
	HeartbeatTimeout: 20 * time.Second,
}

func (rt *runtime) pinned() bool { return rt.sandbox.Type == api.SandboxDocker }

// sandboxCtx returns the context for an activity on the run's sandbox: ctx itself, or for
// a docker sandbox the run's worker session (opened, or opened again after a loss, here).
func (rt *runtime) sandboxCtx(ctx workflow.Context) (workflow.Context, error) {
	if !rt.pinned() {
		return ctx, nil
	}
	base := rt.rootCtx
	if base.Err() != nil {
		// The run was canceled: its clean-up (a disconnected context) still needs the host.
		base = ctx
		if rt.hostSession != nil && rt.hostSession.Err() != nil {
			rt.hostSession = nil
		}
	}
	if rt.hostSession != nil && workflow.GetSessionInfo(rt.hostSession).SessionState != workflow.SessionStateFailed {
		return rt.hostSession, nil
	}
	lost := rt.hostSession != nil
	if lost {
		workflow.CompleteSession(rt.hostSession)
		rt.hostSession = nil
	}
	opts := sandboxSessionOptions
	sctx, err := workflow.CreateSession(base, &opts)
	if err != nil {
		return nil, err
	}
	rt.hostSession = sctx
	if lost || rt.parked {
		rt.parked = false
		rt.restoreOnNewHost(ctx, sctx, lost)
	}
	return sctx, nil
}

// restoreOnNewHost fills a fresh container: the parked workspace when there is one, after
// a lost worker also the run's recorded artifacts, and the agents' skill files.
func (rt *runtime) restoreOnNewHost(ctx, sctx workflow.Context, lost bool) {
	defer rt.rematerializeSkills(ctx, sctx) // a fresh container, so the skills' files too
	req := api.ReleaseSandboxRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox}
	var size int64
	if err := workflow.ExecuteActivity(sctx, api.ActivityRestoreSandbox, req).Get(ctx, &size); err != nil {
		rt.emit(ctx, "sandbox_restore_failed", map[string]string{"error": errorMessage(err)})
	} else if size > 0 {
		rt.emit(ctx, "sandbox_restored", map[string]any{"archive_bytes": size})
	}
	if !lost {
		return
	}
	var names []string
	for _, a := range rt.rec.Artifacts {
		names = append(names, a.Name)
	}
	rt.emit(ctx, "sandbox_host_lost", map[string]any{"restored_artifacts": names})
	if len(names) > 0 {
		rreq := api.RestoreArtifactsRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox, Names: names, FromRun: rt.rec.ID}
		if err := workflow.ExecuteActivity(sctx, api.ActivityRestoreArtifacts, rreq).Get(ctx, nil); err != nil {
			rt.emit(ctx, "sandbox_restore_failed", map[string]string{"error": errorMessage(err)})
		}
	}
}

// onSandbox runs a sandbox activity with opts (nil: the context's options), on the run's
// worker for a docker sandbox, once more on a new worker if that worker was lost.
func (rt *runtime) onSandbox(ctx workflow.Context, opts *workflow.ActivityOptions, activity string, arg, out any) error {
	if rt.hostQueued(ctx) {
		return rt.onHost(ctx, opts, activity, arg, out) // per-host task queues (hostq.go)
	}
	for attempt := 0; ; attempt++ {
		sctx, err := rt.sandboxCtx(ctx)
		if err != nil {
			return err
		}
		if opts != nil {
			sctx = workflow.WithActivityOptions(sctx, *opts)
		}
		err = workflow.ExecuteActivity(sctx, activity, arg).Get(ctx, out)
		if err == nil || !rt.pinned() || attempt > 0 || rt.hostSession == nil ||
			workflow.GetSessionInfo(rt.hostSession).SessionState != workflow.SessionStateFailed {
			return err
		}
	}
}

// leaveHost closes the run's worker session (the run no longer needs that worker).
func (rt *runtime) leaveHost() {
	if rt.hostSession != nil {
		workflow.CompleteSession(rt.hostSession)
		rt.hostSession = nil
	}
}
