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

// departTimeout bounds the goodbye at a graceful stop (the signal, then a query that
// returns once the registry applied it): a worker that cannot reach Temporal stops anyway
// and is dropped at its TTL instead.
const departTimeout = 3 * time.Second

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

// depart tells the registry of taskQueue that the worker identity stops, then asks the
// registry once, so the goodbye is applied while this worker still polls (a query waits
// for the workflow task the signal made): the last worker of a task queue to stop leaves
// a registry that lists none, not one that lists it until its TTL.
func depart(ctx context.Context, tc client.Client, taskQueue, identity string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), departTimeout)
	defer cancel()
	err := tc.SignalWorkflow(dctx, api.RegistryID(taskQueue), "", api.SignalDeregister,
		api.WorkerDeparture{Identity: identity, At: time.Now().UTC()})
	if err == nil {
		_, err = tc.QueryWorkflow(dctx, api.RegistryID(taskQueue), "", api.QueryRegistry)
	}
	if err != nil {
		return fmt.Errorf("tell the registry of task queue %s that worker %s stops: %w", taskQueue, identity, err)
	}
	return nil
}

// startAnnouncing announces the worker now, then every a.TTL()/RegistryAnnouncements
// until the returned stop is called, which says goodbye to the registry (depart). The
// first announcement is made before it returns, so a starter run right after "worker
// ready" finds the worker's types (unless Temporal did not take it: then it is retried at
// the next tick, and starts are unchecked meanwhile).
func startAnnouncing(ctx context.Context, tc client.Client, taskQueue string, a api.WorkerAnnouncement, logger *slog.Logger) (stop func()) {
	actx, cancel := context.WithCancel(ctx)
	every := a.TTL() / api.RegistryAnnouncements
	if err := announce(actx, tc, taskQueue, a); err != nil {
		logger.Warn("announce the worker", "error", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
			if err := announce(actx, tc, taskQueue, a); err != nil && actx.Err() == nil {
				logger.Warn("announce the worker", "error", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if err := depart(ctx, tc, taskQueue, a.Identity); err != nil {
			logger.Warn("say goodbye to the registry", "error", err)
		}
	}
}
