package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// ScheduleNotFoundError: no schedule has the name.
type ScheduleNotFoundError struct{ Name string }

func (e *ScheduleNotFoundError) Error() string {
	return fmt.Sprintf("no schedule %s (starter schedule list shows them)", e.Name)
}

// ScheduleExistsError: a schedule already has the name a new one asked for.
type ScheduleExistsError struct{ Name string }

func (e *ScheduleExistsError) Error() string {
	return fmt.Sprintf("schedule %s already exists; choose another name, or delete it first (starter schedule delete %s)", e.Name, e.Name)
}

// ScheduleSpecError: the server refused a schedule's cron spec. It comes wrapped in a
// BadRequestError.
type ScheduleSpecError struct {
	Name, Cron, Reason string
}

func (e *ScheduleSpecError) Error() string {
	return fmt.Sprintf("schedule %s: cron spec %q: %s (want 5 fields: minute hour day-of-month month day-of-week, e.g. \"0 2 * * *\")", e.Name, e.Cron, e.Reason)
}

// ScheduleRequest creates a schedule: runs of Workflow with Payload, started on the
// client's task queue every Every or at the times of Cron (exactly one of the two).
type ScheduleRequest struct {
	Name     string
	Workflow string
	Payload  json.RawMessage
	Every    time.Duration
	Cron     string
	// Unchecked skips asking the registry about the type and the input, as
	// StartRequest.Unchecked does.
	Unchecked bool
}

// validate checks what the request alone can tell, naming the field that is wrong.
func (r ScheduleRequest) validate() error {
	bad := func(format string, a ...any) error { return &BadRequestError{Msg: fmt.Sprintf(format, a...)} }
	if err := api.ValidateScheduleName(r.Name); err != nil {
		return bad("%v", err)
	}
	if r.Workflow == "" {
		return bad("schedule %s: workflow is empty: name the workflow type its runs are of", r.Name)
	}
	if len(r.Payload) > 0 && !json.Valid(r.Payload) {
		return bad("schedule %s: input is not valid JSON: %.80s", r.Name, r.Payload)
	}
	cron := strings.TrimSpace(r.Cron)
	switch {
	case r.Every == 0 && cron == "":
		return bad("schedule %s: give when it runs, an interval (every, e.g. 1h) or a cron spec (cron, e.g. \"0 2 * * *\")", r.Name)
	case r.Every != 0 && cron != "":
		return bad("schedule %s: give an interval (every) or a cron spec (cron), not both", r.Name)
	case r.Every < 0:
		return bad("schedule %s: interval (every) %v is negative", r.Name, r.Every)
	case r.Every != 0 && r.Every < api.MinScheduleEvery:
		return bad("schedule %s: interval (every) %v is shorter than %v, the shortest a schedule takes", r.Name, r.Every, api.MinScheduleEvery)
	case r.Every%time.Second != 0:
		return bad("schedule %s: interval (every) %v is not a whole number of seconds", r.Name, r.Every)
	case cron != "" && strings.ContainsAny(cron, "\n\r"):
		return bad("schedule %s: cron spec %q spans lines; give one spec", r.Name, r.Cron)
	}
	return nil
}

// memo is the request's spec as the schedule's memo keeps it.
func (r ScheduleRequest) memo() api.ScheduleMemo {
	if r.Every != 0 {
		return api.ScheduleMemo{Every: r.Every.String()}
	}
	return api.ScheduleMemo{Cron: strings.TrimSpace(r.Cron)}
}

// CreateSchedule creates a Temporal Schedule named api.ScheduleID(req.Name) whose action
// starts a run of req.Workflow with req.Payload on the task queue, as Start would (the
// same registry checks first: an unknown type is an UnknownTypeError, an unknown input
// field a BadRequestError wrapping an UnknownFieldError, and nothing is created). A start
// due while the schedule's previous run is still open is skipped (overlap policy skip). A
// taken name is a ScheduleExistsError; a spec the server refuses (a bad cron) a
// BadRequestError naming it.
func (c *Client) CreateSchedule(ctx context.Context, req ScheduleRequest) (api.Schedule, error) {
	if err := req.validate(); err != nil {
		return api.Schedule{}, err
	}
	payload := req.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if err := c.checkStart(ctx, req.Workflow, payload, req.Unchecked); err != nil {
		return api.Schedule{}, err
	}
	memo := req.memo()
	spec := client.ScheduleSpec{}
	if memo.Every != "" {
		spec.Intervals = []client.ScheduleIntervalSpec{{Every: req.Every}}
	} else {
		spec.CronExpressions = []string{memo.Cron}
	}
	id := api.ScheduleID(req.Name)
	attrs, runMemo := startAttributes(req.Workflow, payload)
	_, err := c.tc.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   id,
		Spec: spec,
		Action: &client.ScheduleWorkflowAction{
			// Temporal appends the scheduled time: nexo-schedule:nightly-2026-12-07T02:00:00Z.
			ID:                    id,
			Workflow:              req.Workflow,
			Args:                  []any{payload},
			TaskQueue:             c.taskQueue,
			TypedSearchAttributes: attrs,
			Memo:                  runMemo,
			StaticSummary:         c.pageSummary(req.Workflow+" run of schedule "+req.Name, "/schedules"),
			StaticDetails:         c.pageDetails("/schedules"),
		},
		// A run that outlasts its interval is not joined by a second one.
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Memo:    map[string]any{api.MemoSchedule: memo},
	})
	var ia *serviceerror.InvalidArgument
	switch {
	case errors.Is(err, temporal.ErrScheduleAlreadyRunning):
		return api.Schedule{}, &ScheduleExistsError{Name: req.Name}
	case errors.As(err, &ia) && memo.Cron != "":
		se := &ScheduleSpecError{Name: req.Name, Cron: memo.Cron, Reason: ia.Message}
		return api.Schedule{}, &BadRequestError{Msg: se.Error(), Err: se}
	case errors.As(err, &ia):
		return api.Schedule{}, &BadRequestError{Msg: fmt.Sprintf("schedule %s: %s", req.Name, ia.Message)}
	case err != nil:
		return api.Schedule{}, fmt.Errorf("create schedule %s: %w", req.Name, err)
	}
	return c.Schedule(ctx, req.Name)
}

