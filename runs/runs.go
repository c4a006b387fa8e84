// Package runs is the client side of the compatibility layer: it starts runs, reads their
// run records, lists them, follows them and sends them decisions, talking to Temporal only.
// The starter CLI and the HTTP gateway are thin shells over a Client, so both give the
// same answers and the same errors.
//
// Every operation that changes a run validates it against its record first, so a user gets
// "run X is not suspended (done)" instead of a signal that silently does nothing.
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/payloads"
)

// NotFoundError: no run has the id.
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("no run %s", e.ID) }

// StateError: the run is not in a status the operation needs.
type StateError struct {
	ID     string
	Status api.Status
	Want   string // e.g. "suspended"
	Hint   string
}

func (e *StateError) Error() string {
	msg := fmt.Sprintf("run %s is not %s (%s)", e.ID, e.Want, e.Status)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// BadRequestError: the caller's input cannot be used. Err, when set, is the typed detail
// (an UnknownFieldError).
type BadRequestError struct {
	Msg string
	Err error
}

func (e *BadRequestError) Error() string { return e.Msg }

func (e *BadRequestError) Unwrap() error { return e.Err }

// ExistsError: a run already has the id a new run asked for (open or closed: Temporal
// keeps a closed run's id until its retention ends).
type ExistsError struct {
	ID       string
	Workflow string
	Status   api.Status
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("run %s already exists (%s, %s); choose another --id", e.ID, e.Workflow, e.Status)
}

// NoWorkerError: nothing answered the run's query in time.
type NoWorkerError struct {
	ID        string
	TaskQueue string
	Err       error
}

func (e *NoWorkerError) Error() string {
	if lead := StoreCorrupt(e.Err); lead != "" {
		// The worker did answer: its workflow task cannot load what the run needs, so no
		// worker ever will. Asking whether one polls sends the user after the wrong problem.
		return fmt.Sprintf("run %s: %s; no worker can load the run to answer or run it: restore the blob from a backup of the store, or end the run with `starter cancel %s --terminate`", e.ID, lead, e.ID)
	}
	return fmt.Sprintf("run %s: no worker answered the %s query (is a worker polling task queue %q?): %v", e.ID, api.QueryRun, e.TaskQueue, e.Err)
}

func (e *NoWorkerError) Unwrap() error { return e.Err }

// StoreCorrupt is the part of err's text, or of msg's, from "the stored bytes of …" on
// (api.StoreCorruptLead: a blob the run needs does not match its sha256), "" when it says
// nothing of the kind. Every layer between the store and the user (a storage driver, a
// failed workflow task, a query) puts its words in front; this is what leads.
func StoreCorrupt(err error) string {
	if err == nil {
		return ""
	}
	return StoreCorruptText(err.Error())
}

// StoreCorruptText is StoreCorrupt of a message.
func StoreCorruptText(msg string) string {
	i := strings.Index(msg, api.StoreCorruptLead)
	if i < 0 {
		return ""
	}
	return msg[i:]
}

// LeadStoreCorrupt rewrites a run's error so that a store_corrupt failure leads, with what
// it happened in after it ("agent a: model call 2: CompleteChat: the stored bytes of …"
// becomes "the stored bytes of … (in agent a: model call 2: CompleteChat)"); any other
// message is returned as is.
func LeadStoreCorrupt(msg string) string {
	i := strings.Index(msg, api.StoreCorruptLead)
	if i <= 0 {
		return msg
	}
	return msg[i:] + " (in " + strings.TrimRight(msg[:i], ": ") + ")"
}

// Client reads and drives runs.
type Client struct {
	tc           client.Client
	namespace    string
	taskQueue    string
	QueryTimeout time.Duration
	// RegistryTimeout bounds asking the task queue's registry what the workers offer, for
	// Workflows, and the first of a start's tries (each next try waits twice as long; past
	// them the start is refused, see CheckUnavailableError).
	RegistryTimeout time.Duration
	offered         offeredCache
	// Payloads resolves the External Storage references raw history holds in place of
	// large payloads, for a record rebuilt from history (a run's input or result); the SDK
	// resolves them everywhere else. Nil leaves such a payload out of the record.
	Payloads *payloads.Driver
	// PageURL is the base URL of the Nexo web page (config's Gateway.PageURL): a run
	// started through the Client carries a link to its page there as the static summary
	// and details the Temporal Web UI shows, the way back from the UI. "" for none.
	PageURL string
	// PageURLFromWorkers links the runs started to the page a live worker of the task
	// queue announced it serves (api.WorkerAnnouncement.PageURL), read from the registry
	// answer the start was checked against, and to PageURL only when none announced one
	// (or the start was unchecked): for a client whose config does not say where the page
	// is (the starter without gateway.url), since the gateway's port moves with the
	// worker's config.
	PageURLFromWorkers bool
	// DataConverter decodes what the Temporal client hands over undecoded (a model call's
	// heartbeat details, the memo): the one tc was dialled with (default: the SDK's).
	DataConverter converter.DataConverter
	// Blobs is the blob store (artifacts.url) closed runs store their final record in (see
	// api.MemoRecord). Nil reads closed runs by replaying their query, as before records
	// were stored.
	Blobs artifacts.Blobs
	// handoverPause replaces handoverBackoff, the first pause between two sends of a
	// prompt during a session's handover, when > 0 (tests).
	handoverPause time.Duration
}

// New returns a Client over a connected Temporal client.
func New(tc client.Client, namespace, taskQueue string) *Client {
	return &Client{tc: tc, namespace: namespace, taskQueue: taskQueue, QueryTimeout: 5 * time.Second,
		RegistryTimeout: 2 * time.Second, DataConverter: converter.GetDefaultDataConverter()}
}

// StartRequest starts a run.
type StartRequest struct {
	Workflow   string
	Payload    json.RawMessage
	ID         string // empty: a new UUIDv7
	StartDelay time.Duration
	Options    *api.RunOptions
	// Unchecked skips asking the task queue's registry whether a worker offers the
	// workflow type and takes the input's fields (starter run --no-check): for when the
	// registry cannot answer (a CheckUnavailableError) and the caller knows the run is right.
	Unchecked bool
}

// Start starts a run and returns its id. A workflow type that the task queue's registry
// says no worker offers is refused with an UnknownTypeError, an input with a field the
// type's input does not take with a BadRequestError wrapping an UnknownFieldError, an
// agent whose sandbox pool no live host serves with a NoPoolHostError, and nothing
// starts.
func (c *Client) Start(ctx context.Context, req StartRequest) (string, error) {
	if req.Workflow == "" {
		return "", &BadRequestError{Msg: "workflow name is empty"}
	}
	payload := req.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if !json.Valid(payload) {
		return "", &BadRequestError{Msg: fmt.Sprintf("input is not valid JSON: %.80s", payload)}
	}
	if req.StartDelay < 0 {
		return "", &BadRequestError{Msg: fmt.Sprintf("start delay %v is negative", req.StartDelay)}
	}
	id := req.ID
	if id != "" {
		if err := api.ValidateRunID(id); err != nil {
			return "", &BadRequestError{Msg: err.Error()}
		}
	}
	if err := c.checkStart(ctx, req.Workflow, payload, req.Unchecked); err != nil {
		return "", err
	}
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return "", fmt.Errorf("generate run id: %w", err)
		}
		id = u.String()
	}
	args := []any{payload}
	if req.Options != nil {
		args = append(args, req.Options)
	}
	attrs, memo := startAttributes(req.Workflow, payload)
	_, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TypedSearchAttributes:    attrs,
		Memo:                     memo,
		TaskQueue:                c.taskQueue,
		StartDelay:               req.StartDelay,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Without this the SDK answers a taken id with the run that holds it, as if it had
		// started: the new run would be dropped without a word.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// Where a worker for the task queue shares this client (the HTTP API inside the
		// worker), the start response carries the run's first workflow task straight to it,
		// skipping a round through matching: 28 → 20 ms for a one-activity workflow and
		// +27% throughput on the embedded server (go run ./bench devserver --eager-start).
		// Elsewhere (the starter CLI) the SDK has no local worker and starts normally; the
		// server declines it for a delayed start.
		EnableEagerStart: true,
		StaticSummary:    c.pageSummary(req.Workflow+" run", "/runs/"+url.PathEscape(id)),
		StaticDetails:    c.pageDetails("/runs/" + url.PathEscape(id)),
	}, req.Workflow, args...)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return "", c.exists(ctx, id)
	}
	if err != nil {
		return "", fmt.Errorf("start %s run %s: %w", req.Workflow, id, err)
	}
	return id, nil
}

