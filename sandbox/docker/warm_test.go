package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"
)

func TestWarmSizeIsBounded(t *testing.T) {
	m := NewManager(&fakeClient{}, "w1") // a nil field panics: no call may reach the engine
	for _, n := range []int{-1, MaxWarm + 1, 1000} {
		if err := m.Warm(context.Background(), Options{}, n); !errors.Is(err, ErrInvalidWarm) ||
			!strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("Warm(%d) = %v, want ErrInvalidWarm naming %d", n, err, n)
		}
	}
	if err := m.Warm(context.Background(), Options{}, 0); err != nil {
		t.Errorf("Warm(0) = %v, want nil (no pool)", err)
	}
}

func TestWarmKeySeparatesHardening(t *testing.T) {
	key := func(o Options) string {
		s, err := o.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		return warmKey(s)
	}
	base := key(Options{})
	if key(Options{Image: DefaultImage, Memory: DefaultMemory}) != base {
		t.Errorf("the defaults spelled out make another key")
	}
	for name, o := range map[string]Options{
		"image": {Image: "other:1"}, "network": {Network: "bridge"}, "memory": {Memory: "2g"},
		"cap_add": {CapAdd: []string{"NET_BIND_SERVICE"}}, "user": {User: "0"}, "env": {Env: map[string]string{"A": "1"}},
	} {
		if key(o) == base {
			t.Errorf("%s: same key as the defaults; a run would get a container made with other options", name)
		}
	}
}

func TestRunOfContainer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		labels    map[string]string
		names     []string
		run       string
		unclaimed bool
	}{
		{"cold", map[string]string{LabelRun: "r1"}, []string{"/nexo-run-r1"}, "r1", false},
		{"claimed", map[string]string{LabelWarm: "k"}, []string{"/nexo-run-r2"}, "r2", false},
		{"unclaimed", map[string]string{LabelWarm: "k"}, []string{"/nexo-warm-k-1"}, "", true},
		{"orphan", map[string]string{LabelManaged: "true"}, []string{"/nexo-run-r3"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, unclaimed := runOfContainer(tc.labels, tc.names)
			if run != tc.run || unclaimed != tc.unclaimed {
				t.Errorf("runOfContainer = %q, %v; want %q, %v", run, unclaimed, tc.run, tc.unclaimed)
			}
		})
	}
	if warmEligible(strings.Repeat("x", 65)) || warmEligible("a b") || !warmEligible("0193a3c4-7a1e-7c3b-9d2a-5b6c7d8e9f01") {
		t.Errorf("warmEligible: want only ids that are their own container name")
	}
}

