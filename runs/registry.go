package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/suggest"
)

// UnknownTypeError: the task queue's registry answered and no worker announced the
// workflow type a new run asked for, so the run was not started.
type UnknownTypeError struct {
	Workflow  string
	TaskQueue string
	// Offered is what the workers announce, sorted.
	Offered []string
	// Suggestion is the offered type the name most likely meant, "" if none is close.
	Suggestion string
}

func (e *UnknownTypeError) Error() string {
	msg := fmt.Sprintf("no worker on task queue %s offers workflow type %q (offered: %s)", e.TaskQueue, e.Workflow, strings.Join(e.Offered, ", "))
	if e.Suggestion != "" {
		msg += fmt.Sprintf("; did you mean %q?", e.Suggestion)
	}
	return msg
}

// NoRegistryError: the task queue's registry does not exist or did not answer, so what the
// workers offer is unknown (no worker started yet, workers older than the registry, or
// none polling right now).
type NoRegistryError struct {
	TaskQueue string
	Err       error
}

func (e *NoRegistryError) Error() string {
	return fmt.Sprintf("no worker registry answered on task queue %s (has a worker started there? workers announce themselves when they start): %v", e.TaskQueue, e.Err)
}

func (e *NoRegistryError) Unwrap() error { return e.Err }

// CheckUnavailableError: workers poll the task queue, but its registry did not answer the
// check of a new run's type and input in time, try after try (workers overloaded, or the
// registry's worker stuck), so the run was not started: a check that cannot be made is not
// passed.
type CheckUnavailableError struct {
	Workflow  string
	TaskQueue string
	Tries     int
	Waited    time.Duration
	Err       error
}

func (e *CheckUnavailableError) Error() string {
	return fmt.Sprintf("could not check workflow type %q and its input against the workers of task queue %s: "+
		"its worker registry did not answer %d tries over %s, though workers poll it (overloaded?); nothing was started: "+
		"try again, or start it unchecked with `starter run --no-check` (StartRequest.Unchecked; the HTTP API has no such option): %v",
		e.Workflow, e.TaskQueue, e.Tries, e.Waited.Round(time.Millisecond), e.Err)
}

// Unwrap gives the last try's error, and context.DeadlineExceeded: the check timed out.
func (e *CheckUnavailableError) Unwrap() []error { return []error{e.Err, context.DeadlineExceeded} }

// registryTries is how many times a start asks a registry that does not answer in time,
// each try waiting twice as long as the one before (RegistryTimeout, then 2x, 4x).
const registryTries = 3

// livePollerAge: a worker whose last poll of the task queue is older than this is taken
// for gone (a long poll lasts up to about a minute).
const livePollerAge = 90 * time.Second

// askRegistry asks the registry what the workers offer, for the check of a start: from its
// memo when that answers (memoRegistry), which needs no worker. Otherwise a query
// that times out is asked again, with a longer timeout; when every try timed out and
// workers do poll the task queue, it fails with a CheckUnavailableError, so a slow answer
// never turns the check off. When no worker polls (none started, or all gone) there is
// nothing to check against, the run will wait for one: a NoRegistryError, as when the
// registry does not exist.
func (c *Client) askRegistry(ctx context.Context, workflow string) (api.RegistryView, error) {
	if v, ok := c.memoRegistry(ctx); ok {
		return v, nil
	}
	start := time.Now()
	timeout := c.RegistryTimeout
	var err error
	for try := 1; try <= registryTries; try++ {
		var v api.RegistryView
		v, err = c.workflowsWithin(ctx, timeout)
		if err == nil || ctx.Err() != nil || !registryTimedOut(err) {
			return v, err
		}
		timeout *= 2
	}
	if !c.workersPoll(ctx) {
		return api.RegistryView{}, err
	}
	return api.RegistryView{}, &CheckUnavailableError{Workflow: workflow, TaskQueue: c.taskQueue, Tries: registryTries,
		Waited: time.Since(start), Err: err}
}

// memoRegistry reads what the workers offer from the registry's memo
// (api.MemoRegistryWorkers) and the task queue's pollers, two answers of the server alone,
// so a start's check neither waits for a worker's task nor gives up under load. It answers
// (ok) only when the registry is running, its memo holds the announcements, and every
// worker it lists polls the task queue (within livePollerAge): a worker just started (not
// polling yet) or killed (not dropped yet) leaves the answer to the query, as before.
func (c *Client) memoRegistry(ctx context.Context) (api.RegistryView, bool) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, api.RegistryID(c.taskQueue), "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return api.RegistryView{}, false
	}
	p, ok := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[api.MemoRegistryWorkers]
	if !ok {
		return api.RegistryView{}, false
	}
	var list []api.WorkerAnnouncement
	if err := c.DataConverter.FromPayload(p, &list); err != nil || list == nil {
		return api.RegistryView{}, false
	}
	if len(list) > 0 {
		resp, err := c.tc.DescribeTaskQueue(ctx, c.taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return api.RegistryView{}, false
		}
		polling := map[string]bool{}
		for _, p := range resp.GetPollers() {
			if t := p.GetLastAccessTime(); t != nil && time.Since(t.AsTime()) < livePollerAge {
				polling[p.GetIdentity()] = true
			}
		}
		for _, a := range list {
			if !polling[a.Identity] {
				return api.RegistryView{}, false
			}
		}
	}
	workers := make([]api.RegisteredWorker, len(list))
	for i, a := range list {
		workers[i] = api.RegisteredWorker{WorkerAnnouncement: a}
	}
	return api.NewRegistryView(workers), true
}