// checkStart is what Start asks before it starts a run of workflow with payload (and what
// a schedule asks before it is created, so its runs start the way `starter run` would):
// unless unchecked, whether the registry knows a worker offering the type and taking the
// input's fields; and whether a live host serves the sandbox pool of the run's agent.
func (c *Client) checkStart(ctx context.Context, workflow string, payload json.RawMessage, unchecked bool) error {
	if !unchecked {
		if err := c.checkOffered(ctx, workflow, payload); err != nil {
			return err
		}
	}
	// The registry's answer checkOffered just read (or a recent one): the pools it names.
	if v, ok := c.offered.fresh(time.Now()); ok {
		if err := c.checkPool(ctx, &v, workflow, payload); err != nil {
			return err
		}
	}
	return nil
}

// pageSummary is the Temporal UI's one-line summary of a workflow whose Nexo page is at
// path: Markdown, which the UI renders with the link ("" without a PageURL).
func (c *Client) pageSummary(what, path string) string {
	base := c.pageBase()
	if base == "" {
		return ""
	}
	return fmt.Sprintf("%s · [open in Nexo](%s)", what, markdownURL(base+path))
}

// pageDetails is the Temporal UI's details of a workflow whose Nexo page is at path.
func (c *Client) pageDetails(path string) string {
	base := c.pageBase()
	if base == "" {
		return ""
	}
	u := markdownURL(base + path)
	return fmt.Sprintf("Its record, events, artifacts and approvals in Nexo: [%s](%s)", u, u)
}

