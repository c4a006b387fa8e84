package refund

import (
	"context"
	"fmt"
	"math"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Order is what LookupOrder finds.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Item     string  `json:"item"`
	Total    float64 `json:"total"`
}

// Refund is the receipt of a refund IssueRefund made.
type Refund struct {
	ID      string  `json:"id"`
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

// RefundOrder is what IssueRefund is asked to pay back.
type RefundOrder struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

// Shop stands for the user's own systems: an order book and a payment provider. Its
// exported methods are the activities (platform.Activity registers each under its name);
// workflows call them through a nil *Shop, as Temporal's samples do.
type Shop struct {
	orders map[string]Order

	mu      sync.Mutex
	refunds map[string]Refund // by run: a retried IssueRefund pays once
}

// NewShop is a shop with a few orders.
func NewShop() *Shop {
	return &Shop{
		orders: map[string]Order{
			"A-1001": {ID: "A-1001", Customer: "Ada Lovelace", Item: "teapot", Total: 42.5},
			"A-1002": {ID: "A-1002", Customer: "Alan Turing", Item: "chessboard", Total: 120},
		},
		refunds: map[string]Refund{},
	}
}

// LookupOrder finds an order by id. An unknown id is not retried: it will not appear.
func (s *Shop) LookupOrder(ctx context.Context, id string) (Order, error) {
	o, ok := s.orders[id]
	if !ok {
		return Order{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("order %q not found", id), "OrderNotFound", nil)
	}
	return o, nil
}

// IssueRefund pays req.Amount back on its order, once per run: Temporal may run an
// activity again (a worker lost after paying, before reporting), so the refund is keyed
// by the run and a second attempt returns the first receipt.
func (s *Shop) IssueRefund(ctx context.Context, req RefundOrder) (Refund, error) {
	run := activity.GetInfo(ctx).WorkflowExecution.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.refunds[run]; ok {
		return r, nil
	}
	r := Refund{ID: fmt.Sprintf("R-%s-%d", req.OrderID, len(s.refunds)+1), OrderID: req.OrderID, Amount: math.Round(req.Amount*100) / 100}
	s.refunds[run] = r
	return r, nil
}
