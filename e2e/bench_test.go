package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/workflows"
)

const benchTaskQueue = "nexo-bench"

var debugSteps = os.Getenv("NEXO_BENCH_STEPS") == "1"

// rawApproval is DocumentApproval's shape written directly on the Temporal SDK: fetch,
// wait for a signal, publish. No run record, no search attribute, no events.
func rawApproval(ctx workflow.Context, docID string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflows.DefaultActivityOptions())
	status := "fetching"
	if err := workflow.SetQueryHandler(ctx, "status", func() (string, error) { return status, nil }); err != nil {
		return "", err
	}
	var doc api.Document
	if err := workflow.ExecuteActivity(ctx, api.ActivityFetchDocument, docID).Get(ctx, &doc); err != nil {
		return "", err
	}
	status = "waiting"
	var in map[string]any
	workflow.GetSignalChannel(ctx, "approve").Receive(ctx, &in)
	status = "publishing"
	var out string
	err := workflow.ExecuteActivity(ctx, api.ActivityPublishDocument, doc).Get(ctx, &out)
	return out, err
}

// BenchmarkApprovalFlow runs the DocumentApproval flow (start → suspended → approve →
// done) through Nexo (runs.Client, as the starter does it) and the same shape on the raw
// SDK, alternately on one embedded server, and reports both medians and their ratio:
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench ApprovalFlow -benchtime 40x
func BenchmarkApprovalFlow(b *testing.B) {
	tc, _ := benchPlatform(b, activities.Deps{}, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(rawApproval, workflow.RegisterOptions{Name: "RawApproval"})
	})
	rc := runs.New(tc, api.DefaultNamespace, benchTaskQueue)
	ctx := context.Background()

	nexoFlow := func() time.Duration {
		t0 := time.Now()
		id, err := rc.Start(ctx, runs.StartRequest{Workflow: demo.DocumentApprovalName, Payload: json.RawMessage(`{"doc_id":"b"}`)})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		rec, err := rc.Follow(ctx, id, func(r api.Record) bool { return r.Status == api.StatusSuspended })
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := rc.DecideRecord(ctx, rec, runs.Decision{Approved: true}); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		var res json.RawMessage
		if err := tc.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			b.Fatal(err)
		}
		if debugSteps {
			b.Logf("start %v follow %v decide %v result %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), time.Since(t3))
		}
		return time.Since(t0)
	}
	rawFlow := func() time.Duration {
		t0 := time.Now()
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: benchTaskQueue}, "RawApproval", "b")
		if err != nil {
			b.Fatal(err)
		}
		// Wait for "waiting" the same way: long-poll history, query after each task.
		it := tc.GetWorkflowHistory(ctx, run.GetID(), "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				continue
			}
			v, err := tc.QueryWorkflow(ctx, run.GetID(), "", "status")
			if err != nil {
				b.Fatal(err)
			}
			var s string
			_ = v.Get(&s)
			if s == "waiting" {
				break
			}
		}
		t1 := time.Now()
		if err := tc.SignalWorkflow(ctx, run.GetID(), "", "approve", map[string]any{"approved": true}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		var out string
		if err := run.Get(ctx, &out); err != nil {
			b.Fatal(err)
		}
		if debugSteps {
			b.Logf("raw: start+wait %v signal %v result %v", t1.Sub(t0), t2.Sub(t1), time.Since(t2))
		}
		return time.Since(t0)
	}

	// Warm-up: caches, connections, first-task costs.
	for range 3 {
		nexoFlow()
		rawFlow()
	}
	var nexo, raw []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			nexo = append(nexo, nexoFlow())
			raw = append(raw, rawFlow())
		} else {
			raw = append(raw, rawFlow())
			nexo = append(nexo, nexoFlow())
		}
	}
	b.StopTimer()
	mn, mr := median(nexo), median(raw)
	b.ReportMetric(ms(mn), "nexo-median-ms")
	b.ReportMetric(ms(mr), "raw-median-ms")
	b.ReportMetric(float64(mn)/float64(mr), "ratio")
	b.ReportMetric(0, "ns/op")
	b.Logf("n=%d nexo median %.1f ms p90 %.1f ms | raw median %.1f ms p90 %.1f ms | ratio %.2f",
		len(nexo), ms(mn), ms(pct(nexo, 0.9)), ms(mr), ms(pct(raw, 0.9)), float64(mn)/float64(mr))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration { return pct(ds, 0.5) }

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// benchPlatform starts an embedded server (SQLite file in a temporary directory) and an
// in-process worker on benchTaskQueue running every Nexo workflow and the activities of
// deps (its store and sandboxes are filled in under the same directory); register adds
// more to the worker. It returns the client and the activities (to call one directly).
// Everything stops when the benchmark ends.
func benchPlatform(b *testing.B, deps activities.Deps, register func(worker.Worker)) (client.Client, *activities.Activities) {
	b.Helper()
	dir := b.TempDir()
	srv := startDevServer(b, devserver.Options{DBPath: filepath.Join(dir, "temporal.db")})
	b.Cleanup(func() { _ = srv.Stop() })
	deps.Store, _ = artifacts.Open(filepath.Join(dir, "artifacts"))
	// The same store carries the offloaded payloads, as in the worker.
	tc, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Logger: sdklog.NewStructuredLogger(quietLogger()),
		ExternalStorage: payloads.ExternalStorage(deps.Store, 0)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tc.Close)
	deps.Sandboxes, _ = activities.NewSandboxes(filepath.Join(dir, "ws"))
	deps.InlineLimit = 32768
	acts := activities.New(deps)
	// The worker's host queue, as platform.Run serves it: a run's sandbox activities go to
	// the host that claimed it (workflows/hostq.go).
	hostQueue := api.HostQueueName(benchTaskQueue, "bench")
	acts.Host.SetHost(api.SandboxHost{Queue: hostQueue, Host: "bench"})
	w := worker.New(tc, benchTaskQueue, worker.Options{MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
		Interceptors: []interceptor.WorkerInterceptor{&activities.KeepAlive{}}})
	workflows.RegisterAll(w)
	demo.Register(w)
	acts.Register(w)
	w.RegisterActivity(&demo.Activities{})
	if register != nil {
		register(w)
	}
	hw := worker.New(tc, hostQueue, worker.Options{DisableWorkflowWorker: true, MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
		Interceptors: []interceptor.WorkerInterceptor{&activities.KeepAlive{}}})
	acts.Register(hw)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	if err := hw.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		hw.Stop()
		w.Stop()
		_ = acts.Close()
	})
	return tc, acts
}