// TestReapWarmDecidesByKeeper: ReapScope leaves unclaimed pooled containers to ReapWarm,
// which removes those of a dead process of this host and of hosts that are gone, and
// reaps a claimed one like any run's container.
func TestReapWarmDecidesByKeeper(t *testing.T) {
	m := NewManager(nil, "h1")
	warm := func(id, host, proc string) container.Summary {
		return container.Summary{ID: id, Names: []string{"/nexo-warm-k-" + id},
			Labels: map[string]string{LabelManaged: "true", LabelWarm: "k", LabelWorker: host, LabelWarmProcess: proc}}
	}
	containers := []container.Summary{
		warm("mine", "h1", m.process),
		warm("old-process", "h1", "dead"),
		warm("alive-host", "h2", "p"),
		warm("dead-host", "h3", "p"),
		{ID: "claimed", Names: []string{"/nexo-run-closed"}, Labels: map[string]string{LabelManaged: "true", LabelWarm: "k", LabelWorker: "h1"}},
	}
	var removed []string
	f := &fakeClient{
		list: func(o client.ContainerListOptions) ([]container.Summary, error) { return containers, nil },
		remove: func(id string, _ client.ContainerRemoveOptions) error {
			removed = append(removed, id)
			return nil
		},
		volList:   func(client.VolumeListOptions) ([]volume.Volume, error) { return nil, nil },
		volRemove: func(string, bool) error { return nil },
	}
	m.cli = f
	got, err := m.ReapWarm(context.Background(), func(host string) (bool, error) { return host == "h2", nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"old-process", "dead-host"}; !slices.Equal(removed, want) {
		t.Errorf("ReapWarm removed %q, want %q", removed, want)
	}
	if want := []string{"nexo-warm-k-old-process", "nexo-warm-k-dead-host"}; !slices.Equal(got, want) {
		t.Errorf("ReapWarm reported %q, want %q", got, want)
	}
	removed = nil
	if _, err := ReapScope(context.Background(), f, "", func(run string) (bool, error) { return run == "closed", nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"claimed"}; !slices.Equal(removed, want) {
		t.Errorf("ReapScope removed %q, want only the claimed container of the closed run", removed)
	}
}

// warmContainers lists the containers of the pools worker keeps (claimed ones not).
func warmContainers(t *testing.T, worker string) []string {
	t.Helper()
	res, err := needEngine(t).ContainerList(testCtx(t), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelWarm, LabelWorker+"="+worker)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Items {
		if _, unclaimed := runOfContainer(c.Labels, c.Names); unclaimed {
			out = append(out, c.ID)
		}
	}
	return out
}

// waitReady waits until the pool of opts holds n containers.
func waitReady(t *testing.T, m *Manager, opts Options, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for m.WarmReady(opts) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool holds %d containers after a minute, want %d", m.WarmReady(opts), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWarmPoolHandsEachRunAFreshContainer: with a pool of 2, three runs in a row each get
// a container of their own (the first two from the pool, started before they asked, their
// command server up), hardened as a cold one; a run finds its claimed container again
// (and after a stop), Remove removes it, the pool refills, and StopWarm leaves no pooled
// container behind.
func TestWarmPoolHandsEachRunAFreshContainer(t *testing.T) {
	cli := needEngine(t)
	ctx := testCtx(t)
	worker := "gotest-warm-" + testRunID(t)[len(testRunID(t))-8:]
	m := NewManager(cli, worker)
	opts := Options{Image: testImage}
	t.Cleanup(func() {
		_ = m.StopWarm(context.Background())
		m.Close()
	})
	if err := m.Warm(ctx, opts, 2); err != nil {
		t.Fatal(err)
	}
	waitReady(t, m, opts, 2)
	pooled := warmContainers(t, worker)
	if len(pooled) != 2 {
		t.Fatalf("pooled containers = %d, want 2", len(pooled))
	}

	var ids, runs []string
	for i := 0; i < 3; i++ {
		runID := fmt.Sprintf("%s-%d", testRunID(t), i)
		runs = append(runs, runID)
		t.Cleanup(func() { _ = m.Remove(context.Background(), runID) })
		if i == 2 {
			// Take the third before the pool refilled: it is made cold, and works the same.
			m.mu.Lock()
			p := m.warm[warmKeyOf(t, opts)]
			m.mu.Unlock()
			p.mu.Lock()
			p.want = 0 // no refill while the third run asks
			p.ready = nil
			p.mu.Unlock()
		}
		start := time.Now()
		sb, err := m.Ensure(ctx, runID, opts)
		if err != nil {
			t.Fatal(err)
		}
		out := mustShell(t, sb, "ls -A; id -u; grep CapEff /proc/self/status; echo mine > f.txt")
		t.Logf("run %d: Ensure and first shell call %v", i, time.Since(start))
		if out != "1000\nCapEff:\t0000000000000000\n" {
			t.Errorf("run %d: a fresh workspace and the hardened user, got %q", i, out)
		}
		if sb.Name() != ContainerName(runID) {
			t.Errorf("run %d: container %s, want it named %s", i, sb.Name(), ContainerName(runID))
		}
		if fromPool := slices.Contains(pooled, sb.ID()); fromPool != (i < 2) {
			t.Errorf("run %d: from the pool = %v, want %v", i, fromPool, i < 2)
		}
		ids = append(ids, sb.ID())
		// A later activity (or a restarted worker) finds the claimed container by the run.
		again, err := NewManager(cli, worker).Ensure(ctx, runID, opts)
		if err != nil || again.ID() != sb.ID() {
			t.Fatalf("run %d: Ensure again = %v, %v; want container %s", i, again, err, shortID(sb.ID()))
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Errorf("container ids %q: want three distinct", ids)
	}

	// The pool refills after claims; removing a run removes its claimed container.
	m.mu.Lock()
	p := m.warm[warmKeyOf(t, opts)]
	m.mu.Unlock()
	p.mu.Lock()
	p.want = 2
	p.mu.Unlock()
	p.poke()
	waitReady(t, m, opts, 2)
	// A run that moves (or comes back from a park) gets its workspace back in a pooled
	// container: archived from the old one, which is removed, restored into the new.
	old, err := m.Ensure(ctx, runs[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := old.ArchiveWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var saved bytes.Buffer
	_, err = saved.ReadFrom(archive)
	archive.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, runs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(ctx, ids[0], client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("claimed container after Remove: %v, want it gone", err)
	}
	pooledNow := warmContainers(t, worker)
	moved, err := m.Ensure(ctx, runs[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pooledNow, moved.ID()) {
		t.Errorf("the moved run's container %s: want one of the pool %q", shortID(moved.ID()), pooledNow)
	}
	if err := moved.RestoreWorkspace(ctx, &saved); err != nil {
		t.Fatal(err)
	}
	if got := mustShell(t, moved, "cat f.txt"); got != "mine\n" {
		t.Errorf("the restored workspace in the pooled container: f.txt = %q, want %q", got, "mine\n")
	}

	if err := m.StopWarm(ctx); err != nil {
		t.Fatal(err)
	}
	if left := warmContainers(t, worker); len(left) != 0 {
		t.Errorf("pooled containers after StopWarm: %d, want none", len(left))
	}
	for _, id := range ids[1:] {
		if _, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err != nil {
			t.Errorf("a claimed container after StopWarm: %v; want it kept for its run", err)
		}
	}
}

// TestReapWarmRemovesADeadProcessPool: the pool of a worker process that died (here: a
// Manager never stopped) is removed by the next process with the same host id.
func TestReapWarmRemovesADeadProcessPool(t *testing.T) {
	cli := needEngine(t)
	ctx := testCtx(t)
	worker := "gotest-warm-dead-" + testRunID(t)[len(testRunID(t))-8:]
	dead := NewManager(cli, worker)
	opts := Options{Image: testImage}
	if err := dead.Warm(ctx, opts, 1); err != nil {
		t.Fatal(err)
	}
	waitReady(t, dead, opts, 1)
	t.Cleanup(func() { _ = dead.StopWarm(context.Background()) })

	next := NewManager(cli, worker)
	removed, err := next.ReapWarm(ctx, nil)
	if err != nil || len(removed) != 1 || !strings.HasPrefix(removed[0], warmPrefix) {
		t.Fatalf("ReapWarm = %q, %v; want the dead process's pooled container", removed, err)
	}
	if left := warmContainers(t, worker); len(left) != 0 {
		t.Errorf("pooled containers after the reap: %d, want none", len(left))
	}
}

func warmKeyOf(t *testing.T, o Options) string {
	s, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return warmKey(s)
}
