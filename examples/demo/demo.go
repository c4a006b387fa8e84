// Package demo holds the demo workflows of the README's Quickstart, DocumentApproval (a
// checkpoint, a human gate, a second checkpoint) and BuildDashboard (checkpoints in
// parallel, an artifact rendered from a template), and the activities they call. They
// show the authoring API (package workflows) at work; they are not part of the platform.
//
// The shipped worker registers them (platform.Workflows(demo.Register) and
// platform.Activity(demo.Activities{})), so `starter run DocumentApproval` works out of
// the box; a user's own worker built on platform.New runs only what it registers, so it
// has them only when it adds the same two options.
//
// It is a library package, not a main: a binary that wants the demos links this package
// and nothing else a main would bring.
package demo

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/workflows"
)

// The demo workflow type names.
const (
	DocumentApprovalName = "DocumentApproval"
	BuildDashboardName   = "BuildDashboard"
)

// Register registers DocumentApproval and BuildDashboard through the run runtime
// (workflows.Register). Their activities are Activities'.
func Register(r workflows.Registry) {
	workflows.Register(r, DocumentApprovalName, DocumentApproval, workflows.Options{})
	workflows.Register(r, BuildDashboardName, BuildDashboard, workflows.Options{})
}

// DocumentApprovalInput is the payload of DocumentApproval.
type DocumentApprovalInput struct {
	DocID string `json:"doc_id"`
	// Approved skips the human gate (a pre-approved document).
	Approved bool `json:"approved"`
}

// DocumentApprovalResult is what DocumentApproval returns. A denial is a result too:
// Denied with the reason the decider gave, so `starter show` answers "why was it not
// published?" without reading the events.
type DocumentApprovalResult struct {
	Done      bool   `json:"done"`
	Published string `json:"published"`
	// Approver is who decided (the decision's "approver", `--by`), approval or denial.
	Approver string `json:"approver,omitempty"`
	Denied   bool   `json:"denied,omitempty"`
	Reason   string `json:"reason,omitempty"`
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
	doc, err := workflows.Step(ctx, "fetch", func(ctx workflow.Context) (api.Document, error) {
		if err := workflows.Emit(ctx, "fetching", map[string]string{"doc_id": in.DocID}); err != nil {
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
	if !in.Approved && workflow.GetVersion(ctx, workflows.ChangeStrictResume, workflow.DefaultVersion, 1) >= 1 {
		d, err := workflows.SuspendFor[DocumentApprovalDecision](ctx, "awaiting approval", "")
		if err != nil {
			return DocumentApprovalResult{}, err
		}
		if !*d.Approved {
			if err := workflows.Emit(ctx, "rejected", map[string]string{"doc_id": in.DocID, "reason": d.Reason}); err != nil {
				return DocumentApprovalResult{}, err
			}
			return DocumentApprovalResult{Done: true, Denied: true, Reason: d.Reason, Approver: d.Approver}, nil
		}
		approver = d.Approver
	} else if !in.Approved {
		// Runs that suspended before workflows.ChangeStrictResume: any input that is not
		// {"approved": true} denies, as it did then.
		input, err := workflows.Suspend(ctx, "awaiting approval", "")
		if err != nil {
			return DocumentApprovalResult{}, err
		}
		if ok, _ := input["approved"].(bool); !ok {
			reason, _ := input["reason"].(string)
			if err := workflows.Emit(ctx, "rejected", map[string]string{"doc_id": in.DocID, "reason": reason}); err != nil {
				return DocumentApprovalResult{}, err
			}
			by, _ := input["approver"].(string)
			return DocumentApprovalResult{Done: true, Denied: true, Reason: reason, Approver: by}, nil
		}
		approver, _ = input["approver"].(string)
	}
	published, err := workflows.Checkpoint[string](ctx, "publish", api.ActivityPublishDocument, doc)
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
	steps := make(map[string]workflows.StepFunc, len(in.Metrics))
	for _, m := range in.Metrics {
		steps[m] = workflows.Call(api.ActivityFetchMetric, m)
	}
	stored, err := workflows.CheckpointAll(ctx, steps)
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
	art, err := workflows.Artifact(ctx, "dashboard.html", workflows.ArtifactSource{
		Template: dashboardTemplate,
		Data:     map[string]any{"Title": in.Title, "Metrics": metrics},
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"artifact": art.Name, "metrics": values}, nil
}
