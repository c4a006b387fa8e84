package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Manager creates, finds and removes the containers of runs on one Docker host, on behalf
// of one worker. Any number of Managers (workers) may share a host: the containers and
// their labels are the only state that matters. A Manager also keeps, per container, the
// command servers its handles run shell commands on (see server.go); Close ends them.
// Safe for concurrent use.
type Manager struct {
	cli    Client
	worker string
	scope  string

	// process tells this Manager's pooled containers from those of an earlier process
	// with the same worker (host) id (see LabelWarmProcess).
	process string

	mu    sync.Mutex
	pools map[string]*shellPool // by container id
	warm  map[string]*warmPool  // by key (warmKey)
}

// NewManager returns a Manager that labels the containers it creates with workerID.
func NewManager(cli Client, workerID string) *Manager {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return &Manager{cli: cli, worker: workerID, process: hex.EncodeToString(rnd[:]),
		pools: map[string]*shellPool{}, warm: map[string]*warmPool{}}
}

// SetScope sets the scope label of the containers this Manager creates (see LabelScope).
func (m *Manager) SetScope(scope string) { m.scope = scope }

// Close ends the command servers of every container (the containers stay). Call it when
// the worker stops; a Manager can be used again afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	pools := m.pools
	m.pools = map[string]*shellPool{}
	m.mu.Unlock()
	for _, p := range pools {
		p.close()
	}
}

// pool returns the command-server pool of a container.
func (m *Manager) pool(id, workdir string) *shellPool {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pools[id]
	if !ok {
		// A new container: forget the pools of containers that went meanwhile (removed
		// by another worker or the reaper), so a long-lived worker does not accumulate them.
		for other, op := range m.pools {
			if op.unused() {
				delete(m.pools, other)
			}
		}
		p = &shellPool{cli: m.cli, containerID: id, workdir: workdir}
		m.pools[id] = p
	}
	return p
}

// dropPool ends the command servers of a container that is being removed.
func (m *Manager) dropPool(id string) {
	m.mu.Lock()
	p := m.pools[id]
	delete(m.pools, id)
	m.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// newSandbox returns a handle to the container id.
func (m *Manager) newSandbox(id, name, runID string, set settings) *Sandbox {
	return &Sandbox{m: m, cli: m.cli, id: id, name: name, runID: runID, set: set,
		pool: m.pool(id, set.workdir), groups: map[int]struct{}{}}
}

// ContainerName is the name of runID's container: "nexo-run-" and the run id, or, when the
// id has characters Docker refuses in a name (or is long), a readable prefix and a hash.
// Names only make a create race collide; the LabelRun label is what Ensure looks up.
func ContainerName(runID string) string {
	const maxID = 64
	if safeName.MatchString(runID) && len(runID) <= maxID {
		return "nexo-run-" + runID
	}
	sum := sha256.Sum256([]byte(runID))
	prefix := unsafeChars.ReplaceAllString(runID, "_")
	if len(prefix) > 32 {
		prefix = prefix[:32]
	}
	return "nexo-run-" + prefix + "-" + hex.EncodeToString(sum[:8])
}

var (
	safeName    = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)
)

// Ensure returns a handle to runID's container, creating and starting it if there is none
// and starting it if it is stopped. It is idempotent: a retried activity, or two racing
// ones, end up with the same container (a name conflict is resolved by inspecting the
// winner and reusing it). An existing container is reused as it is; opts only shape a new
// one. A missing image fails with an *ImageNotFoundError (errors.Is ErrImageNotFound).
func (m *Manager) Ensure(ctx context.Context, runID string, opts Options) (*Sandbox, error) {
	if runID == "" {
		return nil, errors.New("ensure sandbox: run id is empty")
	}
	set, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, err)
	}
	// A pooled container is claimed by renaming it to the run's container name, which
	// conflicts when the run has its container already (an earlier attempt): claimWarm
	// then reuses that one. So with a pooled container ready the claim comes first, and a
	// run's first call spends one engine call (the rename), not two (a list, then it).
	if m.warmReady(runID, set) {
		if sb, err := m.claimWarm(ctx, runID, set); sb != nil || err != nil {
			return sb, err
		}
	}
	found, err := m.find(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, err)
	}
	if found != nil {
		return m.reuse(ctx, runID, set, found.ID, string(found.State), found.Labels)
	}
	if sb, err := m.claimWarm(ctx, runID, set); sb != nil || err != nil {
		return sb, err
	}
	return m.create(ctx, runID, set)
}

