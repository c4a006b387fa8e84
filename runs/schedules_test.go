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
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// scheduleClient is a starterClient whose schedule client records what is created and
// answers Create with createErr.
type scheduleClient struct {
	starterClient
	created   []client.ScheduleOptions
	createErr error
}

func (s *scheduleClient) ScheduleClient() client.ScheduleClient { return fakeSchedules{s} }

type fakeSchedules struct{ s *scheduleClient }

func (f fakeSchedules) Create(_ context.Context, o client.ScheduleOptions) (client.ScheduleHandle, error) {
	if f.s.createErr != nil {
		return nil, f.s.createErr
	}
	f.s.created = append(f.s.created, o)
	return nil, nil
}

func (f fakeSchedules) List(context.Context, client.ScheduleListOptions) (client.ScheduleListIterator, error) {
	return nil, errors.New("fake: List not supported")
}

func (f fakeSchedules) GetHandle(_ context.Context, id string) client.ScheduleHandle {
	return fakeHandle{s: f.s, id: id}
}

// fakeHandle describes the last schedule created with its id, and is NotFound otherwise.
type fakeHandle struct {
	client.ScheduleHandle
	s  *scheduleClient
	id string
}

func (h fakeHandle) Describe(context.Context) (*client.ScheduleDescription, error) {
	for _, o := range h.s.created {
		if o.ID == h.id {
			return &client.ScheduleDescription{Schedule: client.Schedule{Action: o.Action, State: &client.ScheduleState{}},
				Info: client.ScheduleInfo{NextActionTimes: []time.Time{time.Unix(1800000000, 0)}}}, nil
		}
	}
	return nil, serviceerror.NewNotFound("schedule not found")
}

func (h fakeHandle) Pause(context.Context, client.SchedulePauseOptions) error {
	return serviceerror.NewNotFound("schedule not found")
}

// TestScheduleRequestNamesWhatIsWrong: a request the client can judge alone is refused
// with a BadRequestError naming the field, before anything is asked of Temporal.
func TestScheduleRequestNamesWhatIsWrong(t *testing.T) {
	ok := ScheduleRequest{Name: "nightly", Workflow: "BuildDashboard", Every: time.Hour}
	for _, tc := range []struct {
		name string
		edit func(*ScheduleRequest)
		want string // "" = valid
	}{
		{"interval", func(*ScheduleRequest) {}, ""},
		{"cron", func(r *ScheduleRequest) { r.Every, r.Cron = 0, "0 2 * * *" }, ""},
		{"neither", func(r *ScheduleRequest) { r.Every = 0 }, "give when it runs, an interval (every, e.g. 1h) or a cron spec"},
		{"both", func(r *ScheduleRequest) { r.Cron = "0 2 * * *" }, "an interval (every) or a cron spec (cron), not both"},
		{"blank cron", func(r *ScheduleRequest) { r.Every, r.Cron = 0, "   " }, "give when it runs"},
		{"negative", func(r *ScheduleRequest) { r.Every = -time.Second }, "interval (every) -1s is negative"},
		{"too short", func(r *ScheduleRequest) { r.Every = 500 * time.Millisecond }, "interval (every) 500ms is shorter than 1s"},
		{"fractional", func(r *ScheduleRequest) { r.Every = 1500 * time.Millisecond }, "1.5s is not a whole number of seconds"},
		{"bad name", func(r *ScheduleRequest) { r.Name = "my schedule" }, `schedule name "my schedule"`},
		{"no name", func(r *ScheduleRequest) { r.Name = "" }, "schedule name is empty"},
		{"no workflow", func(r *ScheduleRequest) { r.Workflow = "" }, "workflow is empty"},
		{"bad JSON", func(r *ScheduleRequest) { r.Payload = json.RawMessage(`{"a":`) }, "input is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.edit(&req)
			fake := &scheduleClient{}
			_, err := New(fake, "default", "nexo").CreateSchedule(context.Background(), req)
			if tc.want == "" {
				if err != nil || len(fake.created) != 1 {
					t.Fatalf("CreateSchedule(%+v) = %v, created %d; want it created", req, err, len(fake.created))
				}
				return
			}
			var br *BadRequestError
			if !errors.As(err, &br) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CreateSchedule(%+v) = %v, want a BadRequestError saying %q", req, err, tc.want)
			}
			if len(fake.created) != 0 {
				t.Errorf("CreateSchedule(%+v) created a schedule", req)
			}
		})
	}
}

