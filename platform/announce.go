package platform

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/workflows/registry"
)

// workerIdentity is the identity the worker polls with and announces itself under: the
// SDK's default form (pid@host@), set explicitly so the two cannot differ.
func workerIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s@", os.Getpid(), host)
}

// announceTimeout bounds one announcement; a worker never waits on the registry longer.
const announceTimeout = 5 * time.Second

// announceRetry is how soon a failed announcement is tried again (instead of in an hour).
const announceRetry = time.Minute

// announce sends the worker's announcement to the registry of taskQueue, creating the
// registry with the first one (signal-with-start).
func announce(ctx context.Context, tc client.Client, taskQueue string, a api.WorkerAnnouncement) error {
	a.At = time.Now().UTC()
	actx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	_, err := tc.SignalWithStartWorkflow(actx, api.RegistryID(taskQueue), api.SignalRegister, a,
		client.StartWorkflowOptions{ID: api.RegistryID(taskQueue), TaskQueue: taskQueue},
		api.WorkflowRegistry, registry.State{})
	if err != nil {
		return fmt.Errorf("announce worker %s to the registry of task queue %s: %w", a.Identity, taskQueue, err)
	}
	return nil
}

// startAnnouncing announces the worker now, then every api.RegistryAnnounceEvery until
// the returned stop is called. The first announcement is made before it returns, so a
// starter run right after "worker ready" finds the worker's types (unless Temporal did
// not take it: then it is retried, and starts are unchecked meanwhile).
func startAnnouncing(ctx context.Context, tc client.Client, taskQueue string, a api.WorkerAnnouncement, logger *slog.Logger) (stop func()) {
	actx, cancel := context.WithCancel(ctx)
	next := api.RegistryAnnounceEvery
	if err := announce(actx, tc, taskQueue, a); err != nil {
		logger.Warn("announce the worker", "error", err)
		next = announceRetry
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(next)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
			next = api.RegistryAnnounceEvery
			if err := announce(actx, tc, taskQueue, a); err != nil && actx.Err() == nil {
				logger.Warn("announce the worker", "error", err)
				next = announceRetry
			}
			t.Reset(next)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
