package runs

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/artifacts"
)

// MarkStats says where the roots of a store collection came from.
type MarkStats struct {
	// Open and Closed count the executions read (every run of every workflow id the
	// namespace still shows, sessions and their continued-as-new runs included).
	Open   int `json:"open"`
	Closed int `json:"closed"`
	// Expired counts the closed executions left out: closed longer ago than the retention.
	Expired int `json:"expired"`
	// Events counts the history events read.
	Events int `json:"events"`
	// NamespaceRetention is how long Temporal keeps a closed run's history (0: unknown).
	NamespaceRetention time.Duration `json:"namespace_retention"`
}

// MarkStore adds to marks every blob the runs Temporal still shows reference, and keeps
// their artifacts: for every execution of the namespace, open or closed within Temporal's
// retention (sessions are workflows too), each event of its history and its memo (the
// stored record's reference) are scanned for blob names (artifacts.Marks.Scan). History is
// the whole truth of a run: every thread head, snapshot manifest, tool output and
// offloaded payload the run or a replay of it needs was in an event before the run could
// use it. With retention > 0, a run closed longer ago than retention is left out (its
// record and what only it references become collectable, artifacts.retention).
//
// Cost: one history read per execution the namespace shows. A blob written after its
// run's history was read is new, and the collector's grace period spares it.
func (c *Client) MarkStore(ctx context.Context, marks *artifacts.Marks, retention time.Duration, now time.Time) (MarkStats, error) {
	var st MarkStats
	if ns, err := c.tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.namespace}); err == nil {
		st.NamespaceRetention = ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
	}
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return st, fmt.Errorf("list the runs of namespace %s: %w", c.namespace, err)
		}
		for _, e := range resp.GetExecutions() {
			id, runID := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				if retention > 0 && e.GetCloseTime().AsTime().Before(now.Add(-retention)) {
					st.Expired++
					continue
				}
				st.Closed++
			} else {
				st.Open++
			}
			marks.Run(id)
			if b, err := proto.Marshal(e.GetMemo()); err == nil {
				marks.Scan(b)
			}
			it := c.tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return st, fmt.Errorf("read the history of run %s (%s): %w", id, runID, err)
				}
				b, err := proto.Marshal(ev)
				if err != nil {
					return st, fmt.Errorf("encode event %d of run %s: %w", ev.GetEventId(), id, err)
				}
				marks.Scan(b)
				st.Events++
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return st, nil
		}
	}
}
