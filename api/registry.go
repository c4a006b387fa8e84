package api

import (
	"slices"
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
	// signal-with-start when the worker starts and every TTL/RegistryAnnouncements after.
	SignalRegister = "nexo.register"
	// QueryRegistry returns what the workers of the task queue offer (RegistryView).
	QueryRegistry = "nexo.registry"
	// SignalDeregister is a worker's goodbye (WorkerDeparture), sent when it stops
	// gracefully, so the registry drops it at once instead of at its expiry.
	SignalDeregister = "nexo.deregister"
	// MemoRegistryLive is the registry's memo key listing the identities it holds (sorted),
	// kept current as workers join and leave, so a client reads who is registered with
	// DescribeWorkflowExecution while no worker is up to answer QueryRegistry.
	MemoRegistryLive = "nexo.registry.live"
	// MemoRegistryWorkers is the registry's memo key holding the announcement of each
	// worker it holds (sorted by identity, At cleared), kept current as they change, so
	// the check before a start reads what the workers offer with DescribeWorkflowExecution:
	// the server alone answers it, at once under load and with no worker's task to wait
	// for. Null when the announcements together pass MaxRegistryMemo: clients ask
	// QueryRegistry then. Absent from registries older than "registry-memo".
	MemoRegistryWorkers = "nexo.registry.workers"

	// RegistryIDPrefix starts the workflow id of a registry (RegistryID); ordinary runs may
	// not take it.
	RegistryIDPrefix = "nexo-registry:"
)

// RegistryTTL is how long a worker stays in the registry after its last announcement
// unless it announces another (WorkerAnnouncement.TTLSeconds, config worker.registry_ttl):
// a worker killed without a word drops out within a minute.
const RegistryTTL = time.Minute

// RegistryAnnouncements is how many announcements a worker makes per TTL: it announces
// every TTL/3 (20 s at the default), so two may be lost before it is dropped.
const RegistryAnnouncements = 3

// RegistryExpiry is how long the registry keeps an entry whose announcement names no TTL:
// a worker older than the live rule, announcing hourly, stays a day and an hour (clients
// also leave such an entry out once its identity no longer polls the task queue).
const RegistryExpiry = 25 * time.Hour

// MaxRegistryMemo bounds the JSON of MemoRegistryWorkers (each change of it is written
// to the registry's history): beyond it the memo holds null and clients ask the query.
const MaxRegistryMemo = 32 << 10

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
	// Store is the artifact store the worker reads and writes (artifacts.url), without
	// credentials, so a worker joining a fleet whose store differs says so. Nil from workers
	// older than the store announcement.
	Store *StoreAnnouncement `json:"store,omitempty"`
	// PageURL is the base URL of the Nexo web page this worker serves (`worker --dev`: its
	// gateway, gateway.url or http://<gateway.addr>), without a trailing slash, so a
	// client whose config names no gateway.url links the runs it starts to the page where
	// it is (the gateway's port moves with the worker's config). "" when the worker serves
	// no page, or from workers older than it.
	PageURL string `json:"page_url,omitempty"`
	// TTLSeconds is how long the registry keeps the worker after this announcement (the
	// worker announces again well before); 0 (a worker older than the live rule) is
	// RegistryExpiry.
	TTLSeconds int `json:"ttl_seconds,omitempty"`
	// At is when the worker sent it, by the worker's clock (informative only).
	At time.Time `json:"at"`
}

// TTL is how long the registry keeps the worker after its announcement a.
func (a WorkerAnnouncement) TTL() time.Duration {
	if a.TTLSeconds <= 0 {
		return RegistryExpiry
	}
	return time.Duration(a.TTLSeconds) * time.Second
}

// StoreAnnouncement is where a worker's artifact store lives, as the worker announces it:
// never a credential (no userinfo, no query), and a file:// store with the absolute path
// it resolved and the machine it is on, since the same path on two machines is two stores.
type StoreAnnouncement struct {
	// URL is the store's URL without userinfo or query: file:///abs/path, s3://bucket/prefix.
	URL string `json:"url"`
	// Scheme is file, mem, s3, gs or azblob.
	Scheme string `json:"scheme"`
	// Host is the hostname of the worker's machine, for file:// and mem:// stores only.
	Host string `json:"host,omitempty"`
	// MachineID tells two machines of the same hostname apart (/etc/machine-id), for
	// file:// stores; mem:// has the worker's identity here (a store no other process sees).
	MachineID string `json:"machine_id,omitempty"`
}

// Label is how a message names the store: its URL, and for a store on one machine that
// machine ("file:///srv/nexo/artifacts on host build-1").
func (s StoreAnnouncement) Label() string {
	if s.Host == "" {
		return s.URL
	}
	return s.URL + " on host " + s.Host
}

// SameAs reports whether s and o are the same store: the same URL and, for a store that
// lives on one machine, the same machine.
func (s StoreAnnouncement) SameAs(o StoreAnnouncement) bool {
	return s.URL == o.URL && s.MachineID == o.MachineID && (s.MachineID != "" || s.Host == o.Host)
}

// WorkerDeparture is the payload of SignalDeregister.
type WorkerDeparture struct {
	// Identity is the identity the worker announced itself under.
	Identity string `json:"identity"`
	// At is when the worker sent it, by the worker's clock (informative only).
	At time.Time `json:"at"`
}

// RegisteredWorker is one worker as the registry keeps it.
type RegisteredWorker struct {
	WorkerAnnouncement
	// SeenAt is when the registry received the latest announcement, by workflow time; the
	// entry is dropped TTL() after it.
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

// PageURL is the web page a live worker announced it serves (WorkerAnnouncement.PageURL):
// the one announced most recently when several did; "" when none did.
func (v RegistryView) PageURL() string {
	url, seen := "", time.Time{}
	for _, w := range v.Workers {
		if w.PageURL != "" && (url == "" || w.SeenAt.After(seen)) {
			url, seen = w.PageURL, w.SeenAt
		}
	}
	return url
}

// NewRegistryView is the view of workers (in the order given): the union of what they
// offer, sorted and without duplicates, and their input fields merged (see RegistryView).
func NewRegistryView(workers []RegisteredWorker) RegistryView {
	v := RegistryView{Workflows: []string{}, Agents: []string{}, Workers: []RegisteredWorker{}}
	for _, w := range workers {
		v.Workflows = append(v.Workflows, w.Workflows...)
		v.Agents = append(v.Agents, w.Agents...)
		v.Workers = append(v.Workers, w)
	}
	v.Workflows = SortedUnique(v.Workflows)
	v.Agents = SortedUnique(v.Agents)
	v.Inputs = mergeInputs(v.Workers)
	return v
}

// mergeInputs merges the workers' input fields: a type is checked only when every
// worker offering it announced its fields (one offering it unchecked, an older worker or
// a map input, could run any input), with the union of their fields.
func mergeInputs(workers []RegisteredWorker) map[string][]string {
	out := map[string][]string{}
	unchecked := map[string]bool{}
	for _, w := range workers {
		for _, typ := range w.Workflows {
			fields, ok := w.Inputs[typ]
			if !ok {
				unchecked[typ] = true
				continue
			}
			out[typ] = append(out[typ], fields...)
		}
	}
	for typ := range out {
		if unchecked[typ] {
			delete(out, typ)
			continue
		}
		out[typ] = SortedUnique(out[typ])
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SortedUnique is s sorted without duplicates, never nil.
func SortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}
