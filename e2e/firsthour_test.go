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
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	"github.com/nexo-temporal/nexo/workflows/registry"
)

// TestRunInputFieldsAreChecked: a field of --input the workflow's input does not take is
// refused with the one meant, exit 2 and nothing started (issue 17 item 13), by the
// starter and the API, for the shipped workflows and for a user's own workflow on a worker
// of their own (announced as a platform-built worker announces).
func TestRunInputFieldsAreChecked(t *testing.T) {
	t.Parallel()
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
	// --no-check, as the README's "could not check" refusal offers, starts it unchecked.
	if r := p.starter("run", "DocumentApproval", "--input", `{"docid":"42"}`, "--id", "typo-unchecked", "--no-check"); r.code != 0 || strings.TrimSpace(r.stdout) != "typo-unchecked" {
		t.Errorf("run --no-check: exit %d, stdout %q, stderr %q; want the run started", r.code, r.stdout, r.stderr)
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
	// Announced as a worker older than the live rule would (no TTL): clients keep such an
	// entry while its identity polls the task queue, so the worker polls under that identity.
	w := worker.New(tc, queue, worker.Options{Identity: "invoices-worker"})
	rec := workflows.RecordTypes(w)
	workflows.Register(rec, "Invoice", invoice, workflows.Options{})
	rec.RegisterWorkflowWithOptions(registry.Workflow, workflow.RegisterOptions{Name: api.WorkflowRegistry})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	a := api.WorkerAnnouncement{Identity: "invoices-worker", Workflows: rec.Types(), Inputs: rec.Inputs(), At: time.Now()}
	if _, err := tc.SignalWithStartWorkflow(context.Background(), api.RegistryID(queue), api.SignalRegister, a,
		client.StartWorkflowOptions{ID: api.RegistryID(queue), TaskQueue: queue}, api.WorkflowRegistry, registry.State{}); err != nil {
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
	r = p.starter("run", "Invoice", "--task-queue", queue, "--input", `{"invoice_id":"7","amount":12.5}`, "--wait")
	if out := r.stderr; r.code != 0 || !strings.Contains(out, `"invoice 7: 12.50"`) {
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
	t.Parallel()
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
	t.Parallel()
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
	// `starter list` shows the failed run once, however many of its starts failed (issue 29
	// item 10: it showed twice): a second prompt fails the same way, a second execution
	// of the same id.
	if r := p.starter("session", "prompt", "ghost", "u1", "hello again"); r.code != 1 {
		t.Fatalf("second session prompt ghost: exit %d, stderr %q", r.code, r.stderr)
	}
	pollUntil(t, 20*time.Second, "visibility has both failed session runs", func(ctx context.Context) error {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `WorkflowId = 'session:ghost:u1' AND ExecutionStatus = 'Failed'`})
		if err != nil {
			return err
		}
		if n := len(resp.GetExecutions()); n < 2 {
			return fmt.Errorf("%d listed", n)
		}
		return nil
	})
	if out := p.ok("list"); strings.Count(out, "session:ghost:u1") != 1 {
		t.Errorf("starter list after a failed first prompt shows session:ghost:u1 %d times, want once:\n%s", strings.Count(out, "session:ghost:u1"), out)
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
	t.Parallel()
	cmds := readmeStarterCommands(t, "The example is in the repository, with a fake-model script", "")
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
	t.Parallel()
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

// readmeShellLines returns the commands of the README's first ```sh block containing
// marker, as sh reads them: continuation lines joined, comment-only and empty lines left out.
func readmeShellLines(t *testing.T, marker string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(readmeBlock(t, "sh", marker), "\\\n", " "), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// shell runs line with sh in dir, with env added, and returns its output; it fails the
// test when sh exits non-zero.
func shell(t *testing.T, ctx context.Context, dir, line string, env ...string) string {
	t.Helper()
	out, err := shellOut(ctx, dir, line, env...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return out
}

// shellOut is shell for a goroutine: the error is returned, not reported.
func shellOut(ctx context.Context, dir, line string, env ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("sh -c %q: %w", line, err)
	}
	return string(out), err
}

// background runs line like shellOut beside the test; the channel gets its output, or
// the error, once it ends.
func background(ctx context.Context, dir, line string, env ...string) chan string {
	done := make(chan string, 1)
	go func() {
		out, err := shellOut(ctx, dir, line, env...)
		if err != nil {
			out = err.Error() + "\n" + out
		}
		done <- out
	}()
	return done
}

// TestAPIAsWritten runs the README's curl commands of the HTTP API as printed, with GW
// the platform's gateway and the README's run ids replaced by real ones: a DocumentApproval
// run (019ad5e3-...), an agent run waiting on call 2.1 (01a2...), a BuildDashboard run
// (01a3...), and the assistant session of examples/sessions. The two `curl -N` streams run
// beside the others and end when their run or session closes.
func TestAPIAsWritten(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine: the README's API commands are not run here")
	}
	lines := readmeShellLines(t, "curl -s -X POST $GW/v1/runs")
	split := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "/v1/sessions/") })
	if split < 0 || !strings.HasPrefix(lines[0], "GW=") {
		t.Fatalf("README's API block: %q", lines)
	}
	runLines, sessionLines := lines[1:split], lines[split:]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Runs, on the offline agent demo's platform (its scribe waits on call 2.1).
	cfg, _ := exampleConfig(t, "agents", "scribe.script.json")
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	gwEnv := fmt.Sprintf("GW=http://127.0.0.1:%d", p.gateway)
	agentID := strings.TrimSpace(p.ok("agent", "scribe", "Write a haiku to notes.md"))
	p.waitStatus(agentID, api.StatusSuspended)
	r := p.starter("run", "BuildDashboard", "--wait")
	dash := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	p.waitStatus(dash, api.StatusDone)

	var docID string
	var streams []chan string
	for _, line := range runLines {
		line = strings.NewReplacer("019ad5e3-...", docID, "01a2...", agentID, "01a3...", dash).Replace(line)
		if strings.Contains(line, "curl -N") {
			streams = append(streams, background(ctx, p.dir, line, gwEnv))
			continue
		}
		out := shell(t, ctx, p.dir, line, gwEnv)
		if strings.Contains(out, `"title"`) && strings.Contains(out, `"status": 4`) {
			t.Errorf("%s: a problem answer:\n%s", line, out)
		}
		if docID == "" {
			var started struct{ ID string }
			if err := json.Unmarshal([]byte(out), &started); err != nil || started.ID == "" {
				t.Fatalf("%s: %q, want {\"id\": ...}", line, out)
			}
			docID = started.ID
			p.waitStatus(docID, api.StatusSuspended)
		}
	}
	var res map[string]any
	if rec := p.waitStatus(docID, api.StatusDone); json.Unmarshal(rec.Result, &res) != nil || res["approver"] != "ada" {
		t.Errorf("DocumentApproval approved through the API: result %s", rec.Result)
	}
	if rec := p.waitStatus(agentID, api.StatusDone); countEvents(rec, "approval_decided") != 1 || !strings.Contains(string(rec.Result), "You said no") {
		t.Errorf("the agent run denied through the API: result %s", rec.Result)
	}
	if b, err := os.ReadFile(filepath.Join(p.dir, "dashboard.html")); err != nil || !strings.Contains(string(b), "<td>sales</td>") {
		t.Errorf("dashboard.html downloaded through the API = %q, %v", b, err)
	}
	for _, s := range streams {
		if out := <-s; !strings.Contains(out, "event: end") || !strings.Contains(out, `"status":"done"`) {
			t.Errorf("the run's event stream did not end with the run done:\n%s", out)
		}
	}
	p.stop()

	// Sessions, on the Sessions example's platform.
	cfg, _ = exampleConfig(t, "sessions", "assistant.script.json")
	q := newPlatform(t)
	q.writeConfig(cfg)
	q.start()
	gwEnv = fmt.Sprintf("GW=http://127.0.0.1:%d", q.gateway)
	var stream chan string
	for _, line := range sessionLines {
		if strings.Contains(line, "curl -N") {
			stream = background(ctx, q.dir, line, gwEnv)
			continue
		}
		out := shell(t, ctx, q.dir, line, gwEnv)
		if strings.Contains(line, "/prompt") && !strings.Contains(out, `"reply": "Nice to meet you, Mac."`) && !strings.Contains(out, `"reply":"Nice to meet you, Mac."`) {
			t.Errorf("%s: %s", line, out)
		}
		if strings.HasSuffix(line, "/v1/sessions/assistant/u42") && !strings.Contains(out, "My name is Mac.") {
			t.Errorf("%s does not list the turn: %s", line, out)
		}
	}
	if stream == nil {
		t.Fatal("README's API block has no session stream")
	}
	if out := <-stream; !strings.Contains(out, `"type":"user_input"`) || !strings.Contains(out, "Nice to meet you, Mac.") {
		t.Errorf("the session stream (replayed, ended by close):\n%s", out)
	}
}

