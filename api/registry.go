package api

import (
	"strings"
	"time"
)

// Registry wire names. Each task queue has one registry workflow (not a run): every worker
// polling the queue announces what it offers, so a client can refuse a workflow type no
// worker has before starting a run that would never start.
const (
	// WorkflowRegistry is the workflow type of a task queue's registry.
	WorkflowRegistry = "NexoRegistry"
	// SignalRegister is a worker's announcement (WorkerAnnouncement), sent with
	// signal-with-start when the worker starts and every RegistryAnnounceEvery after.
	SignalRegister = "nexo.register"
	// QueryRegistry returns what the workers of the task queue offer (RegistryView).
	QueryRegistry = "nexo.registry"

	// RegistryIDPrefix starts the workflow id of a registry (RegistryID); ordinary runs may
	// not take it.
	RegistryIDPrefix = "nexo-registry:"
)

// RegistryAnnounceEvery is how often a running worker announces itself again.
const RegistryAnnounceEvery = time.Hour

// RegistryExpiry is how long a worker stays in the registry after its last announcement:
// a day and an hour, so a worker that missed a few announcements (a Temporal outage) is not
// dropped, and one that is gone no longer counts a day later.
const RegistryExpiry = 25 * time.Hour

// RegistryID is the workflow id of the registry of taskQueue.
func RegistryID(taskQueue string) string { return RegistryIDPrefix + taskQueue }

// IsRegistryID reports whether id is a registry's workflow id.
func IsRegistryID(id string) bool { return strings.HasPrefix(id, RegistryIDPrefix) }

// WorkerAnnouncement is the payload of SignalRegister: what one worker offers.
type WorkerAnnouncement struct {
	// Identity is the worker's Temporal identity; the registry keeps one entry per identity.
	Identity string `json:"identity"`
	// Workflows are the workflow types the worker registered (runs can be started of them).
	Workflows []string `json:"workflows"`
	// Agents are the agent names of the worker's configuration.
	Agents []string `json:"agents"`
	// Pools names the sandbox pool of each of Agents whose sandbox names one (agent →
	// pool), so a client refuses to start such an agent while no host of its pool is up.
	Pools map[string]string `json:"pools,omitempty"`
	// Inputs are the JSON field names each workflow type's input takes (workflow type →
	// names, sorted), so a client refuses an unknown field (a typo such as "docid") before
	// it starts a run. A type whose input is not a struct (a map, any, raw JSON) or decodes
	// itself (json.Unmarshaler) is absent: its input is not checked.
	Inputs map[string][]string `json:"inputs,omitempty"`
	// At is when the worker sent it, by the worker's clock (informative only).
	At time.Time `json:"at"`
}

// RegisteredWorker is one worker as the registry keeps it.
type RegisteredWorker struct {
	WorkerAnnouncement
	// SeenAt is when the registry received the latest announcement, by workflow time; the
	// entry is dropped RegistryExpiry after it.
	SeenAt time.Time `json:"seen_at"`
}

// RegistryView is the answer of QueryRegistry: the union of what the registered workers
// offer (sorted, without duplicates) and each worker's own announcement, by identity.
type RegistryView struct {
	Workflows []string `json:"workflows"`
	Agents    []string `json:"agents"`
	// Inputs are the input fields of the workflow types every worker offering them
	// announced fields for (the union over those workers, so a field one version of a
	// rolling deploy knows is accepted); a type some worker offers unchecked is absent.
	Inputs  map[string][]string `json:"inputs,omitempty"`
	Workers []RegisteredWorker  `json:"workers"`
}
