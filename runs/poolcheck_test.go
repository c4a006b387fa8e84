package runs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/api"
)

// poolClient answers the registry query with view and DescribeTaskQueue with pollers (by
// task queue); it records the task queues described and the runs started.
type poolClient struct {
	client.Client
	view      api.RegistryView
	pollers   map[string][]*taskqueuepb.PollerInfo
	described []string
	started   []string
	prompts   int
}

// DescribeWorkflowExecution: the registry has no memo of announcements here, so the check
// asks its query.
func (p *poolClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("no memo in this fake")
}

func (p *poolClient) UpdateWithStartWorkflow(context.Context, client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	p.prompts++
	return nil, errors.New("the fake answers no prompt")
}

func (p *poolClient) QueryWorkflowWithOptions(context.Context, *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	return &client.QueryWorkflowWithOptionsResponse{QueryResult: viewValue{p.view}}, nil
}

func (p *poolClient) DescribeTaskQueue(_ context.Context, tq string, typ enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	if typ != enumspb.TASK_QUEUE_TYPE_ACTIVITY {
		return nil, errors.New("the pool's claim queue is an activity queue")
	}
	p.described = append(p.described, tq)
	return &workflowservice.DescribeTaskQueueResponse{Pollers: p.pollers[tq]}, nil
}

func (p *poolClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	p.started = append(p.started, o.ID)
	return nil, nil
}

type viewValue struct{ v api.RegistryView }

func (v viewValue) HasValue() bool { return true }
func (v viewValue) Get(ptr any) error {
	b, err := json.Marshal(v.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

// A run of an agent whose sandbox names a pool starts only while a host of the pool polls
// its claim queue; otherwise it is refused naming the pool, and nothing starts. Agents
// without a pool are not checked.
func TestStartRefusesAPoolNoLiveHostServes(t *testing.T) {
	now := time.Now()
	ann := func(identity string, seen time.Time, pools map[string]string) api.RegisteredWorker {
		return api.RegisteredWorker{WorkerAnnouncement: api.WorkerAnnouncement{Identity: identity,
			Workflows: []string{api.WorkflowAgentRun}, Agents: []string{"trainer", "scribe"}, Pools: pools, TTLSeconds: 60}, SeenAt: seen}
	}
	view := api.RegistryView{Workflows: []string{api.WorkflowAgentRun}, Agents: []string{"scribe", "trainer"},
		Workers: []api.RegisteredWorker{
			ann("old", now.Add(-time.Hour), map[string]string{"trainer": "cpu"}), // a config since changed
			ann("new", now.Add(-time.Minute), map[string]string{"trainer": "gpu"}),
		}}
	poller := func(ago time.Duration) []*taskqueuepb.PollerInfo {
		return []*taskqueuepb.PollerInfo{{Identity: "host", LastAccessTime: timestamppb.New(now.Add(-ago))}}
	}
	in := func(agent string) json.RawMessage {
		b, _ := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: "train"})
		return b
	}
	for _, tc := range []struct {
		name    string
		agent   string
		pollers map[string][]*taskqueuepb.PollerInfo
		refused bool
	}{
		{"no host ever", "trainer", nil, true},
		{"only the old config's pool is served", "trainer", map[string][]*taskqueuepb.PollerInfo{"nexo@pool-cpu": poller(time.Second)}, true},
		{"the host went quiet long ago", "trainer", map[string][]*taskqueuepb.PollerInfo{"nexo@pool-gpu": poller(10 * time.Minute)}, true},
		{"a live host", "trainer", map[string][]*taskqueuepb.PollerInfo{"nexo@pool-gpu": poller(5 * time.Second)}, false},
		{"an agent without a pool", "scribe", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &poolClient{view: view, pollers: tc.pollers}
			c := New(fc, "default", "nexo")
			id, err := c.Start(context.Background(), StartRequest{Workflow: api.WorkflowAgentRun, Payload: in(tc.agent), ID: "run-1"})
			if !tc.refused {
				if err != nil || id != "run-1" || len(fc.started) != 1 {
					t.Fatalf("Start = %q, %v (started %v), want run-1 started", id, err, fc.started)
				}
				return
			}
			var np *NoPoolHostError
			if !errors.As(err, &np) || np.Pool != "gpu" || !strings.Contains(err.Error(), `sandbox pool "gpu", which no live host serves`) ||
				!strings.Contains(err.Error(), "worker --sandbox-host --pool gpu") {
				t.Fatalf("Start error = %v, want a NoPoolHostError naming pool gpu", err)
			}
			if len(fc.started) != 0 {
				t.Errorf("started %v although refused", fc.started)
			}
			if len(fc.described) != 1 || fc.described[0] != "nexo@pool-gpu" {
				t.Errorf("described %v, want the pool's claim queue nexo@pool-gpu", fc.described)
			}
		})
	}
}

// A prompt to a session of a pool agent is refused while no host of the pool is up, before
// anything is sent (no update-with-start).
func TestPromptRefusesAPoolNoLiveHostServes(t *testing.T) {
	view := api.RegistryView{Workflows: []string{api.WorkflowSession}, Agents: []string{"trainer"},
		Workers: []api.RegisteredWorker{{WorkerAnnouncement: api.WorkerAnnouncement{Identity: "w",
			Agents: []string{"trainer"}, Pools: map[string]string{"trainer": "gpu"}, TTLSeconds: 60}, SeenAt: time.Now()}}}
	fc := &poolClient{view: view}
	_, err := New(fc, "default", "nexo").Prompt(context.Background(), "trainer", "u1", "train", PromptOptions{})
	var np *NoPoolHostError
	if !errors.As(err, &np) || np.Pool != "gpu" {
		t.Fatalf("Prompt error = %v, want a NoPoolHostError naming pool gpu", err)
	}
	if fc.prompts != 0 {
		t.Errorf("%d prompts sent although refused", fc.prompts)
	}
}
