package runs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// memoryClient answers the nexo.run query with rec (as a worker replaying the run would,
// whatever its close status) and describes the run with status; it records signals.
type memoryClient struct {
	client.Client
	rec     api.Record
	status  enumspb.WorkflowExecutionStatus
	signals []string
	// updates are the nexo.decide requests sent; refuse, when set, is the validator's answer.
	updates []api.DecideRequest
	refuse  error
}

// UpdateWorkflow answers nexo.decide as the run would: NotFound once the run closed,
// else refuse, else the decision recorded.
func (m *memoryClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if m.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, serviceerror.NewNotFound("workflow execution already completed")
	}
	req := o.Args[0].(api.DecideRequest)
	m.updates = append(m.updates, req)
	return decideHandle{req: req, err: m.refuse}, nil
}

type decideHandle struct {
	client.WorkflowUpdateHandle
	req api.DecideRequest
	err error
}

func (h decideHandle) Get(_ context.Context, ptr any) error {
	if h.err != nil {
		return h.err
	}
	*ptr.(*api.DecideResult) = api.DecideResult{CallID: h.req.CallID, Tool: "write_file", Action: h.req.Action, EditedArgs: h.req.Args}
	return nil
}

type recordValue struct{ rec api.Record }

func (v recordValue) HasValue() bool { return true }
func (v recordValue) Get(ptr any) error {
	b, err := json.Marshal(v.rec)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func (m *memoryClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return recordValue{m.rec}, nil
}

func (m *memoryClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: m.status}}, nil
}

func (m *memoryClient) SignalWorkflow(_ context.Context, _, _, name string, _ any) error {
	m.signals = append(m.signals, name)
	return nil
}

func suspendedRecord(t *testing.T, key string, v any) api.Record {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return api.Record{ID: "r1", Workflow: "X", Status: api.StatusSuspended, State: map[string]json.RawMessage{key: raw}}
}

// TestDecideReportsTheRealStatus: deciding a run that was terminated while it waited is
// refused with its real status, not the "suspended" its replayed memory answers with.
func TestDecideReportsTheRealStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  api.Record
		d    Decision
	}{
		{"another call", suspendedRecord(t, api.StateApproval, api.ApprovalInfo{CallID: "1.1", Tool: "shell"}), Decision{Approved: true, CallID: "9.9"}},
		{"a call on a workflow pause", suspendedRecord(t, api.StateSuspend, api.SuspendInfo{Reason: "awaiting approval"}), Decision{Approved: true, CallID: "1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memoryClient{rec: tc.rec, status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}
			_, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", tc.d)
			var se *StateError
			if !errors.As(err, &se) || se.Status != api.StatusInterrupted {
				t.Fatalf("Decide on a terminated run: %v, want a StateError with status interrupted", err)
			}
			if len(m.signals) != 0 {
				t.Errorf("signalled %v", m.signals)
			}
		})
	}
	t.Run("resume", func(t *testing.T) {
		m := &memoryClient{rec: suspendedRecord(t, api.StateApproval, api.ApprovalInfo{CallID: "1.1", Tool: "shell"}),
			status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}
		err := New(m, "default", "nexo").Resume(context.Background(), "r1", ResumeRequest{})
		var se *StateError
		if !errors.As(err, &se) || se.Status != api.StatusInterrupted {
			t.Fatalf("Resume on a terminated run: %v, want a StateError with status interrupted", err)
		}
	})
}

// TestApproveAlwaysOnAWorkflowPause: --always means nothing to a workflow's own pause, so
// it is refused rather than dropped.
func TestApproveAlwaysOnAWorkflowPause(t *testing.T) {
	m := &memoryClient{rec: suspendedRecord(t, api.StateSuspend, api.SuspendInfo{Reason: "awaiting approval"}),
		status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	_, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", Decision{Approved: true, Always: true})
	var br *BadRequestError
	want := "run r1 is paused by the workflow (awaiting approval), not by a tool call: --always approves a tool for the rest of the run, so it applies to tool calls only; approve without it"
	if !errors.As(err, &br) || err.Error() != want {
		t.Fatalf("approve --always on a workflow pause: %v, want a refusal saying what --always means:\n%s", err, want)
	}
	if len(m.signals) != 0 {
		t.Errorf("signalled %v", m.signals)
	}
	if _, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", Decision{Approved: true}); err != nil || len(m.signals) != 1 {
		t.Errorf("approve without --always: %v, signals %v", err, m.signals)
	}
}