// TestAccessControlAsWritten starts the worker with the README's gateway tokens (its
// secrets made with the README's own openssl command) and runs its curl command as
// printed: the token reads the runs; without it the gateway refuses.
func TestAccessControlAsWritten(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on this machine: the README's access-control commands are not run here", tool)
		}
	}
	lines := readmeShellLines(t, "export NEXO_ADA_TOKEN=")
	if len(lines) != 2 {
		t.Fatalf("README's access-control block: %q", lines)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret := strings.TrimSpace(shell(t, ctx, t.TempDir(), strings.TrimPrefix(strings.TrimSuffix(lines[0], ")"), "export NEXO_ADA_TOKEN=$(")))
	rails := strings.TrimSpace(shell(t, ctx, t.TempDir(), "openssl rand -hex 32"))
	p := newPlatform(t)
	p.writeConfig(readmeBlock(t, "yaml", "token_env: NEXO_ADA_TOKEN"))
	p.extraEnv = []string{"NEXO_ADA_TOKEN=" + secret, "NEXO_RAILS_TOKEN=" + rails}
	p.start()
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"42"}`))
	gw := fmt.Sprintf("GW=http://127.0.0.1:%d", p.gateway)
	if out := shell(t, ctx, p.dir, lines[1], gw, "NEXO_ADA_TOKEN="+secret); !strings.Contains(out, id) {
		t.Errorf("%s: %s, want the runs (with %s)", lines[1], out, id)
	}
	if out := shell(t, ctx, p.dir, `curl -s $GW/v1/runs`, gw); strings.Contains(out, id) || !strings.Contains(out, "401") {
		t.Errorf("GET /v1/runs without the token: %s, want a 401 problem", out)
	}
}

// TestCustomWorkerInputFieldsAreChecked: a user's own worker built on package platform
// (examples/custom-worker, run as the README says) announces its workflow's input fields,
// so a mistyped field of RefundRequest is refused like one of a shipped workflow.
func TestCustomWorkerInputFieldsAreChecked(t *testing.T) {
	t.Parallel()
	p := refundPlatform(t, readmeCustomWorker(t)[1:])
	r := p.starter("run", "RefundRequest", "--input", `{"orderid":"A-1001","amount":42.5}`, "--id", "refund-typo")
	if r.code != 2 || !strings.Contains(r.stderr, `input of RefundRequest: unknown field "orderid" (did you mean "order_id"?)`) {
		t.Errorf("run RefundRequest with orderid: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := p.dial().DescribeWorkflowExecution(context.Background(), "refund-typo", ""); !isNotFound(err) {
		t.Errorf("describe refund-typo after the refusal: %v, want not found (nothing started)", err)
	}
}