// pageBase is the base URL of the web page the links of a start point at: a live
// worker's announced page when PageURLFromWorkers and the registry answer the start was
// checked against (a recent one) names one, else PageURL.
func (c *Client) pageBase() string {
	if c.PageURLFromWorkers {
		if v, ok := c.offered.fresh(time.Now()); ok {
			if u := v.PageURL(); u != "" {
				return u
			}
		}
	}
	return c.PageURL
}

// markdownURL escapes what would end a Markdown link target early.
func markdownURL(u string) string {
	return strings.NewReplacer("(", "%28", ")", "%29", " ", "%20", "[", "%5B", "]", "%5D").Replace(u)
}

// exists describes the run holding id for an ExistsError.
func (c *Client) exists(ctx context.Context, id string) error {
	e := &ExistsError{ID: id, Workflow: "unknown workflow", Status: "unknown status"}
	if desc, err := c.describe(ctx, id); err == nil {
		info := desc.GetWorkflowExecutionInfo()
		e.Workflow = info.GetType().GetName()
		e.Status = summaryStatus(info, time.Now())
	}
	return e
}

// summaryStatus is a run's status as visibility tells it: the close status of a closed
// run, the NexoStatus search attribute of an open one (pending or queued before the
// workflow first set it).
func summaryStatus(e *workflowpb.WorkflowExecutionInfo, now time.Time) api.Status {
	if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return closedStatus(e.GetStatus())
	}
	st := api.StatusPending
	if et := e.GetExecutionTime(); et != nil && et.AsTime().After(now) {
		st = api.StatusQueued
	}
	if p := e.GetSearchAttributes().GetIndexedFields()[api.SearchAttributeStatus]; p != nil {
		var v string
		if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil && v != "" {
			st = api.Status(v)
		}
	}
	return st
}

