package devserver

import (
	"net"
	"strconv"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/primitives"
)

// clusterName names the single cluster of a dev server. It is persisted in a database file, so
// it must never change.
const clusterName = "active"

// latencyDefaults are the dynamic config values the dev server starts with, tuned for latency
// on a single host with one history shard rather than for throughput or fairness across
// thousands of shards. Options.DynamicConfig is applied on top.
//
// Most of the stock latency is waiting on rate limiters, not work: a history queue reader
// takes a token from a per-shard limiter (MaxPollRPS, default 20/s, burst 20) and a host-level
// one (MaxPollHostRPS) before every load from the database. The defaults assume hundreds of
// shards per host. With one shard, anything busier than a few workflow steps per second (a
// loop of runs, an agent's tool calls, a test suite) drains the bucket, and then every step
// waits ~50 ms for its token. Measured here, one-activity workflows back to back: median
// ~100 ms with the stock values, ~22 ms with these.
func latencyDefaults() dynamicconfig.StaticClient {
	const queuePollRPS = 10000 // effectively unlimited for one shard; a load is a cheap SQLite query

	dc := dynamicconfig.StaticClient{}
	set := func(key dynamicconfig.Key, v any) { dc[key] = v }

	// History queues. Transfer: workflow/activity tasks to matching, child workflows, signals
	// to other workflows. Timer: timeouts, retries with backoff, workflow.Sleep. Visibility:
	// the list/search records (a `starter list` right after a transition must see it).
	// Outbound: Nexus operations and callbacks.
	for _, pair := range [][2]dynamicconfig.Key{
		{dynamicconfig.TransferProcessorMaxPollRPS.Key(), dynamicconfig.TransferProcessorMaxPollHostRPS.Key()},
		{dynamicconfig.TimerProcessorMaxPollRPS.Key(), dynamicconfig.TimerProcessorMaxPollHostRPS.Key()},
		{dynamicconfig.VisibilityProcessorMaxPollRPS.Key(), dynamicconfig.VisibilityProcessorMaxPollHostRPS.Key()},
		{dynamicconfig.OutboundProcessorMaxPollRPS.Key(), dynamicconfig.OutboundProcessorMaxPollHostRPS.Key()},
	} {
		set(pair[0], queuePollRPS)
		set(pair[1], queuePollRPS)
	}

	// Queue checkpoints. Each history queue keeps every task it has loaded in memory, finished
	// or not, until its next checkpoint prunes the finished ones, and each time it loads a new
	// range of tasks it walks that whole set to split it (service/history/queues/tracker.go).
	// At the default 30 s interval a busy dev server carries thousands of finished tasks from
	// one checkpoint to the next, and the walks grew to 13% of the server's CPU by the fourth
	// batch of 500 workflows (go run ./bench devserver, CPU profiles of early and late
	// batches). Every second keeps the set small. A checkpoint is in memory plus one range
	// delete of finished tasks; how often the shard record is written does not change
	// (history.shardUpdateMinInterval).
	for _, key := range []dynamicconfig.Key{
		dynamicconfig.TransferProcessorUpdateAckInterval.Key(),
		dynamicconfig.TimerProcessorUpdateAckInterval.Key(),
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key(),
		dynamicconfig.OutboundProcessorUpdateAckInterval.Key(),
	} {
		set(key, time.Second)
	}

	// History long polls (a client waiting for a run's result or following its history with
	// GetWorkflowExecutionHistory, an update waiting for its outcome) end after this long with
	// "no news yet", and the client polls again. A waiting poll is woken by the history event
	// notifier, whose per-subscriber channel holds one notification and drops any other that
	// arrives before the poller drains it (service/history/events/notifier.go). When a run's
	// transactions land a few milliseconds apart (exactly what the raised poll rates above
	// produce) and the CPU is busy, the notification of the close can be the one dropped, and
	// the client sleeps out the whole interval although the run is done. Measured here with a
	// one-activity workflow: about 1 run in 300-700 took 20 s (the default interval) instead of
	// 20 ms, and about 1 in 100 when other builds loaded the machine. The interval bounds that
	// stall; the price is one cheap round trip per interval per waiting client (20 idle waiters
	// cost 0.4% of a core at 20 s, 6% at 500 ms, 16% at 200 ms).
	set(dynamicconfig.HistoryLongPollExpirationInterval.Key(), 500*time.Millisecond)

	// Matching: one partition per task queue. With the default four, a task written to one
	// partition and a poller waiting on another meet only after the partition forwards to its
	// root, which costs up to matching.maxWaitForPollerBeforeFwd and a second hop; a single
	// worker polling a single host gains nothing from partitions.
	set(dynamicconfig.MatchingNumTaskqueueReadPartitions.Key(), 1)
	set(dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(), 1)

	// Eager workflow start: StartWorkflowExecution returns the first workflow task inline to a
	// worker in the same process (SDK StartWorkflowOptions.EnableEagerStart), skipping the
	// transfer queue and matching. On by default in this server; stated so it stays on.
	// Eager activities do the same for activities scheduled by a completing workflow task.
	// Continue-as-new and workflow id reuse: production servers space a workflow's runs at
	// least 1 s apart (a guard against tight continue-as-new loops), which a session that
	// continues as new or a closed session reopened at once would wait out. On a dev server
	// the wait only slows tests and demos.
	set(dynamicconfig.WorkflowIdReuseMinimalInterval.Key(), time.Duration(0))

	set(dynamicconfig.EnableEagerWorkflowStart.Key(), true)
	set(dynamicconfig.EnableActivityEagerExecution.Key(), true)

	// Frontend limits: generous, a dev server has one user. Visibility calls (starter list,
	// the Web UI's polling) default to 10/s per namespace, which the UI alone can exceed.
	set(dynamicconfig.FrontendRPS.Key(), 10000)
	set(dynamicconfig.FrontendMaxNamespaceRPSPerInstance.Key(), 10000)
	set(dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(), 1000)

	// Mutable-state cache: every closed workflow stays cached, so its size sets the memory a
	// dev server keeps after use. 8192 entries held ~360 MiB after 4,000 workflows; 1024 held
	// ~270 MiB with the same throughput (go run ./bench devserver). The default, 128k
	// entries, is sized for a production history host.
	set(dynamicconfig.HistoryCacheHostLevelMaxSize.Key(), 1024)
	// Host-level task schedulers: the defaults (512 goroutines per queue) are sized for many
	// shards; one shard needs a handful. Fewer goroutines, less idle memory, same latency.
	set(dynamicconfig.TimerProcessorSchedulerWorkerCount.Key(), 16)
	set(dynamicconfig.TransferProcessorSchedulerWorkerCount.Key(), 16)
	set(dynamicconfig.VisibilityProcessorSchedulerWorkerCount.Key(), 16)

	return dc
}

