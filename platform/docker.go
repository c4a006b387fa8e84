package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// checkDockerAgents checks, before the worker takes any task, that every agent with a
// docker sandbox can get its container here (image present, bind sources existing), so
// a run does not find out after its first paid model call. Every bad agent is named.
func checkDockerAgents(ctx context.Context, mgr *docker.Manager, specs []agents.Spec) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var errs []error
	for _, a := range specs {
		if a.Sandbox.Type != api.SandboxDocker {
			continue
		}
		if err := mgr.Check(ctx, activities.DockerOptions(a.Sandbox)); err != nil {
			errs = append(errs, fmt.Errorf("agents[%s].sandbox: %w", a.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("check docker sandboxes: %w", err)
	}
	return nil
}

// warmDockerAgents starts the warm pools of the agents with a docker sandbox and a warm
// size (sandbox.warm): agents whose options make the same container share one pool, of
// the largest size they ask. A pool whose image is missing fails the start, naming the
// agent, as checkDockerAgents does.
func warmDockerAgents(ctx context.Context, mgr *docker.Manager, specs []agents.Spec) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var errs []error
	for _, a := range specs {
		if a.Sandbox.Type != api.SandboxDocker || a.Sandbox.Warm == 0 {
			continue
		}
		if err := mgr.Warm(ctx, activities.DockerOptions(a.Sandbox), a.Sandbox.Warm); err != nil {
			errs = append(errs, fmt.Errorf("agents[%s].sandbox.warm: %w", a.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("start warm pools: %w", err)
	}
	return nil
}

// reapEvery is how often the worker removes containers whose run is closed or unknown, so
// a worker killed mid-run leaks no container for longer than this.
const reapEvery = 5 * time.Minute

// startDocker connects to the Docker engine (DOCKER_HOST or the default socket) and
// starts the reaper; it returns nil when no engine answers. The stop function removes the
// warm pools' unclaimed containers.
func startDocker(ctx context.Context, tc client.Client, scope, taskQueue, hostID string, logger *slog.Logger) (*docker.Manager, func()) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	cli, err := docker.NewClient(dctx)
	cancel()
	if err != nil {
		logger.Info("docker sandboxes disabled", "error", err)
		return nil, nil
	}
	// Containers are labelled with the worker's host id, so the host's reaper finds those
	// of runs that moved away (platform/hostq.go) after a restart too.
	mgr := docker.NewManager(cli, hostID)
	mgr.SetScope(scope)
	isClosed := func(runID string) (bool, error) {
		desc, err := tc.DescribeWorkflowExecution(ctx, runID, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	}
	// A host is alive while its host queue has pollers (Temporal forgets a poller some
	// minutes after its last poll): the warm pools of a host gone that long are reaped.
	hostAlive := func(host string) (bool, error) {
		resp, err := tc.DescribeTaskQueue(ctx, api.HostQueueName(taskQueue, host), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		if err != nil {
			return false, err
		}
		return len(resp.GetPollers()) > 0, nil
	}
	rctx, stop := context.WithCancel(ctx)
	reap := func() {
		if removed, err := mgr.ReapWarm(rctx, hostAlive); err != nil && rctx.Err() == nil {
			logger.Warn("reap warm sandbox pools", "error", err)
		} else if len(removed) > 0 {
			logger.Info("reaped pooled sandbox containers of stopped workers", "containers", removed)
		}
		removed, err := docker.ReapScope(rctx, cli, scope, isClosed)
		if err != nil && rctx.Err() == nil {
			logger.Warn("reap sandbox containers", "error", err)
		}
		if len(removed) > 0 {
			logger.Info("reaped sandbox containers of closed runs", "containers", removed)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reap()
		t := time.NewTicker(reapEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				reap()
			}
		}
	}()
	return mgr, func() {
		stop()
		<-done
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if err := mgr.StopWarm(sctx); err != nil {
			logger.Warn("remove warm sandbox pools", "error", err)
		}
		cancel()
		mgr.Close()
		cli.Close()
	}
}
