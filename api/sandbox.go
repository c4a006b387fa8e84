package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Sandbox types, as named in SandboxSpec.Type.
const (
	SandboxVirtual = "virtual"
	SandboxLocal   = "local"
	SandboxDocker  = "docker"
	// SandboxBubblewrap: a host directory like local, whose commands each run sealed
	// under bubblewrap (sandbox/bwrap).
	SandboxBubblewrap = "bubblewrap"
)

// SandboxSpec declares the sandbox a run (or an agent) acts in. It travels in workflow
// input, so it holds no secrets. The worker turns it into a sandbox.Sandbox.
type SandboxSpec struct {
	// Type is virtual, local, bubblewrap or docker. Empty means local.
	Type string `json:"type,omitempty" mapstructure:"type" yaml:"type"`
	// Dir is the host directory of a local or bubblewrap sandbox. Empty means a fresh directory per run
	// under the worker's workspace root, owned by the run and removed when it ends.
	Dir string `json:"dir,omitempty" mapstructure:"dir" yaml:"dir"`
	// Snapshot, set true, snapshots a user's Dir after every change as a per-run workspace
	// is (a user's own checkout is not snapshotted otherwise). It has no effect without Dir.
	Snapshot bool `json:"snapshot,omitempty" mapstructure:"snapshot" yaml:"snapshot"`
	// Pool names the sandbox hosts the run's tools run on (`worker --sandbox-host --pool
	// NAME`, or a worker with --pool): the run claims its host on the pool's queue
	// (PoolQueueName), so its sandbox only ever lives on a host of the pool, and a lost
	// host moves it to another host of the same pool. Empty: any worker of the task queue.
	Pool string `json:"pool,omitempty" mapstructure:"pool" yaml:"pool"`

	// Docker sandboxes (type docker): one hardened container per run. The defaults are
	// safe: no network, all capabilities dropped, no-new-privileges, read-only root with a
	// writable workspace volume, memory 1g, 1 CPU, 512 processes.

	// Image must be on the Docker host (nothing is pulled); default nexo-sandbox:busybox,
	// built by `starter sandbox build-image`.
	Image string `json:"image,omitempty" mapstructure:"image" yaml:"image"`
	// Workdir is the workspace in the container (default /workspace).
	Workdir string `json:"workdir,omitempty" mapstructure:"workdir" yaml:"workdir"`
	// Network is none (default), bridge, or a named Docker network.
	Network string `json:"network,omitempty" mapstructure:"network" yaml:"network"`
	// Memory ("512m", "2g"), CPUs (0.5, 2) and PidsLimit (0: 512, -1: none) bound it. A
	// bubblewrap sandbox takes Memory as each process's address space (default 1g) and
	// PidsLimit as its processes (RLIMIT_NPROC, default 512); it has no CPU limit.
	Memory    string  `json:"memory,omitempty" mapstructure:"memory" yaml:"memory"`
	CPUs      float64 `json:"cpus,omitempty" mapstructure:"cpus" yaml:"cpus"`
	PidsLimit int64   `json:"pids_limit,omitempty" mapstructure:"pids_limit" yaml:"pids_limit"`
	// User runs commands ("name", "uid", "uid:gid"); empty: the image's user.
	User string `json:"user,omitempty" mapstructure:"user" yaml:"user"`
	// Env is added to the container's environment, or a bubblewrap command's (no
	// secrets: it is in history).
	Env map[string]string `json:"env,omitempty" mapstructure:"env" yaml:"env"`
	// ROBinds and RWBinds mount host paths ("host:container", both absolute).
	ROBinds []string `json:"ro_binds,omitempty" mapstructure:"ro_binds" yaml:"ro_binds"`
	RWBinds []string `json:"rw_binds,omitempty" mapstructure:"rw_binds" yaml:"rw_binds"`
	// ReadonlyRootfs (default true) keeps the root file system read-only.
	ReadonlyRootfs *bool `json:"readonly_rootfs,omitempty" mapstructure:"readonly_rootfs" yaml:"readonly_rootfs"`
	// CapAdd gives back Linux capabilities after all are dropped (default none).
	CapAdd []string `json:"cap_add,omitempty" mapstructure:"cap_add" yaml:"cap_add"`
	// Runtime is the Docker engine's OCI runtime for the container: empty is the engine's
	// default (runc), "runsc" runs it under gVisor. The engine must have it registered.
	Runtime string `json:"runtime,omitempty" mapstructure:"runtime" yaml:"runtime"`
	// IdleTimeout is how long a suspended run keeps its container; then the workspace is
	// archived to the artifact store and the container removed, and a fresh container gets
	// the workspace back when the run continues. Zero means 10 minutes.
	IdleTimeout Duration `json:"idle_timeout,omitempty" mapstructure:"idle_timeout" yaml:"idle_timeout"`
	// Warm keeps this many containers made with these options created and started on
	// each worker whose config lists the agent, so a run's first tool call takes one
	// instead of waiting for Docker to create and start it (0..64, default 0: none). A
	// pooled container serves one run only; the worker refills the pool in the background
	// and removes what no run took when it stops.
	Warm int `json:"warm,omitempty" mapstructure:"warm" yaml:"warm"`
	// Egress gives a bubblewrap sandbox a way out through the worker's egress proxy, to
	// the hosts it lists only, with credentials added on the way out (see EgressSpec).
	// Nil: no network at all.
	Egress *EgressSpec `json:"egress,omitempty" mapstructure:"egress" yaml:"egress"`
}

// Duration is a time.Duration that reads and writes as a string such as "10m" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as a string ("10m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "10m" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want a string such as \"10m\": %w", err)
	}
	*d = Duration(n)
	return nil
}