// TestCreateScheduleStartsRunsAsStartDoes: the schedule's action starts the workflow on the
// client's task queue with the input, overlapping starts are skipped, the spec the user
// wrote is kept, and the registry's checks refuse what `starter run` would refuse.
func TestCreateScheduleStartsRunsAsStartDoes(t *testing.T) {
	offered := &api.RegistryView{Workflows: []string{"BuildDashboard"},
		Inputs: map[string][]string{"BuildDashboard": {"metrics", "title"}}, Workers: []api.RegisteredWorker{{}}}
	fake := &scheduleClient{starterClient: starterClient{registry: offered}}
	c := New(fake, "default", "nexo")
	got, err := c.CreateSchedule(context.Background(), ScheduleRequest{Name: "nightly", Workflow: "BuildDashboard",
		Payload: json.RawMessage(`{"title":"Nightly"}`), Cron: " 0 2 * * * "})
	if err != nil {
		t.Fatal(err)
	}
	o := fake.created[0]
	a := o.Action.(*client.ScheduleWorkflowAction)
	if o.ID != "nexo-schedule:nightly" || a.ID != "nexo-schedule:nightly" || a.TaskQueue != "nexo" || a.Workflow != "BuildDashboard" {
		t.Errorf("schedule %s starts %v (id %s) on %s; want nexo-schedule:nightly starting BuildDashboard (id nexo-schedule:nightly) on nexo", o.ID, a.Workflow, a.ID, a.TaskQueue)
	}
	if len(a.Args) != 1 || string(a.Args[0].(json.RawMessage)) != `{"title":"Nightly"}` {
		t.Errorf("action args %v, want the input alone", a.Args)
	}
	if o.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Errorf("overlap policy %v, want skip", o.Overlap)
	}
	if len(o.Spec.CronExpressions) != 1 || o.Spec.CronExpressions[0] != "0 2 * * *" || len(o.Spec.Intervals) != 0 {
		t.Errorf("spec %+v, want the cron 0 2 * * * alone", o.Spec)
	}
	if m := o.Memo[api.MemoSchedule].(api.ScheduleMemo); m.Spec() != "cron 0 2 * * *" {
		t.Errorf("memo spec %q, want cron 0 2 * * *", m.Spec())
	}
	if got.Name != "nightly" || got.Workflow != "BuildDashboard" || got.NextRun == nil {
		t.Errorf("CreateSchedule = %+v, want nightly of BuildDashboard with its next run", got)
	}

	for _, tc := range []struct {
		name string
		req  ScheduleRequest
		want string
	}{
		{"unknown workflow", ScheduleRequest{Name: "a", Workflow: "BuildDashbord", Every: time.Hour}, `offers workflow type "BuildDashbord"`},
		{"unknown field", ScheduleRequest{Name: "b", Workflow: "BuildDashboard", Payload: json.RawMessage(`{"titel":"x"}`), Every: time.Hour},
			`unknown field "titel" (did you mean "title"?)`},
	} {
		fake.created = nil
		if _, err := c.CreateSchedule(context.Background(), tc.req); err == nil || !strings.Contains(err.Error(), tc.want) || len(fake.created) != 0 {
			t.Errorf("%s: CreateSchedule = %v (created %d), want refused with %q", tc.name, err, len(fake.created), tc.want)
		}
		tc.req.Unchecked = true
		if _, err := c.CreateSchedule(context.Background(), tc.req); err != nil {
			t.Errorf("%s, unchecked: CreateSchedule = %v, want it created", tc.name, err)
		}
	}
}

// TestCreateScheduleErrors: a taken name and a cron the server refuses are errors of their
// own, naming the schedule and the spec; an unknown name is a ScheduleNotFoundError.
func TestCreateScheduleErrors(t *testing.T) {
	fake := &scheduleClient{createErr: temporal.ErrScheduleAlreadyRunning}
	c := New(fake, "default", "nexo")
	_, err := c.CreateSchedule(context.Background(), ScheduleRequest{Name: "nightly", Workflow: "X", Every: time.Hour})
	var ex *ScheduleExistsError
	if !errors.As(err, &ex) || !strings.Contains(err.Error(), "schedule nightly already exists") {
		t.Errorf("taken name: %v, want a ScheduleExistsError", err)
	}
	fake.createErr = serviceerror.NewInvalidArgument("invalid cron string: \"61 * * * *\"")
	_, err = c.CreateSchedule(context.Background(), ScheduleRequest{Name: "nightly", Workflow: "X", Cron: "61 * * * *"})
	var br *BadRequestError
	var se *ScheduleSpecError
	if !errors.As(err, &br) || !errors.As(err, &se) || !strings.Contains(err.Error(), `cron spec "61 * * * *"`) {
		t.Errorf("bad cron: %v, want a BadRequestError with a ScheduleSpecError naming the cron spec", err)
	}
	var nf *ScheduleNotFoundError
	if err := c.PauseSchedule(context.Background(), "nope", ""); !errors.As(err, &nf) || err.Error() != "no schedule nope (starter schedule list shows them)" {
		t.Errorf("pause of an unknown schedule: %v, want a ScheduleNotFoundError", err)
	}
	if _, err := c.Schedule(context.Background(), "nope"); !errors.As(err, &nf) {
		t.Errorf("describe of an unknown schedule: %v, want a ScheduleNotFoundError", err)
	}
}