// registryTimedOut reports whether a registry query failed by running out of time.
func registryTimedOut(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de)
}

// workersPoll reports whether some worker that is still registered polled the task
// queue's workflow tasks within livePollerAge. A worker that stopped gracefully said
// goodbye to the registry, which then no longer lists it in its memo
// (api.MemoRegistryLive): it does not count, however recent its last poll. A worker that
// was killed is listed until the registry drops it, so it counts until its last poll is
// livePollerAge old. Unknown (the describe fails): true, so the check is not skipped on a
// guess; a registry without the memo (older than the live rule) lists nobody out.
func (c *Client) workersPoll(ctx context.Context) bool {
	resp, err := c.tc.DescribeTaskQueue(ctx, c.taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return true
	}
	registered, known := c.registeredIdentities(ctx)
	for _, p := range resp.GetPollers() {
		if t := p.GetLastAccessTime(); t != nil && time.Since(t.AsTime()) < livePollerAge &&
			(!known || slices.Contains(registered, p.GetIdentity())) {
			return true
		}
	}
	return false
}

// registeredIdentities reads the identities the registry holds from its memo
// (api.MemoRegistryLive), which needs no worker; known is false when the registry or the
// memo is absent (a registry older than the live rule).
func (c *Client) registeredIdentities(ctx context.Context) (ids []string, known bool) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, api.RegistryID(c.taskQueue), "")
	if err != nil {
		return nil, false
	}
	if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, false
	}
	p, ok := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[api.MemoRegistryLive]
	if !ok {
		return nil, false
	}
	if err := c.DataConverter.FromPayload(p, &ids); err != nil {
		return nil, false
	}
	return ids, true
}

// LiveWorkers leaves out of v the entries of workers older than the live rule (an
// announcement without a TTL, kept by the registry for a day) whose identity does not poll
// the task queue, as the server knows it (DescribeTaskQueue: no poll for livePollerAge),
// and recomputes the union: what such a worker offered no longer counts once it is gone.
// Workers of the live rule are kept (the registry drops them within their TTL, and at
// once when they stop). When the server cannot tell (the describe fails), v is returned
// as it is.
func LiveWorkers(ctx context.Context, tc client.Client, taskQueue string, v api.RegistryView) api.RegistryView {
	legacy := false
	for _, w := range v.Workers {
		legacy = legacy || w.TTLSeconds <= 0
	}
	if !legacy {
		return v
	}
	resp, err := tc.DescribeTaskQueue(ctx, taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return v
	}
	polling := map[string]bool{}
	for _, p := range resp.GetPollers() {
		if t := p.GetLastAccessTime(); t != nil && time.Since(t.AsTime()) < livePollerAge {
			polling[p.GetIdentity()] = true
		}
	}
	kept := make([]api.RegisteredWorker, 0, len(v.Workers))
	for _, w := range v.Workers {
		if w.TTLSeconds > 0 || polling[w.Identity] {
			kept = append(kept, w)
		}
	}
	if len(kept) == len(v.Workers) {
		return v
	}
	return api.NewRegistryView(kept)
}

// offeredCacheTTL is how long Start trusts a registry answer that contained the type it
// starts (and, for an input it checks, all of the input's fields). A type or field missing
// from it is always asked again, so a worker deployed a second ago is never refused; only
// the common case (a known type, known fields) skips the query.
const offeredCacheTTL = 10 * time.Second

// offeredCache remembers the last registry answer (the gateway starts many runs).
type offeredCache struct {
	mu   sync.Mutex
	at   time.Time
	view api.RegistryView
}

// fresh returns the cached answer when it is recent.
func (o *offeredCache) fresh(now time.Time) (api.RegistryView, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.view, !o.at.IsZero() && now.Sub(o.at) < offeredCacheTTL
}

func (o *offeredCache) store(v api.RegistryView, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.view, o.at = v, now
}

// UnknownFieldError: a new run's input has fields its workflow type's input does not
// take (a typo such as "docid" would otherwise be dropped without a word and the run start
// with the field empty), so the run was not started.
type UnknownFieldError struct {
	Workflow string
	// Fields are the unknown ones, sorted; Suggestions[i] is the known field Fields[i]
	// most likely meant, "" if none is close.
	Fields      []string
	Suggestions []string
	// Known are the fields the input takes, sorted.
	Known []string
}