// Get returns the run record. A running run answers through the nexo.run query; a run
// that has not begun (queued, or pending with no worker yet) and a closed run that no
// worker can replay are reconstructed from history, so `show` works even then.
func (c *Client) Get(ctx context.Context, id string) (api.Record, error) {
	desc, err := c.describe(ctx, id)
	if err != nil {
		return api.Record{}, err
	}
	rec, err := c.getDescribed(ctx, id, desc)
	if err == nil && rec.Error != nil {
		// The CLI, the API and the page all read records here.
		msg := LeadStoreCorrupt(*rec.Error)
		rec.Error = &msg
	}
	if err == nil {
		rec, err = c.withTexts(ctx, rec)
	}
	return rec, err
}

func (c *Client) getDescribed(ctx context.Context, id string, desc *workflowservice.DescribeWorkflowExecutionResponse) (api.Record, error) {
	info := desc.GetWorkflowExecutionInfo()
	st := info.GetStatus()
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if delayed(info) {
			return c.fromHistory(ctx, id, api.StatusQueued)
		}
		rec, qerr := c.query(ctx, id)
		if qerr == nil {
			rec.Retrying = retryingOf(desc)
			return rec, nil
		}
		if started, _ := c.hasCompletedTask(ctx, id); !started {
			return c.fromHistory(ctx, id, api.StatusPending)
		}
		return api.Record{}, &NoWorkerError{ID: id, TaskQueue: c.taskQueue, Err: qerr}
	}
	closed := closedStatus(st)
	// A run that closed stored its final record: read it, no worker needed.
	stored, serr := c.storedRecord(ctx, id, desc)
	if serr == nil && stored != nil {
		stored.Status = closed
		return *stored, nil
	}
	// Closed before records were stored, terminated or timed out (no code of the run ran
	// at its close), or the store failed: a worker replays the run to answer the query.
	rec, qerr := c.query(ctx, id)
	if qerr != nil {
		rec, err := c.fromHistory(ctx, id, closed)
		if err != nil {
			return api.Record{}, err
		}
		why := "it stored no record (it closed before runs stored one, or was terminated or timed out)"
		if serr != nil {
			why = fmt.Sprintf("its stored record could not be read (%v)", serr)
		}
		rec.Warning = fmt.Sprintf("run %s: %s and no worker replayed it (query %s: %v): its state, events and artifacts are missing here; start a worker for task queue %q and read it again",
			id, why, api.QueryRun, qerr, c.taskQueue)
		return rec, nil
	}
	rec.Status = closed
	return rec, nil
}

// storedRecord reads the final record a closed run stored, nil when its memo names none.
func (c *Client) storedRecord(ctx context.Context, id string, desc *workflowservice.DescribeWorkflowExecutionResponse) (*api.Record, error) {
	p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[api.MemoRecord]
	if p == nil {
		return nil, nil
	}
	dc := c.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var ref api.RecordRef
	if err := dc.FromPayload(p, &ref); err != nil {
		return nil, fmt.Errorf("decode memo %s: %w", api.MemoRecord, err)
	}
	if !artifacts.ValidSum(ref.SHA256) {
		return nil, fmt.Errorf("memo %s names no blob (sha256 %q)", api.MemoRecord, ref.SHA256)
	}
	if c.Blobs == nil {
		return nil, fmt.Errorf("record blob %s: this client has no blob store (artifacts.url)", ref.SHA256)
	}
	body, err := c.Blobs.GetBlob(ctx, ref.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read record blob %s (is artifacts.url the store the worker writes?): %w", ref.SHA256, err)
	}
	var rec api.Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return nil, fmt.Errorf("decode record blob %s: %w", ref.SHA256, err)
	}
	return &rec, nil
}