// TestDecideAToolCallIsAnUpdate: a decision on a pending tool call travels as nexo.decide
// with the sha256 the record shows, never as a signal; the run's refusal comes back as a
// RefusedError carrying the run's own message.
func TestDecideAToolCallIsAnUpdate(t *testing.T) {
	pending := api.ApprovalInfo{CallID: "1.1", Tool: "write_file", Args: json.RawMessage(`{"path":"a"}`), ArgsSHA256: "abc"}
	m := &memoryClient{rec: suspendedRecord(t, api.StateApproval, pending), status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	c := New(m, "default", "nexo")
	what, _, err := c.Decide(context.Background(), "r1", Decision{Approved: true, Args: json.RawMessage(`{"path":"b"}`), By: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `approved tool call 1.1 (write_file) of run r1 with edited arguments {"path":"b"}`; what != want {
		t.Errorf("Decide said %q, want %q", what, want)
	}
	if len(m.signals) != 0 || len(m.updates) != 1 {
		t.Fatalf("signals %v, updates %+v", m.signals, m.updates)
	}
	if u := m.updates[0]; u.CallID != "1.1" || u.Action != api.DecideApprove || u.ArgsSHA256 != "abc" || u.By != "ada" {
		t.Errorf("update sent = %+v", u)
	}

	m.refuse = temporal.NewApplicationError(`unknown tool call "9.9": the pending call is 1.1 (write_file)`, "")
	_, _, err = c.Decide(context.Background(), "r1", Decision{Approved: true, CallID: "9.9"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Msg != `unknown tool call "9.9": the pending call is 1.1 (write_file)` {
		t.Fatalf("refused decision: %v, want a RefusedError with the run's message", err)
	}
	if u := m.updates[1]; u.ArgsSHA256 != "" {
		t.Errorf("a decision on another call carried the pending call's sha %q", u.ArgsSHA256)
	}

	_, _, err = c.Decide(context.Background(), "r1", Decision{Action: api.DecideAnswer, Result: "42"})
	if err == nil || m.updates[2].Action != api.DecideAnswer || m.updates[2].Result != "42" {
		t.Errorf("answer: %v, sent %+v", err, m.updates[2])
	}
}

// TestEditAndAnswerOnAWorkflowPause: a workflow's own pause has no arguments to edit and
// no tool to answer for: refused, nothing sent.
func TestEditAndAnswerOnAWorkflowPause(t *testing.T) {
	m := &memoryClient{rec: suspendedRecord(t, api.StateSuspend, api.SuspendInfo{Reason: "awaiting approval"}),
		status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	for _, d := range []Decision{{Action: api.DecideAnswer, Result: "x"}, {Approved: true, Args: json.RawMessage(`{}`)}} {
		_, _, err := New(m, "default", "nexo").Decide(context.Background(), "r1", d)
		var br *BadRequestError
		if !errors.As(err, &br) || !strings.Contains(err.Error(), "apply to tool calls only") {
			t.Errorf("%+v on a workflow pause: %v", d, err)
		}
	}
	if len(m.signals)+len(m.updates) != 0 {
		t.Errorf("sent signals %v updates %v", m.signals, m.updates)
	}
}

// TestDecideOnAWorkerOlderThanTheUpdate: a run whose worker has no nexo.decide handler (a
// rolling deploy) still takes approve and deny, as the signal; edit and answer are refused
// with what they need.
func TestDecideOnAWorkerOlderThanTheUpdate(t *testing.T) {
	pending := api.ApprovalInfo{CallID: "1.1", Tool: "shell", Args: json.RawMessage(`{"command":"ls"}`)}
	m := &memoryClient{rec: suspendedRecord(t, api.StateApproval, pending), status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		refuse: temporal.NewApplicationError("unknown update nexo.decide. KnownUpdates=[]", "")}
	c := New(m, "default", "nexo")
	what, _, err := c.Decide(context.Background(), "r1", Decision{Approved: false, Reason: "no"})
	if err != nil || what != "denied tool call 1.1 (shell) of run r1" || len(m.signals) != 1 || m.signals[0] != api.SignalApproval {
		t.Fatalf("deny on an older worker: %q, %v, signals %v", what, err, m.signals)
	}
	if m.updates[0].ArgsSHA256 != api.ArgsSHA256(pending.Args) {
		t.Errorf("a record without args_sha256 sent %q, want the sha256 of its args", m.updates[0].ArgsSHA256)
	}
	_, _, err = c.Decide(context.Background(), "r1", Decision{Action: api.DecideAnswer, Result: "x"})
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(re.Msg, "predates nexo.decide") || len(m.signals) != 1 {
		t.Errorf("answer on an older worker: %v, signals %v", err, m.signals)
	}
}