// serverConfig builds the static server config: all four services in this process on ip, one
// history shard, SQLite for both stores, archival off.
func serverConfig(ip string, ports servicePorts, sqlCfg *config.SQL, clusterID string) *config.Config {
	frontendAddr := net.JoinHostPort(ip, strconv.Itoa(ports.frontend))
	service := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: ip}}
	}

	var c config.Config
	c.Global.Membership.MaxJoinDuration = 30 * time.Second
	c.Global.Membership.BroadcastAddress = ip

	const store = "sqlite"
	c.Persistence.DefaultStore = store
	c.Persistence.VisibilityStore = store
	// One shard: every workflow shares one set of queues, and a workflow's tasks never wait on
	// another shard's reader. (Persisted in the database; a file keeps its original count.)
	c.Persistence.NumHistoryShards = 1
	c.Persistence.DataStores = map[string]config.DataStore{store: {SQL: sqlCfg}}

	c.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
				ClusterID:              clusterID,
			},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"
	c.Services = map[string]config.Service{
		string(primitives.FrontendService): service(ports.frontend),
		string(primitives.HistoryService):  service(ports.history),
		string(primitives.MatchingService): service(ports.matching),
		string(primitives.WorkerService):   service(ports.worker),
	}
	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	c.PublicClient.HostPort = frontendAddr
	return &c
}

// servicePorts are the gRPC ports of the four in-process services. Only the frontend's is
// meant for clients; the others are how the services call each other.
type servicePorts struct {
	frontend, history, matching, worker int
}
