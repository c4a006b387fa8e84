package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestUnknownWorkflowTypesAreRefused: the worker announces what it offers to its task
// queue's registry, so a workflow type no worker has is refused before anything starts
// (issue 16 item 4), by the starter and by the API, and `starter workflows` lists what
// is offered.
func TestUnknownWorkflowTypesAreRefused(t *testing.T) {
	t.Parallel()
	model := fakellm.New() // never called: the agent only has to be configured
	p := newPlatform(t)
	p.writeConfig(agentConfig(model.Start(t)))
	p.extraEnv = []string{"NEXO_TEST_LLM_KEY=sk-test-secret"}
	p.start()
	gw := gateway(t, p)

	var view api.RegistryView
	// The worker announces before it says it is ready; the registry's first task may
	// still be on its way.
	pollUntil(t, 20*time.Second, "starter workflows answers", func(context.Context) error {
		r := p.starter("workflows", "--json")
		if r.code != 0 {
			return errors.New(r.stderr)
		}
		return json.Unmarshal([]byte(r.stdout), &view)
	})
	for _, want := range []string{"AgentRun", "BuildDashboard", "DocumentApproval", "Session"} {
		if !strings.Contains(strings.Join(view.Workflows, ","), want) {
			t.Errorf("starter workflows --json: workflows %v, want %s among them", view.Workflows, want)
		}
	}
	if strings.Contains(strings.Join(view.Workflows, ","), api.WorkflowRegistry) {
		t.Errorf("the registry offers itself as a workflow type: %v", view.Workflows)
	}
	if len(view.Agents) != 1 || view.Agents[0] != "scribe" || len(view.Workers) != 1 {
		t.Errorf("starter workflows --json: agents %v, workers %+v; want scribe and one worker", view.Agents, view.Workers)
	}
	out := p.ok("workflows")
	if !strings.Contains(out, "  DocumentApproval\n") || !strings.Contains(out, "  scribe\n") {
		t.Errorf("starter workflows:\n%s", out)
	}

	start := time.Now()
	r := p.starter("run", "NoSuchWorkflow", "--id", "nosuch-refused")
	if r.code != 1 || !strings.Contains(r.stderr, `no worker on task queue nexo offers workflow type "NoSuchWorkflow" (offered: AgentRun, BuildDashboard, DocumentApproval, Session)`) {
		t.Errorf("run NoSuchWorkflow: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("run NoSuchWorkflow took %v to be refused", d)
	}
	if _, err := p.dial().DescribeWorkflowExecution(context.Background(), "nosuch-refused", ""); !isNotFound(err) {
		t.Errorf("describe nosuch-refused after the refusal: %v, want not found (nothing started)", err)
	}
	if r := p.starter("run", "DocumentAproval"); r.code != 1 || !strings.Contains(r.stderr, `did you mean "DocumentApproval"?`) {
		t.Errorf("run DocumentAproval: exit %d, stderr %q", r.code, r.stderr)
	}
	status, body := gw.call("POST", "/v1/runs", map[string]any{"workflow": "NoSuchWorkflow", "id": "nosuch-api"})
	if status != 400 || !strings.Contains(string(body), `offers workflow type \"NoSuchWorkflow\"`) || !strings.Contains(string(body), `"offered"`) {
		t.Errorf("POST /v1/runs NoSuchWorkflow: %d %s", status, body)
	}
	if _, err := p.dial().DescribeWorkflowExecution(context.Background(), "nosuch-api", ""); !isNotFound(err) {
		t.Errorf("describe nosuch-api after the refusal: %v, want not found", err)
	}

	// An offered type still starts, and the registry is not a run in the list.
	p.ok("run", "DocumentApproval", "--id", "known", "--input", `{"doc_id":"1","approved":true}`, "--wait")
	if out := p.ok("list"); !strings.Contains(out, "known") || strings.Contains(out, api.WorkflowRegistry) {
		t.Errorf("starter list:\n%s", out)
	}
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
