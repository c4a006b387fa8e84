// Package refund is the workflow RefundRequest and the activities of a small shop, the
// part of the custom worker a user writes. It is a package of its own, not in main, so its
// tests (and a user's) do not link the Temporal server that main's --dev brings in.
package refund

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/platform"
	"github.com/nexo-temporal/nexo/workflows"
)

// RefundInput is the payload of RefundRequest:
// {"order_id": "A-1001", "amount": 42.5, "reason": "arrived broken"}.
type RefundInput struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
	Reason  string  `json:"reason"`
}

// RefundResult is what RefundRequest returns: the refund when a human approved it, the
// denial's reason when not. Reply names the artifact holding the drafted reply.
type RefundResult struct {
	Refunded bool    `json:"refunded"`
	OrderID  string  `json:"order_id"`
	Amount   float64 `json:"amount"`
	RefundID string  `json:"refund_id,omitempty"`
	Approver string  `json:"approver,omitempty"`
	Denied   string  `json:"denied,omitempty"`
	Reply    string  `json:"reply"`
}

// RefundDecision is the resume input RefundRequest waits for, what `starter approve` and
// `starter deny --reason` send. Anything else is ignored and the run keeps waiting.
type RefundDecision struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	Approver string `json:"approver,omitempty"`
}

// Validate requires the decision itself, so a typo never reads as a denial.
func (d RefundDecision) Validate() error {
	if d.Approved == nil {
		return errors.New(`"approved" (true or false) is required`)
	}
	return nil
}

// clerk is the agent (under agents: in nexo.yaml) that drafts the reply to the customer.
const clerk = "refund-clerk"

// replyArtifact is the artifact the drafted reply is stored as.
const replyArtifact = "reply.md"

// shop is how the workflow names the shop's activities: by method, never called here.
var shop *Shop

// RefundRequest looks the order up (checkpoint "lookup"), has the agent draft a reply to
// the customer (checkpoint "draft", stored as the artifact reply.md so the human sees it),
// waits for a human's decision, and on approval pays the refund (checkpoint "refund").
// Each checkpoint is paid for once: a re-run of a failed run starts after the last one
// that completed, and nothing before the suspension runs again when the run resumes.
func RefundRequest(ctx workflow.Context, in RefundInput) (RefundResult, error) {
	if err := in.check(); err != nil {
		return RefundResult{}, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, nil)
	}
	order, err := workflows.Checkpoint[Order](ctx, "lookup", shop.LookupOrder, in.OrderID)
	if err != nil {
		return RefundResult{}, err
	}
	if in.Amount > order.Total {
		return RefundResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("refund of %.2f is more than order %s's total %.2f", in.Amount, order.ID, order.Total), api.ErrTypeBadInput, nil)
	}

	// The definition is resolved from the worker's config once (a checkpoint), so the
	// run keeps the agent it started with even if the config changes.
	spec, err := workflows.Checkpoint[agents.Spec](ctx, "agent", api.ActivityResolveAgent, clerk)
	if err != nil {
		return RefundResult{}, err
	}
	draft, err := workflows.Step(ctx, "draft", func(ctx workflow.Context) (api.AgentResult, error) {
		return workflows.RunAgent(ctx, spec, fmt.Sprintf(
			"Draft a reply to %s about order %s (%s): they ask for a refund of %.2f because it %s.",
			order.Customer, order.ID, order.Item, in.Amount, in.Reason))
	})
	if err != nil {
		return RefundResult{}, err
	}
	reply := workflows.ArtifactSource{Content: []byte(draft.Content + "\n")}
	if draft.ContentRef != "" {
		// A draft over 8 KB comes as a preview and its blob: store the whole of it.
		reply = workflows.ArtifactSource{Blob: draft.ContentRef}
	}
	if _, err := workflows.Artifact(ctx, replyArtifact, reply); err != nil {
		return RefundResult{}, err
	}

	res := RefundResult{OrderID: order.ID, Amount: in.Amount, Reply: replyArtifact}
	d, err := workflows.SuspendFor[RefundDecision](ctx,
		fmt.Sprintf("approve refund of %.2f for order %s (%s)", in.Amount, order.ID, in.Reason), "")
	if err != nil {
		return RefundResult{}, err
	}
	if !*d.Approved {
		res.Denied = d.Reason
		if res.Denied == "" {
			res.Denied = "denied"
		}
		return res, workflows.Emit(ctx, "refund_denied", map[string]string{"order_id": order.ID, "reason": d.Reason})
	}
	refund, err := workflows.Checkpoint[Refund](ctx, "refund", shop.IssueRefund, RefundOrder{OrderID: order.ID, Amount: in.Amount})
	if err != nil {
		return RefundResult{}, err
	}
	res.Refunded, res.RefundID, res.Approver = true, refund.ID, d.Approver
	return res, nil
}

// check names what is missing or wrong in the payload.
func (in RefundInput) check() error {
	var errs []error
	if strings.TrimSpace(in.OrderID) == "" {
		errs = append(errs, errors.New(`"order_id" is required`))
	}
	if in.Amount <= 0 {
		errs = append(errs, fmt.Errorf(`"amount" must be more than 0, got %v`, in.Amount))
	}
	if strings.TrimSpace(in.Reason) == "" {
		errs = append(errs, errors.New(`"reason" is required`))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("RefundRequest payload: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// Options are what this example adds to a platform: the workflow RefundRequest and the
// shop's activities (LookupOrder and IssueRefund). The worker's main adds the embedded
// server (--dev) to them; the replay test registers these alone.
func Options() []platform.Option {
	return []platform.Option{
		platform.Workflow("RefundRequest", RefundRequest),
		platform.Activity(NewShop()),
	}
}