// Schedule describes the schedule named name.
func (c *Client) Schedule(ctx context.Context, name string) (api.Schedule, error) {
	if err := api.ValidateScheduleName(name); err != nil {
		return api.Schedule{}, &BadRequestError{Msg: err.Error()}
	}
	desc, err := c.tc.ScheduleClient().GetHandle(ctx, api.ScheduleID(name)).Describe(ctx)
	if err != nil {
		return api.Schedule{}, scheduleError("describe", name, err)
	}
	return c.scheduleOf(ctx, name, desc), nil
}

// scheduleError maps a schedule call's error: NotFound becomes a ScheduleNotFoundError.
func scheduleError(op, name string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &ScheduleNotFoundError{Name: name}
	}
	return fmt.Errorf("%s schedule %s: %w", op, name, err)
}

// scheduleOf is the api.Schedule of a description. The last run's status is read from
// the run (a failed read leaves it empty rather than failing the whole answer).
func (c *Client) scheduleOf(ctx context.Context, name string, desc *client.ScheduleDescription) api.Schedule {
	s := api.Schedule{Name: name, Runs: desc.Info.NumActions, Skipped: desc.Info.NumActionsSkippedOverlap,
		CreatedAt: desc.Info.CreatedAt.UTC()}
	if a, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction); ok {
		if w, ok := a.Workflow.(string); ok {
			s.Workflow = w
		}
		if len(a.Args) > 0 {
			if p, ok := a.Args[0].(*commonpb.Payload); ok {
				s.Input, _ = c.firstPayload(ctx, &commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
			}
		}
	}
	if p := desc.Memo.GetFields()[api.MemoSchedule]; p != nil {
		var m api.ScheduleMemo
		if c.DataConverter.FromPayload(p, &m) == nil {
			s.Spec = m.Spec()
		}
	}
	if st := desc.Schedule.State; st != nil {
		s.Paused, s.Note = st.Paused, st.Note
	}
	if !s.Paused && len(desc.Info.NextActionTimes) > 0 {
		t := desc.Info.NextActionTimes[0].UTC()
		s.NextRun = &t
	}
	if n := len(desc.Info.RecentActions); n > 0 {
		last := desc.Info.RecentActions[n-1]
		if wf := last.StartWorkflowResult; wf != nil {
			run := &api.ScheduleRun{ID: wf.WorkflowID, At: last.ActualTime.UTC()}
			if d, err := c.tc.DescribeWorkflowExecution(ctx, wf.WorkflowID, wf.FirstExecutionRunID); err == nil {
				run.Status = summaryStatus(d.GetWorkflowExecutionInfo(), time.Now())
			}
			s.LastRun = run
		}
	}
	return s
}

// maxSchedules bounds what ListSchedules reads.
const maxSchedules = 1000

// ListSchedules returns every Nexo schedule (those whose id has api.ScheduleIDPrefix),
// sorted by name. The list comes from visibility, which may lag a create or a delete by a
// moment; each schedule's state is then read from the schedule itself, so a paused flag
// is never stale.
func (c *Client) ListSchedules(ctx context.Context) ([]api.Schedule, error) {
	it, err := c.tc.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 100})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	var names []string
	for it.HasNext() && len(names) < maxSchedules {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		if name, ok := strings.CutPrefix(e.ID, api.ScheduleIDPrefix); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]api.Schedule, 0, len(names))
	for _, name := range names {
		desc, err := c.tc.ScheduleClient().GetHandle(ctx, api.ScheduleID(name)).Describe(ctx)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue // deleted since the list was read
		}
		if err != nil {
			return nil, scheduleError("describe", name, err)
		}
		out = append(out, c.scheduleOf(ctx, name, desc))
	}
	return out, nil
}

// PauseSchedule stops the schedule from starting runs until UnpauseSchedule; note says
// why (shown by list). A run it already started is not touched.
func (c *Client) PauseSchedule(ctx context.Context, name, note string) error {
	if err := api.ValidateScheduleName(name); err != nil {
		return &BadRequestError{Msg: err.Error()}
	}
	if note == "" {
		note = "paused"
	}
	if err := c.tc.ScheduleClient().GetHandle(ctx, api.ScheduleID(name)).Pause(ctx, client.SchedulePauseOptions{Note: note}); err != nil {
		return scheduleError("pause", name, err)
	}
	return nil
}

// UnpauseSchedule lets a paused schedule start runs again, from its next time on (the
// times it missed while paused are not made up).
func (c *Client) UnpauseSchedule(ctx context.Context, name, note string) error {
	if err := api.ValidateScheduleName(name); err != nil {
		return &BadRequestError{Msg: err.Error()}
	}
	if note == "" {
		note = "unpaused"
	}
	if err := c.tc.ScheduleClient().GetHandle(ctx, api.ScheduleID(name)).Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}); err != nil {
		return scheduleError("unpause", name, err)
	}
	return nil
}

// DeleteSchedule removes the schedule; the runs it started stay (and an open one goes on).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if err := api.ValidateScheduleName(name); err != nil {
		return &BadRequestError{Msg: err.Error()}
	}
	if err := c.tc.ScheduleClient().GetHandle(ctx, api.ScheduleID(name)).Delete(ctx); err != nil {
		return scheduleError("delete", name, err)
	}
	return nil
}
