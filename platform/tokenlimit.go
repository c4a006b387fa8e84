package platform

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/workflows/tokenlimiter"
)

// tokenLimiter is the worker's activities.TokenLimiter: each endpoint's limiter is a
// workflow on the worker's task queue (every worker registers it, workflows.RegisterAll),
// created by the first reservation (update-with-start, USE_EXISTING: one limiter however
// many workers race to create it).
type tokenLimiter struct {
	tc        client.Client
	taskQueue string
}

var _ activities.TokenLimiter = tokenLimiter{}

func (l tokenLimiter) Reserve(ctx context.Context, endpoint string, req api.TokenReserveRequest) (api.TokenGrant, error) {
	id := api.TokenLimiterID(l.taskQueue, endpoint)
	start := l.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: id, TaskQueue: l.taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, api.WorkflowTokenLimiter, tokenlimiter.State{TokensPerMinute: req.TokensPerMinute})
	h, err := l.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: api.UpdateTokenReserve, Args: []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return api.TokenGrant{}, fmt.Errorf("reserve tokens with %s: %w", id, err)
	}
	var g api.TokenGrant
	if err := h.Get(ctx, &g); err != nil {
		return api.TokenGrant{}, fmt.Errorf("reserve tokens with %s: %w", id, err)
	}
	return g, nil
}

func (l tokenLimiter) Settle(ctx context.Context, endpoint string, req api.TokenSettleRequest) error {
	id := api.TokenLimiterID(l.taskQueue, endpoint)
	if err := l.tc.SignalWorkflow(ctx, id, "", api.SignalTokenSettle, req); err != nil {
		return fmt.Errorf("settle tokens with %s: %w", id, err)
	}
	return nil
}
