package runs

import (
	"context"
	"errors"
	"fmt"
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
// starts. A type missing from it is always asked again, so a worker deployed a second ago
// is never refused; only the common case (a known type) skips the query.
const offeredCacheTTL = 10 * time.Second

// offeredCache remembers the last registry answer (the gateway starts many runs).
type offeredCache struct {
	mu  sync.Mutex
	at  time.Time
	set []string
}

func (o *offeredCache) has(workflow string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return now.Sub(o.at) < offeredCacheTTL && slices.Contains(o.set, workflow)
}

func (o *offeredCache) store(set []string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.set, o.at = set, now
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

// checkOffered refuses a workflow type the registry knows no worker offers. When the
// registry cannot tell (it does not exist or answer, or no worker announced itself within
// api.RegistryExpiry) the run is started as before: the client cannot know, and run --wait
// still reports a type no worker has at its first failed task.
func (c *Client) checkOffered(ctx context.Context, workflow string) error {
	now := time.Now()
	if c.offered.has(workflow, now) {
		return nil
	}
	v, err := c.Workflows(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil
	}
	if len(v.Workflows) == 0 || slices.Contains(v.Workflows, workflow) {
		c.offered.store(v.Workflows, now)
		return nil
	}
	return &UnknownTypeError{Workflow: workflow, TaskQueue: c.taskQueue, Offered: v.Workflows,
		Suggestion: suggest.Nearest(workflow, v.Workflows)}
}
