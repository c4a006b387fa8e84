package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/payloads"
)

// The servers under test, by the names the report uses.
const (
	serverOurs     = "ours"
	serverStartDev = "start-dev"
	// serverVariant is a second embedded server with --variant-dc overrides on top of --dc (or
	// stock, --variant-stock), measured interleaved with ours so an A/B comparison sees the same
	// machine load.
	serverVariant = "ours-variant"
)

// Names of the bench's workflows, activity, signals, query and update. They are registered on
// each server's worker; nothing outside the bench uses them.
const (
	workflowOneActivity = "BenchOneActivity"
	workflowActivities  = "BenchActivities"
	workflowSignal      = "BenchSignal"
	workflowMessages    = "BenchMessages"
	activityNoop        = "BenchNoop"
	signalGo            = "go"
	signalStop          = "stop"
	queryCount          = "count"
	updateIncrement     = "increment"
)

// activityOptions are the options of every bench activity: the SDK's defaults otherwise, so
// both servers see the same retry policy.
var activityOptions = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second}

// opTimeout bounds one measured operation. It is generous on purpose: a 20 s history long-poll
// stall is a result to report, not a failure.
const opTimeout = 2 * time.Minute

// noop is the activity: no work, so a workflow's time is the server's and the SDK's.
func noop(_ context.Context, i int) (int, error) { return i, nil }

// oneActivityWorkflow runs one activity and returns its result.
func oneActivityWorkflow(ctx workflow.Context) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	var out int
	err := workflow.ExecuteActivity(ctx, activityNoop, 1).Get(ctx, &out)
	return out, err
}

// activitiesWorkflow runs n activities one after the other and returns how long each step took
// by the server's clock: workflow.Now is the start time of the current workflow task, so a step
// runs from the task that scheduled the activity to the task that saw its result. That is the
// per-activity cost free of the client's start and result round trips.
func activitiesWorkflow(ctx workflow.Context, n int) ([]time.Duration, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	steps := make([]time.Duration, 0, n)
	prev := workflow.Now(ctx)
	for i := range n {
		if err := workflow.ExecuteActivity(ctx, activityNoop, i).Get(ctx, nil); err != nil {
			return nil, err
		}
		now := workflow.Now(ctx)
		steps = append(steps, now.Sub(prev))
		prev = now
	}
	return steps, nil
}

// signalWorkflow waits for signalGo and returns its value.
func signalWorkflow(ctx workflow.Context) (string, error) {
	var v string
	workflow.GetSignalChannel(ctx, signalGo).Receive(ctx, &v)
	return v, nil
}

// messagesWorkflow answers queryCount and updateIncrement until signalStop. The update handler
// returns at once: the round trip is the server's and the SDK's.
func messagesWorkflow(ctx workflow.Context) (int, error) {
	count := 0
	if err := workflow.SetQueryHandler(ctx, queryCount, func() (int, error) { return count, nil }); err != nil {
		return 0, err
	}
	if err := workflow.SetUpdateHandler(ctx, updateIncrement, func(_ workflow.Context, by int) (int, error) {
		count += by
		return count, nil
	}); err != nil {
		return 0, err
	}
	workflow.GetSignalChannel(ctx, signalStop).Receive(ctx, nil)
	return count, nil
}

// workerOptions are the knobs of the bench's workers, the same for both servers.
type workerOptions struct {
	workflowPollers int  // 0: the SDK default
	activityPollers int  // 0: the SDK default
	eagerStart      bool // StartWorkflowOptions.EnableEagerStart
}

// target is one server with the bench's client and worker for it.
type target struct {
	srv   *server
	blobs artifacts.Store
	c     client.Client
	w     worker.Worker
	queue string
	eager bool
	seq   atomic.Int64
}

// newTarget dials srv and starts a worker on a task queue of its own. The client carries
// External Storage over a blob store in dir, as the platform's clients do, so the bench
// measures what the platform pays for its safety net (a size check per payload here: the
// workloads' payloads are small).
func newTarget(srv *server, dir string, opts workerOptions) (*target, error) {
	blobs, err := artifacts.Open(filepath.Join(dir, "blobs-"+srv.name))
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(client.Options{HostPort: srv.addr, Logger: quietSDKLogger(),
		ExternalStorage: payloads.ExternalStorage(blobs, 0)})
	if err != nil {
		blobs.Close()
		return nil, fmt.Errorf("dial %s at %s: %w", srv.name, srv.addr, err)
	}
	t := &target{srv: srv, blobs: blobs, c: c, queue: "bench-" + srv.name, eager: opts.eagerStart}
	t.w = worker.New(c, t.queue, worker.Options{
		MaxConcurrentWorkflowTaskPollers: opts.workflowPollers,
		MaxConcurrentActivityTaskPollers: opts.activityPollers,
	})
	t.w.RegisterWorkflowWithOptions(oneActivityWorkflow, workflow.RegisterOptions{Name: workflowOneActivity})
	t.w.RegisterWorkflowWithOptions(activitiesWorkflow, workflow.RegisterOptions{Name: workflowActivities})
	t.w.RegisterWorkflowWithOptions(signalWorkflow, workflow.RegisterOptions{Name: workflowSignal})
	t.w.RegisterWorkflowWithOptions(messagesWorkflow, workflow.RegisterOptions{Name: workflowMessages})
	t.w.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: activityNoop})
	if err := t.w.Start(); err != nil {
		c.Close()
		blobs.Close()
		return nil, fmt.Errorf("start worker for %s: %w", srv.name, err)
	}
	return t, nil
}

