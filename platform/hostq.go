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
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
)

// hostQueue is this worker's per-host task queue (workflows/hostq.go): a second
// worker.Worker polls it with the sandbox activities, and a reaper removes what this
// host holds of runs that closed or moved to another host.
type hostQueue struct {
	id, queue string
	w         worker.Worker
	stopReap  func()
}

// newHostQueue makes this worker's host identity (kept under sandbox.root, so a restart
// on the same machine serves the same queue) and its host-queue worker, with the
// activities register puts on it; acts learn the queue so ClaimSandboxHost can answer
// with it.
func newHostQueue(tc client.Client, cfg config.Config, identity, id string, acts *activities.Activities, register func(activities.Registry)) *hostQueue {
	queue := api.HostQueueName(cfg.Temporal.TaskQueue, id)
	acts.Host.SetHost(api.SandboxHost{Queue: queue, Host: id, ParkEvery: api.Duration(cfg.Sandbox.ParkEvery),
		HostTimeout: api.Duration(cfg.Sandbox.HostTimeout)})
	hw := worker.New(tc, queue, worker.Options{
		Identity:                     identity + "@host-" + id,
		DisableWorkflowWorker:        true,
		WorkerStopTimeout:            10 * time.Second,
		MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
		Interceptors:                 keepAlive(), // every attempt heartbeats while it runs
	})
	register(hw)
	return &hostQueue{id: id, queue: queue, w: hw, stopReap: func() {}}
}

// start polls the host queue and starts the reaper (at once, then every reapEvery).
func (h *hostQueue) start(ctx context.Context, tc client.Client, sandboxes *activities.Sandboxes, logger *slog.Logger) error {
	if err := h.w.Start(); err != nil {
		return fmt.Errorf("start worker on host queue %s: %w", h.queue, err)
	}
	keep := func(runID string) (bool, error) { return runStaysHere(ctx, tc, runID, h.queue) }
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(reapEvery)
		defer t.Stop()
		for {
			if removed := sandboxes.ReapMoved(rctx, keep, logger); len(removed) > 0 {
				logger.Info("reaped sandboxes of runs that closed or moved to another host", "runs", removed)
			}
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	h.stopReap = func() { stop(); <-done }
	return nil
}

// stop ends the reaper and the host-queue worker.
func (h *hostQueue) stop() {
	h.stopReap()
	h.w.Stop()
}

// runStaysHere reports whether this host still serves runID's sandbox: the run is open
// and its memo names no other host queue (runs recorded before host queues name none).
func runStaysHere(ctx context.Context, tc client.Client, runID, queue string) (bool, error) {
	desc, err := tc.DescribeWorkflowExecution(ctx, runID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, nil
	}
	p, ok := info.GetMemo().GetFields()[api.MemoSandboxHost]
	if !ok {
		return true, nil
	}
	var at string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &at); err != nil {
		return false, fmt.Errorf("run %s: memo %s: %w", runID, api.MemoSandboxHost, err)
	}
	return at == "" || at == queue, nil
}

// newPoolWorker polls the claim queue of pool (api.PoolQueueName) with ClaimSandboxHost
// alone: a run whose agent names the pool claims this worker's host there. Only claims
// go to it; the run's sandbox activities then come to the host queue, like any run's.
func newPoolWorker(tc client.Client, cfg config.Config, identity, pool string, acts *activities.Activities) worker.Worker {
	pw := worker.New(tc, api.PoolQueueName(cfg.Temporal.TaskQueue, pool), worker.Options{
		Identity:                     identity + api.PoolQueueSep + pool,
		DisableWorkflowWorker:        true,
		WorkerStopTimeout:            10 * time.Second,
		MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
		Interceptors:                 keepAlive(), // every attempt heartbeats while it runs
	})
	acts.Host.RegisterClaim(pw)
	return pw
}
