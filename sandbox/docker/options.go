package docker

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
)

// Defaults of Options. The container they describe is hardened: no network, every
// capability dropped, no-new-privileges, a read-only root file system with a writable
// workspace, and bounded memory, CPU and processes.
const (
	// DefaultImage is the image `starter sandbox build-image` builds: a static busybox,
	// a non-root user (uid 1000, "nexo") and /workspace, FROM scratch.
	DefaultImage = "nexo-sandbox:busybox"
	// DefaultWorkdir is the workspace directory inside the container.
	DefaultWorkdir = "/workspace"
	// DefaultNetwork is Docker's "none" network: a loopback interface and nothing else.
	DefaultNetwork = "none"
	// DefaultMemory bounds the container's memory, tmpfs pages included; no swap.
	DefaultMemory = "1g"
	// DefaultCPUs bounds the container's CPU time, in CPUs.
	DefaultCPUs = 1.0
	// DefaultPidsLimit bounds the number of processes (a fork bomb stops there).
	DefaultPidsLimit = 512
	// tmpSize bounds the /tmp tmpfs a read-only root gets; its pages count as memory.
	tmpSize = "256m"
)

// Options configures a run's container. The worker fills it from the wire spec
// (api.SandboxSpec, the `sandbox:` block of an agent or workflow with `type: docker`) with
// activities.DockerOptions. The zero value means the defaults above. The spec travels in
// workflow input: Env must not hold secrets.
type Options struct {
	// Image to run; default DefaultImage. It must already be on the Docker host (nothing
	// is pulled): a missing one is an *ImageNotFoundError.
	Image string
	// Workdir is the workspace: an absolute directory in the container where file tools
	// act and commands start; default /workspace. It is a Docker volume owned by the
	// container, so it survives a container restart, stays writable under a read-only root,
	// and is what ArchiveWorkspace saves.
	Workdir string
	// Network is "none" (the default: no network at all), "bridge", or the name of a
	// Docker network. "host" and "container:…" are refused: they share another network
	// namespace.
	Network string
	// Memory limit with a unit, as in `docker run --memory` ("512m", "2g"); default 1g.
	// Swap is disabled. /tmp (a tmpfs under a read-only root) counts against it.
	Memory string
	// CPUs the container may use, as in `docker run --cpus` (0.5, 2); default 1.
	CPUs float64
	// PidsLimit bounds the container's processes; 0 means the default 512, -1 no limit.
	PidsLimit int64
	// User runs commands as "name", "uid" or "uid:gid". Empty means the image's USER
	// (uid 1000 in the default image); an image without one runs as root, still with
	// every capability dropped.
	User string
	// Env is added to the container's environment.
	Env map[string]string
	// ROBinds are host directories or files mounted read-only, each "host:container"
	// with both paths absolute.
	ROBinds []string
	// RWBinds are mounted read-write ("host:container"). A write to one outside the
	// workspace is refused by the file tools but not by the shell: bind only what the
	// agent may change.
	RWBinds []string
	// ReadonlyRootfs makes the root file system read-only (default true); the workspace,
	// /tmp and the rw binds stay writable.
	ReadonlyRootfs *bool
	// CapAdd gives back Linux capabilities after all are dropped (default none), e.g.
	// "NET_BIND_SERVICE".
	CapAdd []string
	// Runtime is the engine's OCI runtime for the container: empty is the engine's default
	// (runc); "runsc" runs it under gVisor, a kernel in user space between the commands
	// and the host's kernel. The engine must have it registered (Manager.Check says so).
	Runtime string
}

// settings are Options validated, with defaults applied and units parsed.
type settings struct {
	image, workdir, network, user string
	memory                        int64
	nanoCPUs                      int64
	pids                          int64
	env                           []string
	binds                         []bind
	readonly                      bool
	runtime                       string
	capAdd                        []string
}