// Exists reports whether a run (or session) with this id exists, open or closed, without
// reading its record: what a watcher opened before a session's first prompt asks.
func (c *Client) Exists(ctx context.Context, id string) (bool, error) {
	_, err := c.describe(ctx, id)
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

func (c *Client) describe(ctx context.Context, id string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id == "" {
		return nil, &BadRequestError{Msg: "run id is empty"}
	}
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, &NotFoundError{ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("describe run %s: %w", id, err)
	}
	return desc, nil
}

func (c *Client) query(ctx context.Context, id string) (api.Record, error) {
	qctx, cancel := context.WithTimeout(ctx, c.QueryTimeout)
	defer cancel()
	v, err := c.tc.QueryWorkflow(qctx, id, "", api.QueryRun)
	if err != nil {
		return api.Record{}, err
	}
	var rec api.Record
	if err := v.Get(&rec); err != nil {
		return api.Record{}, fmt.Errorf("decode record of run %s: %w", id, err)
	}
	return rec, nil
}

func closedStatus(st enumspb.WorkflowExecutionStatus) api.Status {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return api.StatusDone
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return api.StatusFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return api.StatusCanceled
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return api.StatusRunning
	default: // terminated, timed out, continued as new
		return api.StatusInterrupted
	}
}

func (c *Client) hasCompletedTask(ctx context.Context, id string) (bool, error) {
	it := c.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true, nil
		}
	}
	return false, nil
}

// fromHistory reconstructs what history alone can tell: workflow, payload, times, and for
// a closed run its result or error. Events and state live in workflow memory only.
func (c *Client) fromHistory(ctx context.Context, id string, status api.Status) (api.Record, error) {
	rec := api.Record{ID: id, Status: status, Payload: json.RawMessage("{}"),
		State: map[string]json.RawMessage{}, Events: []api.Event{}, Artifacts: []api.Artifact{}}
	it := c.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return api.Record{}, fmt.Errorf("read history of run %s: %w", id, err)
		}
		rec.UpdatedAt = ev.GetEventTime().AsTime().UTC()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a := ev.GetWorkflowExecutionStartedEventAttributes()
			rec.Workflow = a.GetWorkflowType().GetName()
			rec.CreatedAt = ev.GetEventTime().AsTime().UTC()
			p, err := c.firstPayload(ctx, a.GetInput())
			if err != nil {
				return api.Record{}, fmt.Errorf("read the input of run %s: %w", id, err)
			}
			if p != nil {
				rec.Payload = p
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			p, err := c.firstPayload(ctx, ev.GetWorkflowExecutionCompletedEventAttributes().GetResult())
			if err != nil {
				return api.Record{}, fmt.Errorf("read the result of run %s: %w", id, err)
			}
			rec.Result = p
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			msg := ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
			rec.Error = &msg
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			msg := "terminated: " + ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
			rec.Error = &msg
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			msg := "timed out"
			rec.Error = &msg
		}
	}
	return rec, nil
}

// firstPayload is the first of ps as JSON, nil when there is none or it is not JSON. An
// offloaded payload is read back from the blob store.
func (c *Client) firstPayload(ctx context.Context, ps *commonpb.Payloads) (json.RawMessage, error) {
	if ps == nil || len(ps.GetPayloads()) == 0 {
		return nil, nil
	}
	p := ps.GetPayloads()[0]
	if payloads.IsReference(p) {
		if c.Payloads == nil {
			return nil, nil
		}
		var err error
		if p, err = c.Payloads.Resolve(ctx, p); err != nil {
			return nil, err
		}
	}
	d := p.GetData()
	if !json.Valid(d) {
		return nil, nil
	}
	return json.RawMessage(d), nil
}

func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("runs: encode %T: %v", v, err))
	}
	return b
}

// delayed reports whether a run is waiting out a start delay: its first workflow task is
// not even scheduled (history holds only the start event) and its execution time is ahead.
func delayed(info interface {
	GetHistoryLength() int64
	GetExecutionTime() *timestamppb.Timestamp
}) bool {
	et := info.GetExecutionTime()
	return info.GetHistoryLength() <= 1 && et != nil && et.AsTime().After(time.Now())
}