// close stops the worker and the client, then closes the blob store.
func (t *target) close() {
	t.w.Stop()
	t.c.Close()
	_ = t.blobs.Close()
}

// start starts workflow wf with a fresh id on the target's task queue.
func (t *target) start(ctx context.Context, wf string, args ...any) (client.WorkflowRun, error) {
	id := "bench-" + wf + "-" + strconv.FormatInt(t.seq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run, err := t.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:               id,
		TaskQueue:        t.queue,
		EnableEagerStart: t.eager,
	}, wf, args...)
	if err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", wf, t.srv.name, err)
	}
	return run, nil
}

// oneActivity times a one-activity workflow from start to result.
func (t *target) oneActivity(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	t0 := time.Now()
	run, err := t.start(ctx, workflowOneActivity)
	if err != nil {
		return 0, err
	}
	if err := run.Get(ctx, nil); err != nil {
		return 0, fmt.Errorf("result of %s on %s: %w", run.GetID(), t.srv.name, err)
	}
	return time.Since(t0), nil
}

// activities times an n-activity workflow from start to result and returns the server-clock
// time of each step as well.
func (t *target) activities(ctx context.Context, n int) (time.Duration, []time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	t0 := time.Now()
	run, err := t.start(ctx, workflowActivities, n)
	if err != nil {
		return 0, nil, err
	}
	var steps []time.Duration
	if err := run.Get(ctx, &steps); err != nil {
		return 0, nil, fmt.Errorf("result of %s on %s: %w", run.GetID(), t.srv.name, err)
	}
	return time.Since(t0), steps, nil
}

// signalRoundTrip starts a workflow, waits until it blocks on the signal (not timed), then
// times signal → result.
func (t *target) signalRoundTrip(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	run, err := t.start(ctx, workflowSignal)
	if err != nil {
		return 0, err
	}
	if err := t.waitBlocked(ctx, run.GetID()); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := t.c.SignalWorkflow(ctx, run.GetID(), "", signalGo, "go"); err != nil {
		return 0, fmt.Errorf("signal %s on %s: %w", run.GetID(), t.srv.name, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return 0, fmt.Errorf("result of %s on %s: %w", run.GetID(), t.srv.name, err)
	}
	return time.Since(t0), nil
}

// startMessages starts a messagesWorkflow and waits until its first workflow task is done, so
// queries and updates meet a running workflow.
func (t *target) startMessages(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	run, err := t.start(ctx, workflowMessages)
	if err != nil {
		return "", err
	}
	return run.GetID(), t.waitBlocked(ctx, run.GetID())
}

// stopMessages signals a messagesWorkflow to end and waits for it.
func (t *target) stopMessages(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := t.c.SignalWorkflow(ctx, id, "", signalStop, nil); err != nil {
		return fmt.Errorf("stop %s on %s: %w", id, t.srv.name, err)
	}
	if err := t.c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		return fmt.Errorf("result of %s on %s: %w", id, t.srv.name, err)
	}
	return nil
}

// queryRoundTrip times one query of a running messagesWorkflow.
func (t *target) queryRoundTrip(ctx context.Context, id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	t0 := time.Now()
	v, err := t.c.QueryWorkflow(ctx, id, "", queryCount)
	if err != nil {
		return 0, fmt.Errorf("query %s on %s: %w", id, t.srv.name, err)
	}
	var n int
	if err := v.Get(&n); err != nil {
		return 0, fmt.Errorf("decode query result of %s on %s: %w", id, t.srv.name, err)
	}
	return time.Since(t0), nil
}

// updateRoundTrip times one update of a running messagesWorkflow, waiting for its completion.
func (t *target) updateRoundTrip(ctx context.Context, id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	t0 := time.Now()
	h, err := t.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   updateIncrement,
		Args:         []any{1},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return 0, fmt.Errorf("update %s on %s: %w", id, t.srv.name, err)
	}
	var n int
	if err := h.Get(ctx, &n); err != nil {
		return 0, fmt.Errorf("update result of %s on %s: %w", id, t.srv.name, err)
	}
	return time.Since(t0), nil
}

// throughput runs total one-activity workflows with at most inFlight started and unfinished at
// any time, and returns workflows per second and each workflow's start → result time.
func (t *target) throughput(ctx context.Context, total, inFlight int) (float64, []time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, total)
		firstErr error
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	for range inFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(total) {
				d, err := t.oneActivity(ctx)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if firstErr != nil {
		return 0, nil, firstErr
	}
	return float64(total) / elapsed.Seconds(), lat, nil
}

// waitBlocked polls until workflow id's first workflow task has completed and no other is
// pending: the workflow is blocked in its code (on a signal). Polling Describe rather than
// long-polling history keeps this wait free of the history long-poll's stalls.
func (t *target) waitBlocked(ctx context.Context, id string) error {
	for {
		d, err := t.c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return fmt.Errorf("describe %s on %s: %w", id, t.srv.name, err)
		}
		// Started, task scheduled, task started, task completed.
		if d.GetWorkflowExecutionInfo().GetHistoryLength() >= 4 && d.GetPendingWorkflowTask() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s on %s to block: %w", id, t.srv.name, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
