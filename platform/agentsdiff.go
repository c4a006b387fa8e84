package platform

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// peersTimeout bounds the registry query at start; a worker never waits on it longer.
const peersTimeout = 2 * time.Second

// reportPeers prints one line per difference between what this worker offers (its
// announcement a) and what the task queue's other registered workers offer: in a
// rolling deploy, or with a worker started without the config, the fleet disagrees for a
// while, and runs of an agent only some workers have wait for those (AgentRun's
// agent_unavailable). Nothing is printed when they agree or no other worker is known.
func reportPeers(ctx context.Context, tc client.Client, taskQueue string, a api.WorkerAnnouncement, out io.Writer) error {
	qctx, cancel := context.WithTimeout(ctx, peersTimeout)
	defer cancel()
	v, err := tc.QueryWorkflow(qctx, api.RegistryID(taskQueue), "", api.QueryRegistry)
	if err != nil {
		return fmt.Errorf("query the registry of task queue %s: %w", taskQueue, err)
	}
	var view api.RegistryView
	if err := v.Get(&view); err != nil {
		return fmt.Errorf("decode the registry of task queue %s: %w", taskQueue, err)
	}
	view = runs.LiveWorkers(qctx, tc, taskQueue, view)
	for _, line := range peerDifferences(view, a, taskQueue) {
		fmt.Fprintln(out, line)
	}
	return nil
}

// peerDifferences are the lines reportPeers prints.
func peerDifferences(view api.RegistryView, a api.WorkerAnnouncement, taskQueue string) []string {
	var agents, types []string
	others := 0
	for _, w := range view.Workers {
		if w.Identity == a.Identity {
			continue
		}
		others++
		agents = append(agents, w.Agents...)
		types = append(types, w.Workflows...)
	}
	if others == 0 {
		return nil
	}
	var lines []string
	theirs, mine := set(agents), set(a.Agents)
	if !slices.Equal(theirs, mine) {
		lines = append(lines, fmt.Sprintf("other workers on task queue %s offer agents %s; this one offers %s (runs of an agent this worker lacks go to a worker that has it)",
			taskQueue, list(theirs), list(mine)))
	}
	// An agent whose pool differs between workers: its runs claim on the pool the worker
	// that resolved the agent names, so they land on different machines.
	for _, name := range set(a.Agents) {
		pools := map[string]bool{}
		for _, w := range view.Workers {
			if w.Identity != a.Identity && slices.Contains(w.Agents, name) && w.Pools[name] != a.Pools[name] {
				pools[poolLabel(w.Pools[name])] = true
			}
		}
		if len(pools) > 0 {
			theirs := make([]string, 0, len(pools))
			for p := range pools {
				theirs = append(theirs, p)
			}
			lines = append(lines, fmt.Sprintf("other workers on task queue %s run agent %s's tools on %s; this one on %s (each run claims a host where the worker that resolved its agent says)",
				taskQueue, name, list(set(theirs)), poolLabel(a.Pools[name])))
		}
	}
	theirs, mine = set(types), set(a.Workflows)
	if missing, extra := minus(theirs, mine), minus(mine, theirs); len(missing)+len(extra) > 0 {
		lines = append(lines, fmt.Sprintf("other workers on task queue %s offer workflow types this one lacks: %s; this one adds: %s",
			taskQueue, list(missing), list(extra)))
	}
	if line := storeDifference(view, a, taskQueue); line != "" {
		lines = append(lines, line)
	}
	return lines
}

// storeDifference is the line a worker (its announcement a) prints at start when other
// live workers of the task queue name another artifact store, or the same file:// path on
// another machine: a run that moves between them cannot find what the other stored (its
// workspace snapshots, records, thread segments). "" when they agree, or when no other
// worker announced a store.
func storeDifference(view api.RegistryView, a api.WorkerAnnouncement, taskQueue string) string {
	if a.Store == nil {
		return ""
	}
	var theirs []string
	for _, w := range view.Workers {
		if w.Identity != a.Identity && w.Store != nil && !w.Store.SameAs(*a.Store) {
			theirs = append(theirs, w.Store.Label())
		}
	}
	if len(theirs) == 0 {
		return ""
	}
	return fmt.Sprintf("other workers on task queue %s use artifact store %s; this one uses %s "+
		"(runs that move between these hosts cannot restore their workspaces: give every worker the same artifacts.url, a shared directory or a bucket)",
		taskQueue, list(set(theirs)), a.Store.Label())
}

func set(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// poolLabel names an agent's pool in a message ("any host" for none).
func poolLabel(pool string) string {
	if pool == "" {
		return "any host"
	}
	return "pool " + pool
}
