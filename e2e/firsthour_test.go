package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/workflows"
)

// TestRunInputFieldsAreChecked: a field of --input the workflow's input does not take is
// refused with the one meant, exit 2 and nothing started (issue 17 item 13), by the
// starter and the API, for the shipped workflows and for a user's own workflow on a worker
// of their own (announced as a platform-built worker announces).
func TestRunInputFieldsAreChecked(t *testing.T) {
	p := newPlatform(t)
	p.start()
	gw := gateway(t, p)
	const want = `unknown field "docid" (did you mean "doc_id"?)`

	// The worker announces before it is ready; its registry may still be starting.
	pollUntil(t, 20*time.Second, "the registry knows DocumentApproval's input", func(context.Context) error {
		r := p.starter("workflows", "--json")
		if !strings.Contains(r.stdout, `"doc_id"`) {
			return fmt.Errorf("starter workflows --json: %s %s", r.stdout, r.stderr)
		}
		return nil
	})
	r := p.starter("run", "DocumentApproval", "--input", `{"docid":"42"}`, "--id", "typo-refused")
	if r.code != 2 || !strings.Contains(r.stderr, "starter run: input of DocumentApproval: "+want) {
		t.Errorf("run DocumentApproval --input {\"docid\":\"42\"}: exit %d, stdout %q, stderr %q; want exit 2 and %s", r.code, r.stdout, r.stderr, want)
	}
	if _, err := p.dial().DescribeWorkflowExecution(context.Background(), "typo-refused", ""); !isNotFound(err) {
		t.Errorf("describe typo-refused after the refusal: %v, want not found (nothing started)", err)
	}
	status, body := gw.call("POST", "/v1/runs", map[string]any{"workflow": "DocumentApproval", "id": "typo-api", "input": map[string]any{"docid": "42"}})
	if status != 400 || !strings.Contains(string(body), `unknown field \"docid\" (did you mean \"doc_id\"?)`) {
		t.Errorf("POST /v1/runs with docid: %d %s", status, body)
	}
	if _, err := p.dial().DescribeWorkflowExecution(context.Background(), "typo-api", ""); !isNotFound(err) {
		t.Errorf("describe typo-api after the refusal: %v, want not found", err)
	}

	// A user's own workflow, registered with workflows.Register on their own worker.
	tc := p.dial()
	const queue = "invoices"
	w := worker.New(tc, queue, worker.Options{})
	rec := workflows.RecordTypes(w)
	workflows.Register(rec, "Invoice", invoice, workflows.Options{})
	rec.RegisterWorkflowWithOptions(workflows.RegistryWorkflow, workflow.RegisterOptions{Name: api.WorkflowRegistry})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	a := api.WorkerAnnouncement{Identity: "invoices-worker", Workflows: rec.Types(), Inputs: rec.Inputs(), At: time.Now()}
	if _, err := tc.SignalWithStartWorkflow(context.Background(), api.RegistryID(queue), api.SignalRegister, a,
		client.StartWorkflowOptions{ID: api.RegistryID(queue), TaskQueue: queue}, api.WorkflowRegistry, workflows.RegistryState{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 20*time.Second, "the invoices registry answers", func(context.Context) error {
		if r := p.starter("workflows", "--task-queue", queue); !strings.Contains(r.stdout, "Invoice") {
			return fmt.Errorf("starter workflows --task-queue %s: %s %s", queue, r.stdout, r.stderr)
		}
		return nil
	})
	r = p.starter("run", "Invoice", "--task-queue", queue, "--input", `{"invoiceid":"7","amount":12.5,"currency":"EUR"}`)
	if r.code != 2 || !strings.Contains(r.stderr, `input of Invoice: unknown field "currency" (it takes amount, invoice_id); unknown field "invoiceid" (did you mean "invoice_id"?)`) {
		t.Errorf("run Invoice with a mistyped field: exit %d, stderr %q", r.code, r.stderr)
	}
	out := p.ok("run", "Invoice", "--task-queue", queue, "--input", `{"invoice_id":"7","amount":12.5}`, "--wait")
	if !strings.Contains(out, `"invoice 7: 12.50"`) {
		t.Errorf("run Invoice with its fields --wait:\n%s", out)
	}
}

type invoiceInput struct {
	InvoiceID string  `json:"invoice_id"`
	Amount    float64 `json:"amount"`
}

func invoice(_ workflow.Context, in invoiceInput) (string, error) {
	return fmt.Sprintf("invoice %s: %.2f", in.InvoiceID, in.Amount), nil
}

// TestTemporalUILinksBackToTheRunPage: a run started by the starter or through the API
// carries, as the static summary and details the Temporal Web UI shows (Markdown), a link
// to its Nexo page (issue 17 item 14); the link opens that page.
func TestTemporalUILinksBackToTheRunPage(t *testing.T) {
	p := newPlatform(t)
	p.start()
	gw := gateway(t, p)
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"42"}`))
	status, body := gw.call("POST", "/v1/runs", map[string]any{"workflow": "DocumentApproval", "input": map[string]any{"doc_id": "43"}})
	var started struct{ ID string }
	if status != 201 && status != 200 || json.Unmarshal(body, &started) != nil || started.ID == "" {
		t.Fatalf("POST /v1/runs: %d %s", status, body)
	}
	for _, id := range []string{id, started.ID} {
		page := fmt.Sprintf("http://127.0.0.1:%d/runs/%s", p.gateway, id)
		summary, details := uiUserMetadata(t, p, id)
		if want := "DocumentApproval run · [open in Nexo](" + page + ")"; summary != want {
			t.Errorf("run %s: the Temporal UI's summary is %q, want %q", id, summary, want)
		}
		if want := "[" + page + "](" + page + ")"; !strings.Contains(details, want) {
			t.Errorf("run %s: the Temporal UI's details are %q, want a link %q", id, details, want)
		}
		pollUntil(t, 10*time.Second, "the linked page", func(ctx context.Context) error {
			return httpGetContains(ctx, page, id)
		})
	}
}

// uiUserMetadata returns the summary and details of workflow id as the Temporal Web UI
// reads them: from its own API (the describe call of the workflow page), decoded.
func uiUserMetadata(t *testing.T, p *platform, id string) (summary, details string) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces/default/workflows/%s", p.ui, id)
	var desc struct {
		ExecutionConfig struct {
			UserMetadata struct {
				Summary, Details struct{ Data string }
			}
		}
	}
	pollUntil(t, 10*time.Second, "GET "+url, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
		}
		return json.Unmarshal(b, &desc)
	})
	decode := func(data string) string {
		raw, err := base64.StdEncoding.DecodeString(data)
		var s string
		if err != nil || json.Unmarshal(raw, &s) != nil {
			t.Fatalf("user metadata payload %q is not a JSON string", data)
		}
		return s
	}
	return decode(desc.ExecutionConfig.UserMetadata.Summary.Data), decode(desc.ExecutionConfig.UserMetadata.Details.Data)
}

// TestFailedFirstPromptLeavesNoSession: a session whose first prompt failed (an agent the
// worker does not have) says why and is not listed (issue 17 item 5); once the agent is
// configured, the next prompt starts it afresh and it is listed running.
func TestFailedFirstPromptLeavesNoSession(t *testing.T) {
	model := fakellm.New(fakellm.Reply{Content: "Hello, I am ghost."})
	base := model.Start(t)
	p := newPlatform(t)
	p.writeConfig(agentConfig(base))
	p.extraEnv = []string{"NEXO_TEST_LLM_KEY=sk-test-secret"}
	p.start()
	r := p.starter("session", "prompt", "ghost", "u1", "hello")
	if r.code != 1 || !strings.Contains(r.stderr, `session session:ghost:u1 could not start: no agent "ghost"`) {
		t.Fatalf("session prompt ghost: exit %d, stderr %q", r.code, r.stderr)
	}
	// Only once visibility holds the failed run does its absence from the list mean anything.
	tc := p.dial()
	pollUntil(t, 20*time.Second, "visibility has the failed session run", func(ctx context.Context) error {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `WorkflowId = 'session:ghost:u1' AND ExecutionStatus = 'Failed'`})
		if err != nil {
			return err
		}
		if len(resp.GetExecutions()) == 0 {
			return fmt.Errorf("not listed yet")
		}
		return nil
	})
	if out := p.ok("session", "list"); strings.Contains(out, "ghost") {
		t.Errorf("session list after a failed first prompt:\n%s", out)
	}
	if out := p.ok("session", "list", "--json"); strings.Contains(out, "ghost") {
		t.Errorf("session list --json after a failed first prompt:\n%s", out)
	}

	p.stop()
	p.writeConfig(agentConfig(base) + `  - name: ghost
    instructions: You greet.
    sandbox: {type: virtual}
`)
	p.start()
	if out := p.ok("session", "prompt", "ghost", "u1", "hello"); !strings.Contains(out, "Hello, I am ghost.") {
		t.Errorf("session prompt ghost after configuring it:\n%s", out)
	}
	pollUntil(t, 20*time.Second, "session list shows ghost running", func(context.Context) error {
		if out := p.ok("session", "list"); !strings.Contains(out, "ghost") || !strings.Contains(out, "running") {
			return fmt.Errorf("session list:\n%s", out)
		}
		return nil
	})
}
