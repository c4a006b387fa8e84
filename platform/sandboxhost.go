package platform

import (
	"context"
	"fmt"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/connect"
)

// runSandboxHost runs the platform as a sandbox host (SandboxHost) until ctx ends: the
// artifact store (snapshots are read and written there), the Temporal client, the
// sandboxes with their reaper, the host queue and, with a pool, the pool's claim queue.
// Everything is dialled out; nothing listens (metrics.addr aside, when configured).
func (p *Platform) runSandboxHost(ctx context.Context) error {
	cfg := p.cfg
	stdout := p.opts.stdout
	logger := p.logger()

	store, err := artifacts.OpenWith(ctx, cfg.Artifacts.URL, artifacts.Options{CacheBytes: cfg.Artifacts.CacheBytes})
	if err != nil {
		return err
	}
	defer func() { // after the client, which reads and writes offloaded payloads there
		if err := store.Close(); err != nil {
			logger.Error("close artifact store", "error", err)
		}
	}()
	tel, stopTelemetry, err := startTelemetry(ctx, cfg, p.getenv, stdout, logger)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	tc, conn, err := connect.DialSettings(ctx, cfg, store, logger, p.opts.lookupEnv, telemetryOption(tel))
	if err != nil {
		return err
	}
	defer tc.Close()
	cfg.Temporal.Address, cfg.Temporal.Namespace = conn.Address, conn.Namespace

	sandboxes, err := activities.NewSandboxes(cfg.Sandbox.Root)
	if err != nil {
		return err
	}
	scope := deploymentScope(cfg)
	hostID, releaseHost, err := activities.HostID(cfg.Sandbox.Root)
	if err != nil {
		return err
	}
	defer releaseHost()
	if mgr, stopReaper := startDocker(ctx, tc, scope, cfg.Temporal.TaskQueue, hostID, logger); mgr != nil {
		sandboxes.WithDocker(mgr)
		defer stopReaper()
		// A sandbox host keeps the warm pools of the agents its own config lists.
		if err := warmDockerAgents(ctx, mgr, cfg.Agents); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "Docker sandboxes: enabled (reaper every "+reapEvery.String()+")")
	} else {
		fmt.Fprintln(stdout, "Docker sandboxes: unavailable (no Docker engine answered); local sandboxes work")
	}
	stopEgress, err := startBubblewrap(ctx, sandboxes, cfg.Agents, stdout, p.opts.lookupEnv)
	defer stopEgress()
	if err != nil {
		return err
	}

	// No model, agents, MCP or notifications: none of their activities run here.
	deps := activities.Deps{Store: store, Sandboxes: sandboxes, InlineLimit: cfg.Artifacts.InlineLimit,
		ShellTimeout: cfg.Sandbox.ShellTimeout, SkillsPath: cfg.SkillsPath, LookupEnv: p.opts.lookupEnv, ToolHooks: p.opts.toolHooks, Loops: p.opts.loops}
	if cfg.Search.URL != "" { // web_search runs where the run's tools run
		key := ""
		if cfg.Search.APIKeyEnv != "" {
			key = p.getenv(cfg.Search.APIKeyEnv)
		}
		deps.Searcher = activities.NewSearcher(cfg.Search.URL, key)
	}
	acts := activities.New(deps)
	identity := workerIdentity()
	hq := newHostQueue(tc, cfg, identity, hostID, acts, acts.RegisterSandbox)
	if err := hq.start(ctx, tc, sandboxes, logger); err != nil {
		return err
	}
	defer hq.stop()
	pool := p.opts.pool
	if pool != "" {
		pw := newPoolWorker(tc, cfg, identity, pool, acts)
		if err := pw.Start(); err != nil {
			return fmt.Errorf("start worker on the claim queue of pool %s: %w", pool, err)
		}
		defer pw.Stop()
	}
	fmt.Fprintf(stdout, "Sandbox host: %s (host queue %s)%s\n", hq.id, hq.queue, poolNote(cfg, pool))
	serves := "pool " + pool
	if pool == "" {
		serves = "no pool: only the runs whose sandboxes it holds"
	}
	fmt.Fprintf(stdout, "Nexo worker ready: sandbox host %s for task queue %s at %s (%s)\n", hq.id, cfg.Temporal.TaskQueue, cfg.Temporal.Address, serves)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}