// Check says whether a run with opts could get a container on this host, without making
// one: the options are valid, the image is there (else an *ImageNotFoundError) and, when
// the engine runs on this machine (a unix socket), every bind's host path exists (else a
// *BindSourceError). A worker calls it at start for each agent with a docker sandbox, so
// a run does not find out after its first (paid) model call. Ensure checks the same when
// it creates a container, on any engine.
func (m *Manager) Check(ctx context.Context, opts Options) error {
	set, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if _, err := m.cli.ImageInspect(ctx, set.image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return &ImageNotFoundError{Image: set.image}
		}
		return fmt.Errorf("inspect image %s: %w", set.image, err)
	}
	if set.runtime != "" {
		info, err := m.cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			return fmt.Errorf("ask the Docker engine for its runtimes: %w", err)
		}
		if _, ok := info.Info.Runtimes[set.runtime]; !ok {
			have := slices.Sorted(maps.Keys(info.Info.Runtimes))
			return fmt.Errorf("%w: runtime: the Docker engine has no runtime %q (it has %s): register it in the engine's daemon.json (\"runtimes\") or leave runtime out",
				ErrInvalidOptions, set.runtime, strings.Join(have, ", "))
		}
	}
	if h, ok := m.cli.(interface{ DaemonHost() string }); ok && strings.HasPrefix(h.DaemonHost(), "unix://") {
		for _, b := range set.binds {
			if _, err := os.Stat(b.source); errors.Is(err, fs.ErrNotExist) {
				return &BindSourceError{Field: b.field, Bind: b.spec, Host: b.source}
			}
		}
	}
	return nil
}

// Remove removes runID's container and its workspace volume, if any. Removing a run
// that has no container is not an error.
func (m *Manager) Remove(ctx context.Context, runID string) error {
	list, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: runFilter(runID)})
	if err != nil {
		return fmt.Errorf("remove sandbox of run %s: list containers: %w", runID, err)
	}
	var errs []error
	if c, err := m.claimed(ctx, runID); err != nil {
		errs = append(errs, err)
	} else if c != nil {
		list.Items = append(list.Items, *c)
	}
	for _, c := range list.Items {
		m.dropPool(c.ID)
		if err := removeContainer(ctx, m.cli, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove sandbox of run %s: %w", runID, err)
	}
	return nil
}

// find returns the run's container, or nil when it has none.
func (m *Manager) find(ctx context.Context, runID string) (*container.Summary, error) {
	res, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: runFilter(runID)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	list := res.Items
	switch len(list) {
	case 0:
		// A pooled container the run claimed has no run label (see warm.go); Ensure
		// finds it through the name conflict of its claim or create, Remove by name.
		return nil, nil
	case 1:
		return &list[0], nil
	}
	// Only a hand-made container can be a second one (the name is unique); prefer ours.
	name := "/" + ContainerName(runID)
	for i := range list {
		for _, n := range list[i].Names {
			if n == name {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("%d containers are labelled %s=%s and none is named %s",
		len(list), LabelRun, runID, name[1:])
}

// claimed returns the pooled container runID claimed (named after the run, labelled
// LabelWarm and no LabelRun), or nil when it has none.
func (m *Manager) claimed(ctx context.Context, runID string) (*container.Summary, error) {
	if !warmEligible(runID) {
		return nil, nil
	}
	res, err := m.cli.ContainerInspect(ctx, ContainerName(runID), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", ContainerName(runID), err)
	}
	info := res.Container
	if info.Config == nil || info.Config.Labels[LabelManaged] != "true" || info.Config.Labels[LabelWarm] == "" ||
		info.Config.Labels[LabelRun] != "" {
		return nil, nil
	}
	c := &container.Summary{ID: info.ID, Names: []string{info.Name}, Labels: info.Config.Labels}
	if info.State != nil {
		c.State = info.State.Status
	}
	return c, nil
}

func runFilter(runID string) client.Filters {
	return make(client.Filters).Add("label", LabelManaged+"=true", LabelRun+"="+runID)
}

// create makes and starts a new container for the run. A name conflict means another
// attempt got there first: its container is reused.
func (m *Manager) create(ctx context.Context, runID string, set settings) (*Sandbox, error) {
	img, err := m.cli.ImageInspect(ctx, set.image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, &ImageNotFoundError{Image: set.image})
		}
		return nil, fmt.Errorf("ensure sandbox for run %s: inspect image %s: %w", runID, set.image, err)
	}
	if set.user == "" && img.Config != nil {
		set.user = img.Config.User
	}
	labels := map[string]string{
		LabelManaged: "true",
		LabelRun:     runID,
		LabelWorker:  m.worker,
		LabelWorkdir: set.workdir,
		LabelUser:    set.user,
	}
	if m.scope != "" {
		labels[LabelScope] = m.scope
	}
	name := ContainerName(runID)
	created, err := m.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: set.containerConfig(labels), HostConfig: set.hostConfig(labels), Name: name})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return m.awaitWinner(ctx, runID, set, name)
		}
		if cerrdefs.IsNotFound(err) && strings.Contains(err.Error(), "image") {
			return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, &ImageNotFoundError{Image: set.image})
		}
		if be := set.missingBind(err); be != nil {
			return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, be)
		}
		return nil, fmt.Errorf("ensure sandbox for run %s: create container %s: %w", runID, name, err)
	}
	if _, err := m.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		// A container that never ran holds nothing; leaving it would make every retry
		// reuse (and fail to start) it. A named network that does not exist ends here.
		rmErr := removeContainer(context.WithoutCancel(ctx), m.cli, created.ID)
		return nil, fmt.Errorf("ensure sandbox for run %s: start container %s: %w", runID, name, errors.Join(err, rmErr))
	}
	sb := m.newSandbox(created.ID, name, runID, set)
	if err := sb.checkWorkdir(ctx); err != nil {
		return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, err)
	}
	return sb, nil
}

