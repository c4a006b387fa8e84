package agents

import (
	"strings"
	"testing"
)

func TestToolConcurrencyAndPlanFields(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string // "" valid
	}{
		{Spec{Name: "a", ToolConcurrency: 4}, ""},
		{Spec{Name: "a", ToolConcurrency: -1}, "tool_concurrency: -1 is not between 1 and 32"},
		{Spec{Name: "a", ToolConcurrency: 33}, "tool_concurrency: 33 is not between 1 and 32"},
	} {
		err := tc.spec.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(tool_concurrency %d) = %v, want %q", tc.spec.ToolConcurrency, err, tc.want)
		}
	}
	has := func(s Spec) bool {
		for _, tool := range Offered(s) {
			if tool.Name == ToolUpdatePlan {
				return true
			}
		}
		return false
	}
	if has(Spec{Name: "a"}) || !has(Spec{Name: "a", Plan: true}) {
		t.Errorf("update_plan offered without plan: true, or not with it")
	}
}

func TestParsePlan(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{`{"steps":[{"step":"a","status":"done"},{"step":"b","status":"pending"}]}`, ""},
		{`{"steps":[]}`, ""},
		{`{}`, `"steps" is missing`},
		{`{"steps":[{"step":" ","status":"done"}]}`, "steps[0].step is empty"},
		{`{"steps":[{"step":"a","status":"later"}]}`, `steps[0].status "later" is not one of`},
		{`{"steps":[{"step":"a","status":"done","why":1}]}`, `unknown field "why"`},
		{`{"steps":"a, b"}`, `want {"steps"`},
	} {
		_, err := ParsePlan(tc.args)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ParsePlan(%s) = %v, want %q", tc.args, err, tc.want)
		}
	}
}
