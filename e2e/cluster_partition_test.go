package e2e

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/cluster"
)

// partitionScript answers the partition fault's runs: the first model call is held 4 s (the
// worker is cut off during it), then a file written, two shell side effects, the file read.
func partitionScript(effects string) []fakellm.Reply {
	appendLine := func(tag string) string { return "echo " + tag + " >> " + effects }
	var s []fakellm.Reply
	add := func(prompt string, replies ...fakellm.Reply) {
		for _, r := range replies {
			r.Prompt = prompt
			s = append(s, r)
		}
	}
	for _, tag := range []string{"partition", "healed"} {
		add("fault "+tag,
			fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("p.txt", tag), shellCall(appendLine(tag + "-1"))}, DelayMS: 4000},
			fakellm.Reply{ToolCalls: []fakellm.Call{shellCall(appendLine(tag + "-2")), readCall("p.txt")}},
			fakellm.Reply{Content: tag + " done"})
	}
	return s
}

// requireNetns skips without root or `ip netns`, except in CI (CI=true), where it fails.
func requireNetns(t *testing.T) {
	t.Helper()
	err := cluster.NetnsSupported()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// activityWorkers names, in history order, the worker of every completed attempt of an
// activity of run id whose type contains actType (ActivityTaskStarted holds the identity of
// the attempt that ended).
func activityWorkers(t *testing.T, c *cluster.Cluster, cl client.Client, id, actType string) []string {
	t.Helper()
	types := map[int64]string{}
	var out []string
	it := cl.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[e.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && strings.Contains(types[a.GetScheduledEventId()], actType) {
			out = append(out, c.WorkerOf(a.GetIdentity()))
		}
	}
	return out
}

// clusterPartition: a worker in a network namespace of its own holds a run's model call when
// its link goes down; the server hears nothing from it past the heartbeat timeout, another
// worker takes the call, the run completes with nothing lost and nothing repeated. After Heal
// the same worker, alone, serves a new run from start to end.
func clusterPartition(t *testing.T, ctx context.Context, c *cluster.Cluster, cl client.Client, dir, modelURL string) {
	requireNetns(t)
	u, err := url.Parse(modelURL)
	if err != nil {
		t.Fatal(err)
	}
	modelPort, _ := strconv.Atoi(u.Port())
	hostWorkers := c.Workers()
	iso, err := c.AddIsolatedWorker(ctx, modelPort)
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Stop()
	defer func() { _ = iso.Heal() }()
	// Only the isolated worker runs while the run starts, so the model call is its own.
	alone := func() {
		for _, w := range hostWorkers {
			w.Stop()
		}
	}
	restart := func() {
		for _, w := range hostWorkers {
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restart()
	alone()
	p := clusterPlatform(t, c)
	id := startAgent(t, p, "filer", "fault partition")
	if w := holder(t, c, cl, id, api.ActivityCompleteChat); w != iso {
		t.Fatalf("the model call runs on %s, want the isolated %s", w.Name, iso.Name)
	}
	restart()
	if err := iso.Partition(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	// The run ends while the worker is still cut off: the server gave up on it (heartbeat
	// timeout) and the host workers did the rest.
	agentDone(t, p, c, id, "partition done", map[string]string{"p.txt": "partition"})
	t.Logf("run done %s after the partition", time.Since(cut).Round(time.Second))
	if !iso.Running() {
		t.Fatalf("the partitioned worker exited:\n%s", iso.Output())
	}
	for _, tag := range []string{"partition-1", "partition-2"} {
		if n := effectLines(t, dir, tag); n != 1 {
			t.Errorf("tool %s ran %d times, want 1", tag, n)
		}
	}
	if got := activityWorkers(t, c, cl, id, api.ActivityCompleteChat); len(got) == 0 || got[0] == iso.Name {
		t.Errorf("the cut-off model call completed on %v, want a host worker (not %s)", got, iso.Name)
	}
	if err := iso.Heal(); err != nil {
		t.Fatal(err)
	}
	// Healed and alone again: the same worker serves a whole run, once it answers again. A
	// start's registry check refuses ("could not check") while no worker answers the
	// registry's query, which a worker whose connections are still reconnecting after the
	// heal does not yet: wait for its answer, bounded, as a user retrying would.
	alone()
	pollUntil(t, 90*time.Second, "the healed worker answers the registry's query", func(ctx context.Context) error {
		_, err := cl.QueryWorkflow(ctx, api.RegistryID("nexo"), "", api.QueryRegistry)
		return err
	})
	id2 := startAgent(t, p, "filer", "fault healed")
	agentDone(t, p, c, id2, "healed done", map[string]string{"p.txt": "healed"})
	for _, tag := range []string{"healed-1", "healed-2"} {
		if n := effectLines(t, dir, tag); n != 1 {
			t.Errorf("tool %s ran %d times, want 1", tag, n)
		}
	}
	for _, w := range activityWorkers(t, c, cl, id2, "") {
		if w != iso.Name {
			t.Errorf("after Heal an activity ran on %q, want the healed %s", w, iso.Name)
		}
	}
}
