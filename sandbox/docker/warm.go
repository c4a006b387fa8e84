package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Warm pools: containers created and started before any run asks, so a run's first tool
// call finds its container running (and its command server up) instead of paying
// Docker's create and start.
//
// A pooled container is made exactly as a run's container would be (same options, same
// hardening), labelled LabelManaged, LabelWorker, LabelScope, LabelWorkdir, LabelUser,
// LabelWarm (the pool's key) and LabelWarmProcess, and named "nexo-warm-…". Docker cannot
// change a container's labels, so a run claims one by renaming it to ContainerName(run):
// from then on the name is what ties it to the run (Ensure, Remove and the reapers read the
// run id back from the name of a container labelled LabelWarm). Only runs whose id is its
// own container name (ContainerName adds no hash: letters, digits, '_', '.', '-', at most 64
// characters, as UUIDs are) claim pooled containers; others get a cold one. A claimed
// container is the run's like any other: it is removed with the run and never goes back.
const (
	// LabelWarm holds the key of the warm pool a container was made for (a hash of its
	// options); only pooled containers carry it.
	LabelWarm = "nexo.warm"
	// LabelWarmProcess holds the id of the worker process that keeps the pool: a host id
	// is held by one live process at a time, so the host's reaper removes unclaimed
	// pooled containers of its own host id that another (dead) process made.
	LabelWarmProcess = "nexo.warm.process"

	// MaxWarm bounds a pool's size: each pooled container holds its memory reservation
	// and processes while it waits.
	MaxWarm = 64

	warmPrefix = "nexo-warm-"
	runPrefix  = "nexo-run-"
)

// refillDelay is how long after a claim the pool starts making the replacement, so the
// engine is not creating a container while the claiming run's first call runs.
const refillDelay = time.Second

// ErrInvalidWarm: a warm pool size outside 0..MaxWarm.
var ErrInvalidWarm = fmt.Errorf("warm pool size must be between 0 and %d", MaxWarm)

