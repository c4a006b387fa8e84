package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/payloads"
)

// devTaskQueue is the task queue of the in-process worker of the devserver tests.
const devTaskQueue = "devserver-e2e"

// greet is the one activity of the test workflows.
func greet(_ context.Context, name string) (string, error) {
	return "hello " + name, nil
}

// greetWorkflow runs one activity: the shape whose latency we measure.
func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, greet, name).Get(ctx, &out)
	return out, err
}

// statusWorkflow upserts NexoStatus around the activity, so the attribute must be usable by
// history and visibility, not only listed by the frontend.
func statusWorkflow(ctx workflow.Context, name string) (string, error) {
	status := temporal.NewSearchAttributeKeyKeyword(api.SearchAttributeStatus)
	if err := workflow.UpsertTypedSearchAttributes(ctx, status.ValueSet("running")); err != nil {
		return "", err
	}
	out, err := greetWorkflow(ctx, name)
	if err != nil {
		return "", err
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, status.ValueSet("done")); err != nil {
		return "", err
	}
	return out, nil
}

// quietLogger logs warnings and errors to stderr: the server's and the SDK's Info lines would
// drown the test output.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// startDevServer starts a dev server with a quiet logger and logs how long it took.
func startDevServer(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	opts.Logger = quietLogger()
	for _, port := range []int{opts.FrontendPort, opts.UIPort} {
		if err := releasePort(port); err != nil { // a platform's port, held until now
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	srv, err := devserver.Start(ctx, opts)
	if err != nil {
		t.Fatalf("devserver.Start: %v", err)
	}
	t.Logf("dev server ready at %s in %v (ui %q)", srv.FrontendAddress(), time.Since(began).Round(time.Millisecond), srv.UIAddress())
	return srv
}

// connect dials the server and runs a worker for the test workflows. The returned func stops
// both (stop them before the server, or the worker logs its failing polls); cleanup calls it
// too.
func connect(t testing.TB, srv *devserver.Server) (client.Client, func()) {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:        srv.FrontendAddress(),
		Namespace:       api.DefaultNamespace,
		Logger:          sdklog.NewStructuredLogger(quietLogger()),
		ExternalStorage: payloads.ExternalStorage(memBlobs(t), 0),
	})
	if err != nil {
		t.Fatalf("dial %s: %v", srv.FrontendAddress(), err)
	}
	w := worker.New(c, devTaskQueue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterWorkflow(statusWorkflow)
	w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
	if err := w.Start(); err != nil {
		c.Close()
		t.Fatalf("start worker: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			w.Stop()
			c.Close()
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// runWorkflow starts wf on devTaskQueue (unless opts names another) and waits for its result.
func runWorkflow(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, wf any, args ...any) (string, error) {
	if opts.TaskQueue == "" {
		opts.TaskQueue = devTaskQueue
	}
	run, err := c.ExecuteWorkflow(ctx, opts, wf, args...)
	if err != nil {
		return "", fmt.Errorf("start workflow: %w", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		return "", fmt.Errorf("run workflow %s: %w", run.GetID(), err)
	}
	return out, nil
}

// pollUntil retries check until it returns nil or the deadline passes.
func pollUntil(t testing.TB, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDevServer(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "not", "yet", "there", "dev.db") // parents are created
	port := freePort(t)
	opts := devserver.Options{FrontendPort: port, DBPath: dbPath}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	srv := startDevServer(t, opts)
	if got, want := srv.FrontendAddress(), fmt.Sprintf("127.0.0.1:%d", port); got != want {
		t.Errorf("FrontendAddress() = %q, want %q", got, want)
	}
	if got := srv.UIAddress(); got != "" {
		t.Errorf("UIAddress() = %q, want \"\" without a UI port", got)
	}
	c, disconnect := connect(t, srv)

	const firstID = "devserver-e2e-first"
	got, err := runWorkflow(ctx, c, client.StartWorkflowOptions{ID: firstID}, statusWorkflow, "nexo")
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello nexo"; got != want {
		t.Fatalf("workflow result = %q, want %q", got, want)
	}

	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{
		Namespace: api.DefaultNamespace,
	})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	for _, name := range api.SearchAttributes {
		if typ, ok := attrs.GetCustomAttributes()[name]; !ok || typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			t.Fatalf("search attribute %s = %v (present %v), want Keyword; custom attributes: %v",
				name, typ, ok, attrs.GetCustomAttributes())
		}
	}

	t.Run("latency", func(t *testing.T) {
		measure := func(name string, opts client.StartWorkflowOptions) {
			const warmup, runs = 3, 20
			var took []time.Duration
			for i := range warmup + runs {
				began := time.Now()
				if _, err := runWorkflow(ctx, c, opts, greetWorkflow, "latency"); err != nil {
					t.Fatal(err)
				}
				if i >= warmup {
					took = append(took, time.Since(began))
				}
			}
			slices.Sort(took)
			t.Logf("one-activity workflow, %s, %d runs: median %v, p90 %v, min %v, max %v", name, runs,
				took[runs/2].Round(100*time.Microsecond), took[runs*9/10].Round(100*time.Microsecond),
				took[0].Round(100*time.Microsecond), took[runs-1].Round(100*time.Microsecond))
		}
		measure("regular start", client.StartWorkflowOptions{})
		measure("eager start", client.StartWorkflowOptions{EnableEagerStart: true})
	})

	disconnect()
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop (must be idempotent): %v", err)
	}

	// Same file, same port: the earlier run and its search attribute are still there, and an
	// attribute asked for now is added to the existing namespace.
	const extra = "DevserverE2EExtra"
	opts.SearchAttributes = map[string]enumspb.IndexedValueType{extra: enumspb.INDEXED_VALUE_TYPE_INT}
	srv = startDevServer(t, opts)
	defer srv.Stop()
	c, disconnect = connect(t, srv)
	defer disconnect() // deferred after srv.Stop, so it runs first
	attrs, err = c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{
		Namespace: api.DefaultNamespace,
	})
	if err != nil {
		t.Fatalf("ListSearchAttributes after restart: %v", err)
	}
	for name, want := range map[string]enumspb.IndexedValueType{
		api.SearchAttributeStatus:        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		api.SearchAttributeApprovalAgent: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		extra:                            enumspb.INDEXED_VALUE_TYPE_INT,
	} {
		if got := attrs.GetCustomAttributes()[name]; got != want {
			t.Errorf("search attribute %s after restart = %v, want %v", name, got, want)
		}
	}
	desc, err := c.DescribeWorkflowExecution(ctx, firstID, "")
	if err != nil {
		t.Fatalf("DescribeWorkflowExecution(%s) after restart: %v", firstID, err)
	}
	if got, want := desc.GetWorkflowExecutionInfo().GetStatus(), enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED; got != want {
		t.Fatalf("status of %s after restart = %v, want %v", firstID, got, want)
	}
	pollUntil(t, 10*time.Second, "list runs by NexoStatus after restart", func(ctx context.Context) error {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = 'done' AND WorkflowId = '%s'", api.SearchAttributeStatus, firstID),
		})
		if err != nil {
			return err
		}
		if n := len(resp.GetExecutions()); n != 1 {
			return fmt.Errorf("got %d executions, want 1", n)
		}
		return nil
	})
	// The server keeps visibility indexes only for the usual filters; a list on other columns
	// still answers (by a scan).
	pollUntil(t, 10*time.Second, "list runs by unindexed columns", func(ctx context.Context) error {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("HistoryLength > 3 AND ExecutionDuration > 0 AND TaskQueue = '%s' AND WorkflowId = '%s'",
				desc.GetWorkflowExecutionInfo().GetTaskQueue(), firstID),
		})
		if err != nil {
			return err
		}
		if n := len(resp.GetExecutions()); n != 1 {
			return fmt.Errorf("got %d executions, want 1", n)
		}
		return nil
	})
	// And it still runs new work.
	if _, err := runWorkflow(ctx, c, client.StartWorkflowOptions{}, greetWorkflow, "again"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// TestDevServerWebUI checks the UI serves its page, and that Stop releases its port.
func TestDevServerWebUI(t *testing.T) {
	t.Parallel()
	uiPort := freePort(t)
	srv := startDevServer(t, devserver.Options{UIPort: uiPort}) // in memory, frontend port picked
	defer srv.Stop()
	if got, want := srv.UIAddress(), fmt.Sprintf("http://127.0.0.1:%d", uiPort); got != want {
		t.Fatalf("UIAddress() = %q, want %q", got, want)
	}
	pollUntil(t, 10*time.Second, "GET "+srv.UIAddress(), func(ctx context.Context) error {
		return httpGetContains(ctx, srv.UIAddress()+"/", "<html")
	})
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	pollUntil(t, 10*time.Second, "listen on the UI port after Stop", func(context.Context) error {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", uiPort))
		if err != nil {
			return err
		}
		return l.Close()
	})
}

// httpGetContains GETs url and checks the body contains want.
func httpGetContains(ctx context.Context, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if !strings.Contains(strings.ToLower(string(body)), want) {
		return fmt.Errorf("GET %s: body lacks %q", url, want)
	}
	return nil
}

// TestWebUIHistoryIsQuiet: the Nexo run page of `worker --dev` links the run in the
// Temporal Web UI; opening it there (the UI asks the frontend for history pages larger
// than the server serves) logs no warning in the worker terminal.
func TestWebUIHistoryIsQuiet(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.start()
	r := p.starter("run", "DocumentApproval", "--input", `{"doc_id":"42"}`, "--wait")
	const started = "started DocumentApproval run "
	i := strings.Index(r.stderr, started)
	if r.code != 0 || i < 0 {
		t.Fatalf("run --wait: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.Fields(r.stderr[i+len(started):])[0]
	link := fmt.Sprintf(`href="http://127.0.0.1:%d/namespaces/default/workflows/%s"`, p.ui, id)
	pollUntil(t, 10*time.Second, "the run page's Temporal UI link", func(ctx context.Context) error {
		return httpGetContains(ctx, fmt.Sprintf("http://127.0.0.1:%d/runs/%s", p.gateway, id), strings.ToLower(link))
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces/default/workflows/%s/history?maximumPageSize=1000", p.ui, id)
	for range 3 {
		pollUntil(t, 10*time.Second, "GET "+url, func(ctx context.Context) error {
			return httpGetContains(ctx, url, "workflowexecutionstarted")
		})
	}
	time.Sleep(200 * time.Millisecond) // the worker's stderr is copied asynchronously
	if out := p.output(); strings.Contains(out, "page size is larger than threshold") {
		t.Errorf("the worker logged the history page-size warning:\n%s", out)
	}
}
