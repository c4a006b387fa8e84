package api

import (
	"fmt"
	"time"
)

// Activities of per-host sandbox routing (workflows/hostq.go, activities/hostq.go).
const (
	// ActivityClaimSandboxHost runs on the shared task queue and returns the host queue of
	// the worker that took it (SandboxHost): the run's sandbox activities go there.
	ActivityClaimSandboxHost = "ClaimSandboxHost"
	// ActivitySnapshotSandbox archives a run's workspace (any tier) to the artifact store
	// and keeps the sandbox as it is.
	ActivitySnapshotSandbox = "SnapshotSandbox"
	// ActivityRestoreSandboxOnHost gives a run that moved to a new host a workspace made
	// from its last snapshot (empty when it has none).
	ActivityRestoreSandboxOnHost = "RestoreSandboxOnHost"
)

// MemoSandboxHost is the memo key a run keeps its current host queue under, so a worker's
// reaper can tell a run that moved away from one it still serves.
const MemoSandboxHost = "nexo_sandbox_host"

// HostQueueSep separates the shared task queue from the host part of a host queue name:
// "<task_queue>@host-<id>".
const HostQueueSep = "@host-"

// HostQueueName is the task queue of the sandbox activities of the worker with host id
// id on the shared task queue taskQueue.
func HostQueueName(taskQueue, id string) string { return taskQueue + HostQueueSep + id }

// PoolQueueSep separates the shared task queue from the pool part of a pool's claim
// queue name: "<task_queue>@pool-<name>".
const PoolQueueSep = "@pool-"

// PoolQueueName is the task queue a run whose agent names pool claims its host on
// (ClaimSandboxHost): only the hosts of that pool poll it, so the run's sandbox lives on
// one of them.
func PoolQueueName(taskQueue, pool string) string { return taskQueue + PoolQueueSep + pool }

// MaxPoolName bounds a pool's name (it becomes part of a task queue name).
const MaxPoolName = 40

// ValidatePoolName reports what is wrong with a pool's name: 1 to MaxPoolName lowercase
// letters, digits, - and _, starting with a letter or a digit.
func ValidatePoolName(name string) error {
	if name == "" {
		return fmt.Errorf("pool name is empty")
	}
	if len(name) > MaxPoolName {
		return fmt.Errorf("pool name %q is longer than %d characters", name, MaxPoolName)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && (r == '-' || r == '_')
		if !ok {
			return fmt.Errorf("pool name %q may hold only lowercase letters, digits, - and _ (starting with a letter or digit)", name)
		}
	}
	return nil
}

// ClaimHostRequest asks a worker for its host queue. Fresh is set on a run's first claim
// (not a move, not a continued session): the worker then blanks any snapshot an earlier
// run with the same id left, so it is never restored into this one.
type ClaimHostRequest struct {
	RunID string `json:"run_id"`
	Fresh bool   `json:"fresh,omitempty"`
}

// SandboxHost is where a run's sandbox lives, as the worker that claimed it answered
// (history holds it; workflow code never asks a worker-local value). A session carries
// it across continue-as-new.
type SandboxHost struct {
	// Queue is the host's task queue; Host its id.
	Queue string `json:"queue"`
	Host  string `json:"host"`
	// ParkEvery is how often, at most, a working run snapshots its workspace after a tool
	// call (config sandbox.park_every); 0 means only at suspends.
	ParkEvery Duration `json:"park_every,omitempty"`
	// HostTimeout is how long a sandbox activity may wait for the host to pick it up
	// before the host is taken as gone (config sandbox.host_timeout).
	HostTimeout Duration `json:"host_timeout,omitempty"`
	// ParkedAt is when the run's workspace was last snapshotted (nil: never).
	ParkedAt *time.Time `json:"parked_at,omitempty"`
	// Snapshot is the run's last workspace snapshot, carried across a session's
	// continue-as-new.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// SnapshotCall is the id of the call that took Snapshot.
	SnapshotCall string `json:"snapshot_call,omitempty"`
}

// SnapshotResult is what a snapshot stored.
type SnapshotResult struct {
	Bytes int64 `json:"bytes"`
	// Ref is the incremental snapshot taken when the request's Manifest was
	// ManifestRequested (nil for a user's dir, which is not the run's to snapshot).
	Ref *SnapshotRef `json:"ref,omitempty"`
}

// ManifestRequested, as a SnapshotSandbox request's Manifest, asks for an incremental
// snapshot (api/snapshot.go) instead of a whole-workspace archive.
const ManifestRequested = "incremental"

// RestoreOnHostResult says what a restore on a new host found: Found is false when the
// run had no snapshot (the workspace starts empty but for the artifacts restored).
type RestoreOnHostResult struct {
	Found bool  `json:"found"`
	Bytes int64 `json:"bytes"`
	// Lost and Skipped: what a restore from a manifest could not bring back.
	RestoreManifestResult
}