// withDefaults validates o and fills in the defaults. Errors wrap ErrInvalidOptions and
// name the field.
func (o Options) withDefaults() (settings, error) {
	bad := func(field, format string, a ...any) (settings, error) {
		return settings{}, fmt.Errorf("%w: %s: %s", ErrInvalidOptions, field, fmt.Sprintf(format, a...))
	}
	s := settings{image: o.Image, workdir: o.Workdir, network: o.Network, user: o.User,
		pids: o.PidsLimit, readonly: o.ReadonlyRootfs == nil || *o.ReadonlyRootfs}
	if s.image == "" {
		s.image = DefaultImage
	}
	if s.workdir == "" {
		s.workdir = DefaultWorkdir
	}
	if !path.IsAbs(s.workdir) || path.Clean(s.workdir) == "/" || strings.ContainsAny(s.workdir, ":\x00") {
		return bad("workdir", "%q must be an absolute directory other than /", o.Workdir)
	}
	s.workdir = path.Clean(s.workdir)
	for _, sys := range []string{"/proc", "/sys", "/dev", "/tmp"} {
		if s.workdir == sys || strings.HasPrefix(s.workdir, sys+"/") {
			return bad("workdir", "%q lies in %s", s.workdir, sys)
		}
	}
	switch {
	case s.network == "":
		s.network = DefaultNetwork
	case s.network == "host" || strings.HasPrefix(s.network, "container:"):
		return bad("network", "%q shares another network namespace; use none, bridge or a named network", s.network)
	}
	mem := o.Memory
	if mem == "" {
		mem = DefaultMemory
	}
	m, err := units.RAMInBytes(mem)
	if err != nil || m < 6<<20 {
		return bad("memory", "%q is not a size of at least 6m (e.g. 512m, 2g)", o.Memory)
	}
	s.memory = m
	cpus := o.CPUs
	if cpus == 0 {
		cpus = DefaultCPUs
	}
	if cpus < 0.01 {
		return bad("cpus", "%v is below 0.01", o.CPUs)
	}
	s.nanoCPUs = int64(cpus * 1e9)
	switch {
	case s.pids == 0:
		s.pids = DefaultPidsLimit
	case s.pids < -1:
		return bad("pids_limit", "%d is negative (use -1 for no limit)", s.pids)
	}
	keys := make([]string, 0, len(o.Env))
	for k, v := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return bad("env", "invalid variable %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.env = append(s.env, k+"="+o.Env[k])
	}
	for _, b := range o.ROBinds {
		spec, err := parseBind(b, "ro_binds")
		if err != nil {
			return bad("ro_binds", "%v", err)
		}
		s.binds = append(s.binds, spec)
	}
	for _, b := range o.RWBinds {
		spec, err := parseBind(b, "rw_binds")
		if err != nil {
			return bad("rw_binds", "%v", err)
		}
		s.binds = append(s.binds, spec)
	}
	for _, c := range o.CapAdd {
		if c == "" || strings.EqualFold(c, "ALL") {
			return bad("cap_add", "%q: name each capability (ALL is refused)", c)
		}
		s.capAdd = append(s.capAdd, c)
	}
	if r := o.Runtime; r != "" {
		if strings.Trim(r, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			return bad("runtime", "%q is not a runtime name", r)
		}
		s.runtime = r
	}
	return s, nil
}

// bind is one entry of ro_binds or rw_binds.
type bind struct {
	field  string // "ro_binds" or "rw_binds"
	spec   string // as configured, "host:container"
	source string // cleaned host path
	target string // cleaned container path
}

// parseBind checks "host:container" (both absolute, not over the container's root).
func parseBind(b, field string) (bind, error) {
	host, ctr, ok := strings.Cut(b, ":")
	if !ok || strings.Contains(ctr, ":") || !path.IsAbs(host) || !path.IsAbs(ctr) || path.Clean(ctr) == "/" {
		return bind{}, fmt.Errorf("%q is not \"/host/path:/container/path\"", b)
	}
	return bind{field: field, spec: b, source: path.Clean(host), target: path.Clean(ctr)}, nil
}

// missingBind returns the *BindSourceError for the engine's refusal of a bind whose host
// path does not exist ("invalid mount config for type "bind": bind source path does not
// exist: /srv/repo"), or nil for any other error.
func (s settings) missingBind(err error) *BindSourceError {
	const refusal = "bind source path does not exist: "
	msg := err.Error()
	i := strings.Index(msg, refusal)
	if i < 0 {
		return nil
	}
	host := strings.TrimSpace(msg[i+len(refusal):])
	for _, b := range s.binds {
		if b.source == host {
			return &BindSourceError{Field: b.field, Bind: b.spec, Host: host}
		}
	}
	return &BindSourceError{Field: "binds", Bind: host, Host: host}
}

// mount is the bind as a mount of type bind, which the engine refuses when the host path
// does not exist (a legacy "host:container" bind would create it, empty and owned by root).
func (b bind) mount() mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: b.source, Target: b.target, ReadOnly: b.field == "ro_binds"}
}

// containerConfig is the container a run gets: a keep-alive process under Docker's init
// (which reaps the orphans of exec'd commands), labelled for Ensure and Reap.
func (s settings) containerConfig(labels map[string]string) *container.Config {
	return &container.Config{
		Image:      s.image,
		User:       s.user,
		Env:        s.env,
		WorkingDir: s.workdir,
		Labels:     labels,
		// tail exists in every image with a shell (busybox, coreutils) and sleeps on
		// /dev/null without waking; the image's own entrypoint is not wanted here.
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Cmd:        nil,
	}
}

// hostConfig is where the hardening lives.
func (s settings) hostConfig(labels map[string]string) *container.HostConfig {
	yes := true
	pids := s.pids
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.network),
		CapDrop:        []string{"ALL"},
		CapAdd:         s.capAdd,
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: s.readonly,
		Runtime:        s.runtime,
		IpcMode:        container.IPCModePrivate,
		Init:           &yes,
		// The workspace is an anonymous volume: writable under a read-only root, reachable
		// by the archive API (a tmpfs is not), kept across a container restart, and removed
		// with the container (RemoveVolumes). Docker fills a new volume from the image's
		// directory, so /workspace keeps the image's owner (uid 1000 in ours).
		Mounts: []mount.Mount{{
			Type:          mount.TypeVolume,
			Target:        s.workdir,
			VolumeOptions: &mount.VolumeOptions{Labels: labels},
		}},
		Resources: container.Resources{
			Memory:     s.memory,
			MemorySwap: s.memory, // no swap
			NanoCPUs:   s.nanoCPUs,
			PidsLimit:  &pids,
		},
	}
	for _, b := range s.binds {
		hc.Mounts = append(hc.Mounts, b.mount())
	}
	if s.readonly {
		hc.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=" + tmpSize}
	}
	return hc
}
