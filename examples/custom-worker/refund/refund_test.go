package refund

import (
	"encoding/json"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestRefundRequestRefusesWhatItCannotRefund: a payload that is incomplete, an order that
// does not exist or an amount over the order's total fails the run with a message naming
// the problem, before any model is paid for. (Approve and deny: e2e/custom_worker_test.go.)
func TestRefundRequestRefusesWhatItCannotRefund(t *testing.T) {
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"incomplete", `{"order_id": "A-1001"}`, `RefundRequest payload: "amount" must be more than 0, got 0; "reason" is required`},
		{"unknown order", `{"order_id": "B-9", "amount": 1, "reason": "lost"}`, `order "B-9" not found`},
		{"over the total", `{"order_id": "A-1001", "amount": 50, "reason": "arrived broken"}`, "refund of 50.00 is more than order A-1001's total 42.50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(NewShop())
			workflows.Register(env, "RefundRequest", RefundRequest, workflows.Options{})
			env.ExecuteWorkflow("RefundRequest", json.RawMessage(tc.payload), (*api.RunOptions)(nil))
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			err := env.GetWorkflowError()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
			var rec api.Record
			v, qerr := env.QueryWorkflow(api.QueryRun)
			if qerr != nil {
				t.Fatal(qerr)
			}
			if err := v.Get(&rec); err != nil {
				t.Fatal(err)
			}
			if rec.Status != api.StatusFailed {
				t.Errorf("status %s, want failed", rec.Status)
			}
			if _, ok := rec.State["agent"]; ok {
				t.Errorf("the agent was resolved for a refund that cannot be made: state %v", rec.State)
			}
		})
	}
}
