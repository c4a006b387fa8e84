package agents

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nexo-temporal/nexo/permissions"
)

// MaxToolConcurrency bounds an agent's tool_concurrency: more calls at once than this
// from one model reply would only queue on the workers.
const MaxToolConcurrency = 32

// Plan step statuses.
const (
	PlanPending    = "pending"
	PlanInProgress = "in_progress"
	PlanDone       = "done"
)

// Plan limits: a plan is a short list the people watching can read, not a document.
const (
	MaxPlanSteps    = 50
	MaxPlanStepText = 500
)

// PlanStep is one step of an agent's plan (update_plan's arguments).
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"`
}

// updatePlanTool has capability read: it touches no sandbox and changes nothing but the
// plan the watchers see, so every mode that lets an agent read lets it plan.
var updatePlanTool = Tool{ToolUpdatePlan, permissions.CapRead, describe(ToolUpdatePlan), json.RawMessage(
	`{"type":"object","properties":{"steps":{"type":"array","description":"the whole plan, in order","items":{"type":"object","properties":{"step":{"type":"string","description":"what to do, in a few words"},"status":{"type":"string","enum":["pending","in_progress","done"]}},"required":["step","status"],"additionalProperties":false}}},"required":["steps"],"additionalProperties":false}`)}

// ParsePlan reads update_plan's arguments, or says what is wrong with them (the model
// reads the message and can send the plan again).
func ParsePlan(args string) ([]PlanStep, error) {
	var in struct {
		Steps *[]PlanStep `json:"steps"`
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf(`want {"steps": [{"step": "...", "status": "pending|in_progress|done"}]}: %v`, err)
	}
	if in.Steps == nil {
		return nil, fmt.Errorf(`"steps" is missing: send the whole plan as a list`)
	}
	steps := *in.Steps
	if len(steps) > MaxPlanSteps {
		return nil, fmt.Errorf("the plan has %d steps, more than %d: group them", len(steps), MaxPlanSteps)
	}
	for i, s := range steps {
		switch {
		case strings.TrimSpace(s.Step) == "":
			return nil, fmt.Errorf("steps[%d].step is empty", i)
		case len(s.Step) > MaxPlanStepText:
			return nil, fmt.Errorf("steps[%d].step is %d bytes, more than %d: say it shorter", i, len(s.Step), MaxPlanStepText)
		}
		switch s.Status {
		case PlanPending, PlanInProgress, PlanDone:
		default:
			return nil, fmt.Errorf("steps[%d].status %q is not one of pending, in_progress, done", i, s.Status)
		}
	}
	return steps, nil
}

// PlanSummary is update_plan's result: a short acknowledgement the model reads.
func PlanSummary(steps []PlanStep) string {
	n := map[string]int{}
	for _, s := range steps {
		n[s.Status]++
	}
	return fmt.Sprintf("plan updated: %d steps (%d done, %d in progress, %d pending)",
		len(steps), n[PlanDone], n[PlanInProgress], n[PlanPending])
}
