package workflows

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// Example workflow type names.
const (
	DocumentApprovalName = "DocumentApproval"
	BuildDashboardName   = "BuildDashboard"
)

// RegisterAll registers every workflow this project ships on a worker, and the task
// queue's registry (RegistryWorkflow) and the endpoints' token limiters
// (TokenLimiterWorkflow), which are not runs and so are registered plainly, without the
// run runtime. Register through a TypeRecorder to learn the types registered.
func RegisterAll(r Registry) {
	Register(r, DocumentApprovalName, DocumentApproval, Options{})
	Register(r, BuildDashboardName, BuildDashboard, Options{})
	Register(r, api.WorkflowAgentRun, AgentRun, Options{})
	Register(r, api.WorkflowSession, Session, Options{})
	r.RegisterWorkflowWithOptions(RegistryWorkflow, workflow.RegisterOptions{Name: api.WorkflowRegistry})
	r.RegisterWorkflowWithOptions(TokenLimiterWorkflow, workflow.RegisterOptions{Name: api.WorkflowTokenLimiter})
}

// DocumentApprovalInput is the payload of DocumentApproval.
type DocumentApprovalInput struct {
	DocID string `json:"doc_id"`
	// Approved skips the human gate (a pre-approved document).
	Approved bool `json:"approved"`
}

// DocumentApprovalResult is what DocumentApproval returns.
type DocumentApprovalResult struct {
	Done      bool   `json:"done"`
	Published string `json:"published"`
	Approver  string `json:"approver,omitempty"`
}

// DocumentApprovalDecision is the resume input DocumentApproval waits for: what `starter
// approve` / `starter deny` (and the API's approvals/suspend) send. Anything else is
// ignored and the run keeps waiting.
type DocumentApprovalDecision struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	Approver string `json:"approver,omitempty"`
}

// Validate requires the decision itself.
func (d DocumentApprovalDecision) Validate() error {
	if d.Approved == nil {
		return errors.New(`"approved" (true or false) is required`)
	}
	return nil
}

// DocumentApproval fetches a document (checkpoint "fetch", which emits "fetching" each
// time it really runs), waits for a human unless the payload says it is pre-approved,
// then publishes it (checkpoint "publish"). A denial ends the run done, unpublished.
func DocumentApproval(ctx workflow.Context, in DocumentApprovalInput) (DocumentApprovalResult, error) {
	doc, err := Step(ctx, "fetch", func(ctx workflow.Context) (api.Document, error) {
		if err := Emit(ctx, "fetching", map[string]string{"doc_id": in.DocID}); err != nil {
			return api.Document{}, err
		}
		var d api.Document
		err := workflow.ExecuteActivity(ctx, api.ActivityFetchDocument, in.DocID).Get(ctx, &d)
		return d, err
	})
	if err != nil {
		return DocumentApprovalResult{}, err
	}
	approver := ""
	if !in.Approved && workflow.GetVersion(ctx, ChangeStrictResume, workflow.DefaultVersion, 1) >= 1 {
		d, err := SuspendFor[DocumentApprovalDecision](ctx, "awaiting approval", "")
		if err != nil {
			return DocumentApprovalResult{}, err
		}
		if !*d.Approved {
			if err := Emit(ctx, "rejected", map[string]string{"doc_id": in.DocID, "reason": d.Reason}); err != nil {
				return DocumentApprovalResult{}, err
			}
			return DocumentApprovalResult{Done: true}, nil
		}
		approver = d.Approver
	} else if !in.Approved {
		// Runs that suspended before ChangeStrictResume: any input that is not
		// {"approved": true} denies, as it did then.
		input, err := Suspend(ctx, "awaiting approval", "")
		if err != nil {
			return DocumentApprovalResult{}, err
		}
		if ok, _ := input["approved"].(bool); !ok {
			reason, _ := input["reason"].(string)
			if err := Emit(ctx, "rejected", map[string]string{"doc_id": in.DocID, "reason": reason}); err != nil {
				return DocumentApprovalResult{}, err
			}
			return DocumentApprovalResult{Done: true}, nil
		}
		approver, _ = input["approver"].(string)
	}
	published, err := Checkpoint[string](ctx, "publish", api.ActivityPublishDocument, doc)
	if err != nil {
		return DocumentApprovalResult{}, err
	}
	return DocumentApprovalResult{Done: true, Published: published, Approver: approver}, nil
}

// BuildDashboardInput is the payload of BuildDashboard.
type BuildDashboardInput struct {
	Title string `json:"title"`
	// Metrics to gather, each an independent checkpoint (default sales and traffic).
	Metrics []string `json:"metrics"`
}

//go:embed templates/dashboard.html.tmpl
var dashboardTemplate string

// BuildDashboard gathers independent figures in parallel (CheckpointAll, one checkpoint
// per metric), then renders them into the artifact dashboard.html. An unknown metric fails
// the run after the others were stored, which shows `starter rerun` paying only for what
// is missing.
func BuildDashboard(ctx workflow.Context, in BuildDashboardInput) (map[string]any, error) {
	if in.Title == "" {
		in.Title = "Dashboard"
	}
	if len(in.Metrics) == 0 {
		in.Metrics = []string{"sales", "traffic"}
	}
	steps := make(map[string]StepFunc, len(in.Metrics))
	for _, m := range in.Metrics {
		steps[m] = Call(api.ActivityFetchMetric, m)
	}
	stored, err := CheckpointAll(ctx, steps)
	if err != nil {
		return nil, err
	}
	metrics := make([]api.Metric, 0, len(in.Metrics))
	values := map[string]float64{}
	for _, name := range in.Metrics {
		var m api.Metric
		if err := json.Unmarshal(stored[name], &m); err != nil {
			return nil, fmt.Errorf("decode metric %s: %w", name, err)
		}
		metrics = append(metrics, m)
		values[name] = m.Value
	}
	art, err := Artifact(ctx, "dashboard.html", ArtifactSource{
		Template: dashboardTemplate,
		Data:     map[string]any{"Title": in.Title, "Metrics": metrics},
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"artifact": art.Name, "metrics": values}, nil
}