// warmPool keeps want started containers of one key.
type warmPool struct {
	key  string
	set  settings // as the containers were made (the image's user resolved)
	want int

	mu      sync.Mutex
	ready   []string // ids of started containers no run has claimed
	lastErr error    // the last refill failure, for the worker's log
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// warmKey is the pool key of a run's settings: the container and host config a run's
// container gets, without labels, so two specs that make the same container share a pool.
func warmKey(set settings) string {
	b, _ := json.Marshal(struct {
		C *container.Config
		H *container.HostConfig
	}{set.containerConfig(nil), set.hostConfig(nil)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// warmEligible reports whether runID can claim a pooled container: its container name
// must spell it as is, so the id can be read back from the name.
func warmEligible(runID string) bool {
	return ContainerName(runID) == runPrefix+runID
}

// runOfContainer returns the run a container belongs to: its LabelRun, or for a claimed
// pooled container the id in its name. "" for an unclaimed pooled container (warm true)
// and for a container of no run (an orphan).
func runOfContainer(labels map[string]string, names []string) (runID string, warm bool) {
	if r := labels[LabelRun]; r != "" {
		return r, false
	}
	if labels[LabelWarm] == "" {
		return "", false
	}
	for _, n := range names {
		if r, ok := strings.CutPrefix(strings.TrimPrefix(n, "/"), runPrefix); ok {
			return r, false
		}
	}
	return "", true
}

// Warm keeps n containers made with opts started on this host, ready for Ensure to hand
// to new runs (n = 0 keeps none). Options that make the same container share one pool;
// asking again for a key keeps the larger size. The pool fills in the background, one
// container at a time, and refills after each claim; StopWarm removes what no run
// claimed. It fails at once for n outside 0..MaxWarm, invalid options, or a missing image.
func (m *Manager) Warm(ctx context.Context, opts Options, n int) error {
	if n < 0 || n > MaxWarm {
		return fmt.Errorf("%w: %d", ErrInvalidWarm, n)
	}
	if n == 0 {
		return nil
	}
	set, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if err := m.Check(ctx, opts); err != nil {
		return err
	}
	key := warmKey(set)
	img, err := m.cli.ImageInspect(ctx, set.image)
	if err != nil {
		return fmt.Errorf("warm pool: inspect image %s: %w", set.image, err)
	}
	if set.user == "" && img.Config != nil {
		set.user = img.Config.User
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.warm[key]; p != nil {
		p.mu.Lock()
		p.want = max(p.want, n)
		p.mu.Unlock()
		p.poke()
		return nil
	}
	p := &warmPool{key: key, set: set, want: n, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	m.warm[key] = p
	go m.fill(p)
	p.poke()
	return nil
}

func (p *warmPool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// WarmReady returns how many unclaimed started containers the pool of opts holds (0 when
// there is no such pool).
func (m *Manager) WarmReady(opts Options) int {
	set, err := opts.withDefaults()
	if err != nil {
		return 0
	}
	m.mu.Lock()
	p := m.warm[warmKey(set)]
	m.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// warmReady reports whether runID may claim a pooled container of set's key and one is
// ready now.
func (m *Manager) warmReady(runID string, set settings) bool {
	if !warmEligible(runID) {
		return false
	}
	m.mu.Lock()
	p := m.warm[warmKey(set)]
	m.mu.Unlock()
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready) > 0
}

// fill makes containers until the pool holds want, then waits for a claim or the stop.
// A failure is retried after a backoff (1 s doubling to 30 s): the engine or the image
// may come back.
func (m *Manager) fill(p *warmPool) {
	defer close(p.done)
	backoff := time.Second
	for {
		p.mu.Lock()
		short := len(p.ready) < p.want
		p.mu.Unlock()
		if !short {
			select {
			case <-p.stop:
				return
			case <-p.kick:
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		go func() {
			select {
			case <-p.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		id, err := m.makeWarm(ctx, p)
		cancel()
		select {
		case <-p.stop:
			if id != "" {
				m.dropPool(id)
				_ = removeContainer(context.Background(), m.cli, id)
			}
			return
		default:
		}
		p.mu.Lock()
		p.lastErr = err
		if err == nil {
			p.ready = append(p.ready, id)
		}
		p.mu.Unlock()
		if err == nil {
			backoff = time.Second
			continue
		}
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// makeWarm creates and starts one pooled container and starts its command server, so the
// run that claims it runs its first command without starting a process first.
func (m *Manager) makeWarm(ctx context.Context, p *warmPool) (string, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := warmPrefix + p.key[:12] + "-" + hex.EncodeToString(rnd[:])
	labels := map[string]string{
		LabelManaged:     "true",
		LabelWorker:      m.worker,
		LabelWorkdir:     p.set.workdir,
		LabelUser:        p.set.user,
		LabelWarm:        p.key,
		LabelWarmProcess: m.process,
	}
	if m.scope != "" {
		labels[LabelScope] = m.scope
	}
	created, err := m.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: p.set.containerConfig(labels), HostConfig: p.set.hostConfig(labels), Name: name})
	if err != nil {
		return "", fmt.Errorf("warm pool: create container %s: %w", name, err)
	}
	if _, err := m.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		rmErr := removeContainer(context.WithoutCancel(ctx), m.cli, created.ID)
		return "", fmt.Errorf("warm pool: start container %s: %w", name, errors.Join(err, rmErr))
	}
	sb := m.newSandbox(created.ID, name, "", p.set)
	if err := sb.checkWorkdir(ctx); err != nil {
		m.dropPool(created.ID)
		rmErr := removeContainer(context.WithoutCancel(ctx), m.cli, created.ID)
		return "", fmt.Errorf("warm pool: container %s: %w", name, errors.Join(err, rmErr))
	}
	// An image that cannot run the command server answers (nil, nil): its runs exec.
	// Two servers: the run's first command takes one, and the other is the spare that
	// runOnServer would otherwise start (an exec, tens of milliseconds of the engine's
	// time) while that first command and the snapshot after it run.
	if srv, err := sb.pool.get(ctx); err == nil && srv != nil {
		spare, err := sb.pool.get(ctx)
		sb.pool.put(srv)
		if err == nil && spare != nil {
			sb.pool.put(spare)
		}
	}
	return created.ID, nil
}

// claimWarm hands runID a pooled container of set's key, renamed to the run's container
// name, or returns nil when there is none to take (the caller creates one). A rename
// conflict means another attempt made the run's container meanwhile: the pooled one goes
// back to the pool and the winner is reused.
func (m *Manager) claimWarm(ctx context.Context, runID string, set settings) (*Sandbox, error) {
	if !warmEligible(runID) {
		return nil, nil
	}
	m.mu.Lock()
	p := m.warm[warmKey(set)]
	m.mu.Unlock()
	if p == nil {
		return nil, nil
	}
	name := ContainerName(runID)
	for {
		p.mu.Lock()
		if len(p.ready) == 0 {
			p.mu.Unlock()
			p.poke()
			return nil, nil
		}
		id := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		_, err := m.cli.ContainerRename(ctx, id, client.ContainerRenameOptions{NewName: name})
		switch {
		case err == nil:
			// The replacement is made a little later: creating a container loads the
			// engine, and the run's first command is running in the claimed one now.
			time.AfterFunc(refillDelay, p.poke)
			return m.newSandbox(id, name, runID, p.set), nil
		case cerrdefs.IsConflict(err):
			p.mu.Lock()
			p.ready = append(p.ready, id)
			p.mu.Unlock()
			return m.awaitWinner(ctx, runID, set, name)
		case cerrdefs.IsNotFound(err):
			// Removed under the pool (an operator, another host's reaper): take the next.
			m.dropPool(id)
			p.poke()
			continue
		default:
			p.mu.Lock()
			p.ready = append(p.ready, id)
			p.mu.Unlock()
			return nil, fmt.Errorf("claim a warm container for run %s: rename %s: %w", runID, shortID(id), err)
		}
	}
}

// StopWarm stops refilling every pool and removes the containers no run claimed, so a
// worker that stops leaves no pooled container behind. Claimed containers stay with their
// runs.
func (m *Manager) StopWarm(ctx context.Context) error {
	m.mu.Lock()
	pools := m.warm
	m.warm = map[string]*warmPool{}
	m.mu.Unlock()
	var errs []error
	for _, p := range pools {
		close(p.stop)
		<-p.done
		p.mu.Lock()
		ready := p.ready
		p.ready = nil
		p.mu.Unlock()
		for _, id := range ready {
			m.dropPool(id)
			if err := removeContainer(ctx, m.cli, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop warm pools: %w", err)
	}
	return nil
}

// ReapWarm removes unclaimed pooled containers whose keeper is gone, and returns their
// names: those of this Manager's host id made by another process (a host id is held by one
// live process at a time, so that process died), and those of other hosts for which
// hostAlive answers false (nil hostAlive: other hosts' are left alone). Call it beside
// ReapScope; ReapScope leaves unclaimed pooled containers to it.
func (m *Manager) ReapWarm(ctx context.Context, hostAlive func(hostID string) (bool, error)) ([]string, error) {
	f := make(client.Filters).Add("label", LabelManaged+"=true", LabelWarm)
	if m.scope != "" {
		f.Add("label", LabelScope+"="+m.scope)
	}
	res, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("reap warm pools: list containers: %w", err)
	}
	var removed []string
	var errs []error
	alive := map[string]bool{}
	for _, c := range res.Items {
		if _, unclaimed := runOfContainer(c.Labels, c.Names); !unclaimed {
			continue
		}
		host := c.Labels[LabelWorker]
		gone := false
		switch {
		case host == m.worker:
			gone = c.Labels[LabelWarmProcess] != m.process
		case hostAlive != nil:
			up, ok := alive[host]
			if !ok {
				var err error
				if up, err = hostAlive(host); err != nil {
					errs = append(errs, fmt.Errorf("is host %s alive: %w", host, err))
					continue
				}
				alive[host] = up
			}
			gone = !up
		}
		if !gone {
			continue
		}
		name := shortID(c.ID)
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if err := removeContainer(ctx, m.cli, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("reap warm pools: %w", err)
	}
	return removed, nil
}
