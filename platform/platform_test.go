package platform

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/examples/demo"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestTemporalServerOnlyInDev: the authoring API and the platform build without the
// Temporal server; the dev option package is where it comes in.
func TestTemporalServerOnlyInDev(t *testing.T) {
	deps := func(pkg string) []string {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	server := func(pkgs []string) []string {
		var out []string
		for _, p := range pkgs {
			if strings.HasPrefix(p, "go.temporal.io/server/") {
				out = append(out, p)
			}
		}
		return out
	}
	for _, pkg := range []string{"./platform", "./workflows/...", "./api", "./examples/demo"} {
		if s := server(deps(pkg)); len(s) > 0 {
			t.Errorf("%s links the Temporal server (%d packages, such as %s)", pkg, len(s), s[0])
		}
	}
	if s := server(deps("./platform/dev")); len(s) == 0 {
		t.Errorf("./platform/dev links no go.temporal.io/server package; the embedded server is not where it should be")
	}
}

type fakeRegistry struct{ workflows, activities []string }

func (f *fakeRegistry) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	f.workflows = append(f.workflows, o.Name)
}

func (f *fakeRegistry) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	if slices.Contains(f.activities, o.Name) {
		panic("activity type \"" + o.Name + "\" is already registered")
	}
	f.activities = append(f.activities, o.Name)
}

type greetInput struct{ Name string }

func greet(ctx workflow.Context, in greetInput) (string, error) { return "hi " + in.Name, nil }

type orders struct{}

func (orders) Lookup(ctx context.Context, id string) (string, error) { return id, nil }
func (orders) Refund(ctx context.Context, id string) (bool, error)   { return true, nil }

func TestRegisterWorkflowsAddsTheUsersToTheShipped(t *testing.T) {
	p, err := New(config.Config{}, Workflow("Greet", greet))
	if err != nil {
		t.Fatal(err)
	}
	var r fakeRegistry
	p.RegisterWorkflows(&r)
	for _, want := range []string{"Greet", api.WorkflowAgentRun, api.WorkflowSession, api.WorkflowRegistry, api.WorkflowTokenLimiter, api.WorkflowNotifier} {
		if !slices.Contains(r.workflows, want) {
			t.Errorf("RegisterWorkflows registered %v, missing %s", r.workflows, want)
		}
	}
	// The demos are the shipped worker's, not every platform's.
	for _, unwanted := range []string{demo.DocumentApprovalName, demo.BuildDashboardName} {
		if slices.Contains(r.workflows, unwanted) {
			t.Errorf("a platform without platform.Workflows(demo.Register) registered %s", unwanted)
		}
	}
}

// TestWorkflowsAddsTheDemos: platform.Workflows(demo.Register) and
// platform.Activity(demo.Activities{}) give a platform the Quickstart's demos under the
// names the demos call, as the shipped worker has them.
func TestWorkflowsAddsTheDemos(t *testing.T) {
	p, err := New(config.Config{}, Workflows(demo.Register), Activity(demo.Activities{}))
	if err != nil {
		t.Fatal(err)
	}
	var r fakeRegistry
	p.RegisterWorkflows(&r)
	for _, want := range []string{demo.DocumentApprovalName, demo.BuildDashboardName, api.WorkflowAgentRun} {
		if !slices.Contains(r.workflows, want) {
			t.Errorf("RegisterWorkflows registered %v, missing %s", r.workflows, want)
		}
	}
	if err := p.registerActivities(&r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{api.ActivityFetchDocument, api.ActivityPublishDocument, api.ActivityFetchMetric} {
		if !slices.Contains(r.activities, want) {
			t.Errorf("registered activities %v, missing %s", r.activities, want)
		}
	}
}

func TestActivitiesFunctionsAndStructs(t *testing.T) {
	p, err := New(config.Config{},
		Activity(orders{}, activity.RegisterOptions{Name: "Orders."}),
		Activity(func(ctx context.Context) error { return nil }, activity.RegisterOptions{Name: "Ping"}))
	if err != nil {
		t.Fatal(err)
	}
	var r fakeRegistry
	if err := p.registerActivities(&r); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Orders.Lookup", "Orders.Refund", "Ping"}; !slices.Equal(r.activities, want) {
		t.Errorf("registered %v, want %v", r.activities, want)
	}
	// A second registration of a name is an error naming it, not a panic.
	p, _ = New(config.Config{}, Activity(orders{}), Activity(orders{}))
	err = p.registerActivities(&fakeRegistry{})
	if err == nil || !strings.Contains(err.Error(), "register activity Lookup") || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate activity: err = %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"shipped name", Workflow(api.WorkflowAgentRun, greet), "workflow type AgentRun is registered 2 times"},
		{"demos twice", func(o *options) { Workflows(demo.Register)(o); Workflows(demo.Register)(o) }, "workflow type DocumentApproval is registered 2 times"},
		{"nil register function", Workflows(nil), "platform.Workflows: nil register function"},
		{"empty name", Workflow(" ", greet), "workflow type name is empty"},
		{"two options", Workflow("Greet", greet, workflows.Options{}, workflows.Options{}), "2 workflows.Options given"},
		{"not an activity", Activity(42), "int is neither a function nor a struct"},
		{"nil activity", Activity(nil), "nil activity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(config.Config{}, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestDevNeedsTheDevServer: a worker built without platform/dev says what to add when
// asked for --dev, with the usage exit code; it starts nothing.
func TestDevNeedsTheDevServer(t *testing.T) {
	c := Command{Name: "custom-worker", Options: []Option{Workflow("Greet", greet)}}
	var stdout, stderr bytes.Buffer
	err := c.Run(context.Background(), []string{"--dev"}, &stdout, &stderr)
	if code := c.ExitCode(err, &stderr); code != 2 || !strings.Contains(stderr.String(), "custom-worker: --dev needs the embedded Temporal server") ||
		!strings.Contains(stderr.String(), "dev.Server()") || !strings.Contains(stderr.String(), "Usage: custom-worker [--dev]") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q", stdout.String())
	}
}

// TestUserActivitiesAreKeptAlive: a user's activity (platform.Activity) on a worker with
// the platform's interceptors (keepAlive) heartbeats while it runs, so under a heartbeat
// timeout shorter than its run it completes instead of timing out.
func TestUserActivitiesAreKeptAlive(t *testing.T) {
	t.Parallel()
	slow := func(ctx context.Context, id string) (string, error) {
		time.Sleep(600 * time.Millisecond) // never heartbeats itself
		return "refunded " + id, nil
	}
	p, err := New(config.Config{}, Activity(slow, activity.RegisterOptions{Name: "Refund"}))
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: keepAlive()})
	if err := p.registerActivities(env); err != nil {
		t.Fatal(err)
	}
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 200 * time.Millisecond,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out string
		err := workflow.ExecuteActivity(ctx, "Refund", "o-1").Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "RefundTest"})
	env.ExecuteWorkflow("RefundTest")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a 600 ms user activity under a 200 ms heartbeat timeout: %v (want it kept alive)", err)
	}
}
