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
	qctx, cancel := context.WithTimeout(ctx, c.RegistryTimeout)
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
	return v, nil
}

// checkOffered refuses a workflow type the registry knows no worker offers, and an input
// with a field the type's input does not take (when every worker offering it announced
// its fields). When the registry cannot tell (it does not exist or answer, or no worker
// announced itself within api.RegistryExpiry) the run is started as before: the client
// cannot know, and run --wait still reports a type no worker has at its first failed task.
func (c *Client) checkOffered(ctx context.Context, workflow string, payload json.RawMessage) error {
	now := time.Now()
	if v, ok := c.offered.fresh(now); ok && slices.Contains(v.Workflows, workflow) && checkAgent(v, c.taskQueue, workflow, payload) == nil {
		if fields, checked := v.Inputs[workflow]; !checked || checkInput(workflow, fields, payload) == nil {
			return nil
		}
		// Refused by a cached answer: ask again, a new worker may take the field.
	}
	v, err := c.Workflows(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil
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
