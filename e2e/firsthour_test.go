package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
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

// TestSkillsExampleAsWritten runs the README's skills commands as printed (the example's
// config and scripted model): the agent's run ends done, and `artifact <id> logo.png -o
// logo.png` writes the skill's logo byte for byte.
func TestSkillsExampleAsWritten(t *testing.T) {
	cmds := readmeStarterCommands(t, "The example is in the repository, with a fake-model script", "## Sessions")
	want := []string{`bin/starter agent reporter "Report on Q4" --wait`, `bin/starter artifact <id> logo.png -o logo.png`}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the README's skills commands changed; update this test with them:\n%s", strings.Join(cmds, "\n"))
	}
	p, _ := skillExample(t)
	p.start()
	r := p.starter(shellArgs(cmds[0])...)
	const started = "started agent reporter run "
	i := strings.Index(r.stderr, started)
	if r.code != 0 || i < 0 {
		t.Fatalf("%s: exit %d\n%s\n%s", cmds[0], r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stderr[i+len(started):])[0]
	for _, want := range []string{"sandbox_probed", `{"name":"skills:report-kit"}`, "skills_materialized", "run " + id + " is done"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("%s does not print %q:\n%s\n%s", cmds[0], want, r.stdout, r.stderr)
		}
	}
	p.ok(shellArgs(strings.ReplaceAll(cmds[1], "<id>", id))...)
	b, err := os.ReadFile(filepath.Join(p.dir, "logo.png"))
	sum := sha256.Sum256(b)
	if err != nil || hex.EncodeToString(sum[:]) != logoSum(t) {
		t.Errorf("logo.png written by the README's artifact command: %v, sha256 %x, want the skill asset's %s", err, sum, logoSum(t))
	}
}

// TestRealModelSectionAsWritten runs the README's "A real model" section as printed, with
// one change: llm.base_url points at the fake model, since no key for a real one exists
// here. Its nexo.yaml is the worker's ./nexo.yaml, OPENAI_API_KEY its literal "sk-...",
// and the starter's command its own; the key reaches the model and the scribe asks before
// writing notes.md.
func TestRealModelSectionAsWritten(t *testing.T) {
	yaml := readmeBlock(t, "yaml", "api_key_env: OPENAI_API_KEY")
	block := readmeBlock(t, "sh", "export OPENAI_API_KEY=")
	var key string
	var starterArgs []string
	for _, line := range strings.Split(block, "\n") {
		w := shellWords(t, line)
		switch {
		case len(w) == 2 && w[0] == "export":
			_, key, _ = strings.Cut(w[1], "=")
		case len(w) > 2 && w[0] == "go" && w[1] == "run" && w[2] == "./starter":
			starterArgs = w[3:]
		case len(w) > 2 && w[0] == "go" && w[1] == "run" && w[2] == "./worker":
			if strings.Join(w[3:], " ") != "--dev" {
				t.Fatalf("README's worker command is %q; the harness runs worker --dev", line)
			}
		}
	}
	if key == "" || len(starterArgs) == 0 {
		t.Fatalf("README's real-model block lacks the export or the starter command:\n%s", block)
	}
	args, _ := json.Marshal(map[string]string{"path": "notes.md", "content": "A summary."})
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "write_file", Arguments: args}}},
		fakellm.Reply{Content: "I wrote notes.md."},
	)
	base := model.Start(t)
	p := newPlatform(t)
	p.writeConfig(regexp.MustCompile(`(?m)^  base_url: .*$`).ReplaceAllString(yaml, "  base_url: "+base))
	p.extraEnv = []string{"OPENAI_API_KEY=" + key}
	p.start()
	r := p.starter(starterArgs...)
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 1.1)") {
		t.Fatalf("starter %s: exit %d\n%s\n%s", strings.Join(starterArgs, " "), r.code, r.stdout, r.stderr)
	}
	reqs := model.Requests()
	if len(reqs) == 0 || reqs[0].Auth != "Bearer "+key {
		t.Errorf("the model was called %d times; first Authorization %q, want the key from OPENAI_API_KEY", len(reqs), firstAuth(reqs))
	}
}

func firstAuth(reqs []fakellm.Request) string {
	if len(reqs) == 0 {
		return ""
	}
	return reqs[0].Auth
}