func (e *UnknownFieldError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		switch {
		case e.Suggestions[i] != "":
			parts[i] = fmt.Sprintf("unknown field %q (did you mean %q?)", f, e.Suggestions[i])
		case len(e.Known) == 0:
			parts[i] = fmt.Sprintf("unknown field %q (it takes no fields)", f)
		default:
			parts[i] = fmt.Sprintf("unknown field %q (it takes %s)", f, strings.Join(e.Known, ", "))
		}
	}
	return fmt.Sprintf("input of %s: %s", e.Workflow, strings.Join(parts, "; "))
}

// checkInput refuses a payload with a field that known does not hold. A key matches a
// field regardless of case, as encoding/json decodes it. A payload that is not an object
// cannot decode into a struct input at all.
func checkInput(workflow string, known []string, payload json.RawMessage) error {
	if string(bytes.TrimSpace(payload)) == "null" {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return &BadRequestError{Msg: fmt.Sprintf("input of %s must be a JSON object (its fields: %s), not %.40s",
			workflow, strings.Join(known, ", "), bytes.TrimSpace(payload))}
	}
	e := &UnknownFieldError{Workflow: workflow, Known: known}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if slices.ContainsFunc(known, func(f string) bool { return strings.EqualFold(f, k) }) {
			continue
		}
		e.Fields = append(e.Fields, k)
		e.Suggestions = append(e.Suggestions, suggest.Nearest(k, known))
	}
	if len(e.Fields) == 0 {
		return nil
	}
	return &BadRequestError{Msg: e.Error(), Err: e}
}

// Workflows returns what the workers of the task queue announced to its registry: the
// workflow types, the agents, and each worker. It fails with a NoRegistryError when the
// registry does not exist, is closed or does not answer within RegistryTimeout.
func (c *Client) Workflows(ctx context.Context) (api.RegistryView, error) {
	return c.workflowsWithin(ctx, c.RegistryTimeout)
}

// workflowsWithin is Workflows with the query bounded by timeout.
func (c *Client) workflowsWithin(ctx context.Context, timeout time.Duration) (api.RegistryView, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.tc.QueryWorkflowWithOptions(qctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: api.RegistryID(c.taskQueue),
		QueryType:  api.QueryRegistry,
		// A closed registry (terminated by hand) holds stale entries: not an answer.
		QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	if err == nil && resp.QueryRejected != nil {
		err = fmt.Errorf("the registry is %s", strings.ToLower(strings.TrimPrefix(resp.QueryRejected.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")))
	}
	if err != nil {
		if ctx.Err() != nil {
			return api.RegistryView{}, ctx.Err()
		}
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			err = errors.New("it does not exist")
		}
		return api.RegistryView{}, &NoRegistryError{TaskQueue: c.taskQueue, Err: err}
	}
	var v api.RegistryView
	if err := resp.QueryResult.Get(&v); err != nil {
		return api.RegistryView{}, &NoRegistryError{TaskQueue: c.taskQueue, Err: fmt.Errorf("decode its answer: %w", err)}
	}
	return LiveWorkers(ctx, c.tc, c.taskQueue, v), nil
}

// checkOffered refuses a workflow type the registry knows no worker offers, and an input
// with a field the type's input does not take (when every worker offering it announced
// its fields). When the registry cannot tell (it does not exist or answer, or lists no
// live worker, or it does not answer in time while no
// worker polls the task queue) the run is started as before: the client cannot know, and
// run --wait still reports a type no worker has at its first failed task. A registry that
// does not answer in time while workers poll is a CheckUnavailableError (see askRegistry).
func (c *Client) checkOffered(ctx context.Context, workflow string, payload json.RawMessage) error {
	now := time.Now()
	if v, ok := c.offered.fresh(now); ok && slices.Contains(v.Workflows, workflow) && checkAgent(v, c.taskQueue, workflow, payload) == nil {
		if fields, checked := v.Inputs[workflow]; !checked || checkInput(workflow, fields, payload) == nil {
			return nil
		}
		// Refused by a cached answer: ask again, a new worker may take the field.
	}
	v, err := c.askRegistry(ctx, workflow)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var cu *CheckUnavailableError
		if errors.As(err, &cu) {
			return err
		}
		return nil // no registry, or a closed one: nothing to check against
	}
	if len(v.Workflows) == 0 {
		return nil
	}
	if !slices.Contains(v.Workflows, workflow) {
		return &UnknownTypeError{Workflow: workflow, TaskQueue: c.taskQueue, Offered: v.Workflows,
			Suggestion: suggest.Nearest(workflow, v.Workflows)}
	}
	c.offered.store(v, now)
	if err := checkAgent(v, c.taskQueue, workflow, payload); err != nil {
		return err
	}
	if fields, checked := v.Inputs[workflow]; checked {
		return checkInput(workflow, fields, payload)
	}
	return nil
}