// awaitWinner resolves a create conflict: another attempt holds the name. Docker reserves
// a name before the container can be inspected, so the winner is looked for until it
// shows (briefly); it must belong to the run.
func (m *Manager) awaitWinner(ctx context.Context, runID string, set settings, name string) (*Sandbox, error) {
	wait := 10 * time.Millisecond
	deadline := time.Now().Add(conflictWait)
	for {
		res, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		info := res.Container
		switch {
		case err == nil:
			if info.Config == nil || info.Config.Labels[LabelManaged] != "true" {
				return nil, fmt.Errorf("ensure sandbox for run %s: the name %s is taken by a container that is not this run's", runID, name)
			}
			if owner, _ := runOfContainer(info.Config.Labels, []string{info.Name}); owner != runID {
				return nil, fmt.Errorf("ensure sandbox for run %s: the name %s is taken by a container that is not this run's", runID, name)
			}
			state := ""
			if info.State != nil {
				state = string(info.State.Status)
			}
			return m.reuse(ctx, runID, set, info.ID, state, info.Config.Labels)
		case !cerrdefs.IsNotFound(err):
			return nil, fmt.Errorf("ensure sandbox for run %s: inspect %s after a name conflict: %w", runID, name, err)
		case time.Now().After(deadline):
			return nil, fmt.Errorf("ensure sandbox for run %s: the name %s is taken, but no container shows it after %v", runID, name, conflictWait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ensure sandbox for run %s: %w", runID, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// conflictWait bounds how long Ensure waits for a racing attempt's container to show.
const conflictWait = 30 * time.Second

// reuse returns a handle to an existing container, starting it unless it runs. Its
// workspace (a volume) survived whatever stopped it.
func (m *Manager) reuse(ctx context.Context, runID string, set settings, id, state string, labels map[string]string) (*Sandbox, error) {
	if wd := labels[LabelWorkdir]; wd != "" {
		set.workdir = wd
	}
	if u, ok := labels[LabelUser]; ok {
		set.user = u
	}
	name := ContainerName(runID)
	switch state {
	case "running":
	case "created", "exited":
		if _, err := m.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
			return nil, fmt.Errorf("ensure sandbox for run %s: start existing container %s: %w", runID, name, err)
		}
	case "paused":
		return nil, fmt.Errorf("ensure sandbox for run %s: container %s is paused (docker unpause %s)", runID, name, name)
	default: // "removing", "dead", "restarting"
		return nil, fmt.Errorf("ensure sandbox for run %s: container %s is %s; retry later", runID, name, state)
	}
	return m.newSandbox(id, name, runID, set), nil
}

// removeContainer force-removes a container with its anonymous volumes (the workspace).
// A container already gone is not an error.
func removeContainer(ctx context.Context, cli Client, id string) error {
	_, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
