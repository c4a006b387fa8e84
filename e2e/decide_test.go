package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// temporalCLI is the official temporal CLI's path, or "" when it is not installed.
func temporalCLI() string {
	if bin, err := exec.LookPath("temporal"); err == nil {
		return bin
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	bin := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "temporal")
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	return bin
}

// historyLength is the number of events in run id's history, as `temporal workflow show
// --output json` prints it.
func historyLength(t *testing.T, p *platform, bin, id string) int {
	t.Helper()
	cmd := exec.Command(bin, "workflow", "show", "--workflow-id", id, "--output", "json")
	cmd.Env = append(os.Environ(), fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", p.frontend))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("temporal workflow show %s: %v\n%s", id, err, out)
	}
	var h struct{ Events []json.RawMessage }
	if err := json.Unmarshal(out, &h); err != nil || len(h.Events) == 0 {
		t.Fatalf("temporal workflow show --output json: %v\n%.500s", err, out)
	}
	return len(h.Events)
}

// toolMessages are the tool results the model was sent, in order, each once.
func toolMessages(model *fakellm.Server) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if c, _ := m["content"].(string); m["role"] == "tool" && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

func sentTo(model *fakellm.Server, want string) bool {
	for _, c := range toolMessages(model) {
		if strings.Contains(c, want) {
			return true
		}
	}
	return false
}

func decidedEvent(t *testing.T, rec api.Record) map[string]any {
	t.Helper()
	for _, ev := range rec.Events {
		if ev.Type == "approval_decided" {
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			return d
		}
	}
	t.Fatalf("run %s has no approval_decided event", rec.ID)
	return nil
}

// TestDecideThroughStarterAPIAndPage: decisions on a gated write_file call through the
// real starter, the gateway's API and its page in headless Chromium. A refused decision
// (a wrong call id, a stale sha256) is answered with the run's reason and leaves the run's
// Temporal history exactly as long as before; an edit runs the call with the edited
// arguments and tells the model; an answer runs no tool and gives the model the human's
// text.
func TestDecideThroughStarterAPIAndPage(t *testing.T) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeNotes("the model's draft")}},
		fakellm.Reply{Content: "Done."},
	)
	p := newPlatform(t)
	g := gateway(t, p)
	p.writeConfig(agentConfig(model.Start(t)))
	p.extraEnv = append(p.extraEnv, "NEXO_TEST_LLM_KEY=sk-test")
	ws := filepath.Join(p.dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	p.start()
	start := func(t *testing.T, prompt string) (string, api.ApprovalInfo) {
		t.Helper()
		id := g.startRun(api.WorkflowAgentRun, map[string]any{"agent": "scribe", "prompt": prompt})
		a, ok := p.waitStatus(id, api.StatusSuspended).Approval()
		// show --json indents the record: the sha256 is of the compact arguments.
		var compact bytes.Buffer
		if err := json.Compact(&compact, a.Args); !ok || err != nil || a.CallID != "1.1" || a.ArgsSHA256 != api.ArgsSHA256(compact.Bytes()) {
			t.Fatalf("run %s waits for %+v; want call 1.1 with the sha256 of its compact args", id, a)
		}
		return id, a
	}
	file := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(ws, rel))
		if err != nil {
			return ""
		}
		return string(b)
	}

	t.Run("starter refusal then edit", func(t *testing.T) {
		id, a := start(t, "Write notes, starter edit.")
		if show := p.ok("show", id); !strings.Contains(show, "args_sha256  "+a.ArgsSHA256) {
			t.Errorf("show does not print the pending call's args_sha256:\n%s", show)
		}
		bin := temporalCLI()
		before := 0
		if bin != "" {
			before = historyLength(t, p, bin, id)
		}
		r := p.starter("approve", id, "--call", "9.9")
		if want := `run ` + id + ` refused the decision on tool call 9.9: unknown tool call "9.9": the pending call is 1.1 (write_file)`; r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Fatalf("approve --call 9.9: exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
		}
		if bin == "" {
			t.Log("the temporal CLI is not installed: history length before/after not compared")
		} else if after := historyLength(t, p, bin, id); after != before {
			t.Errorf("the refused decision changed the history: %d events before, %d after", before, after)
		}
		if rec := p.record(id); countEvents(rec, "signal_ignored") != 0 || rec.Status != api.StatusSuspended {
			t.Errorf("after the refusal: status %s, %d signal_ignored", rec.Status, countEvents(rec, "signal_ignored"))
		}

		w := p.starter("approve", id, "--call", "1.1", "--args", `{"path":"drafts/notes.md","content":"edited by ada"}`, "--by", "ada", "--wait")
		out := w.stdout + w.stderr
		if !strings.Contains(out, `approved tool call 1.1 (write_file) of run `+id+` with edited arguments {"path":"drafts/notes.md","content":"edited by ada"}`) || !strings.Contains(out, "is done") {
			t.Errorf("approve --args --wait:\n%s", out)
		}
		if got := file("drafts/notes.md"); got != "edited by ada" || file("notes.md") != "" {
			t.Errorf("drafts/notes.md = %q, notes.md = %q; want only the edited write", got, file("notes.md"))
		}
		if !sentTo(model, `A human edited this call's arguments to {"path":"drafts/notes.md","content":"edited by ada"}`) {
			t.Errorf("the model was not told of the edit: %q", toolMessages(model))
		}
		d := decidedEvent(t, p.record(id))
		orig, _ := json.Marshal(d["args"])
		edited, _ := json.Marshal(d["edited_args"])
		if d["action"] != "approve" || d["by"] != "ada" || !strings.Contains(string(orig), "the model's draft") || !strings.Contains(string(edited), "drafts/notes.md") {
			t.Errorf("approval_decided = %v", d)
		}
		if r := p.starter("approve", id, "--call", "1.1"); r.code != 1 || !strings.Contains(r.stderr, "is not suspended (done)") {
			t.Errorf("approve a done run: exit %d, %s", r.code, r.stderr)
		}
	})

	t.Run("starter answer", func(t *testing.T) {
		id, _ := start(t, "Write notes, starter answer.")
		w := p.starter("answer", id, "--call", "1.1", "--result", "No need: the notes exist in the wiki.", "--wait")
		out := w.stdout + w.stderr
		if !strings.Contains(out, "answered tool call 1.1 (write_file) of run "+id) || !strings.Contains(out, "is done") {
			t.Errorf("answer --wait:\n%s", out)
		}
		if !sentTo(model, "A human answered this call instead of running write_file; their answer:\nNo need: the notes exist in the wiki.") {
			t.Errorf("the model did not get the answer: %q", toolMessages(model))
		}
		if d := decidedEvent(t, p.record(id)); d["action"] != "answer" || d["result"] != "No need: the notes exist in the wiki." {
			t.Errorf("approval_decided = %v", d)
		}
		if file("notes.md") != "" {
			t.Error("an answered call wrote notes.md")
		}
	})

	t.Run("api", func(t *testing.T) {
		id, _ := start(t, "Write notes, API edit.")
		status, body := g.call("POST", "/v1/runs/"+id+"/approvals/1.1", map[string]any{
			"action": "approve", "args": map[string]string{"path": "api.md", "content": "via the API"}, "args_sha256": strings.Repeat("0", 64)})
		if status != http.StatusConflict || !strings.Contains(string(body), "the arguments of tool call 1.1 changed since the request") {
			t.Fatalf("stale sha256: %d %s; want 409 naming the changed arguments", status, body)
		}
		g.must(http.StatusAccepted, "POST", "/v1/runs/"+id+"/approvals/1.1", map[string]any{
			"action": "approve", "args": map[string]string{"path": "api.md", "content": "via the API"}})
		p.waitStatus(id, api.StatusDone)
		if got := file("api.md"); got != "via the API" {
			t.Errorf("api.md = %q", got)
		}

		id, _ = start(t, "Write notes, API answer.")
		b := g.must(http.StatusAccepted, "POST", "/v1/runs/"+id+"/approvals/1.1", map[string]any{"action": "answer", "result": "answered over HTTP"})
		var acc struct {
			Action   string
			Approved *bool
		}
		if err := json.Unmarshal(b, &acc); err != nil || acc.Action != "answer" || acc.Approved != nil {
			t.Errorf("answer accepted as %s", b)
		}
		p.waitStatus(id, api.StatusDone)
		if !sentTo(model, "their answer:\nanswered over HTTP") {
			t.Errorf("the model did not get the HTTP answer: %q", toolMessages(model))
		}
		status, body = g.call("POST", "/v1/runs/"+id+"/approvals/1.1", map[string]any{"action": "answer", "result": "again"})
		if status != http.StatusConflict {
			t.Errorf("answer a done run: %d %s, want 409", status, body)
		}
	})

	t.Run("page", func(t *testing.T) {
		chrome := chromiumPath()
		if chrome == "" {
			t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser test")
		}
		_, ctx, dialogs := openBrowser(t, chrome, 1280, 1100)

		id, _ := start(t, "Write notes, page edit.")
		if err := chromedp.Do(ctx,
			chromedp.Navigate(g.base+"/runs/"+id),
			chromedp.WaitVisible(chromedp.CSS("#live.live")),
			chromedp.Click(chromedp.CSS("#edit summary")),
			chromedp.WaitVisible(chromedp.ID("edit-args")),
			chromedp.SetValue(chromedp.ID("edit-args"), `{"path": "page.md", "content": "edited on the page"}`),
			chromedp.Click(chromedp.ID("approve-edited")),
			chromedp.WaitVisible(chromedp.CSS("#status.s-done")),
		); err != nil {
			t.Fatalf("edit on the page: %v\nrecord: %s", err, p.ok("show", id))
		}
		if got := file("page.md"); got != "edited on the page" {
			t.Errorf("page.md = %q", got)
		}
		if d := decidedEvent(t, p.record(id)); d["by"] != "local" || d["edited_args"] == nil {
			t.Errorf("approval_decided = %v", d)
		}

		id, _ = start(t, "Write notes, page answer.")
		if err := chromedp.Do(ctx,
			chromedp.Navigate(g.base+"/runs/"+id),
			chromedp.WaitVisible(chromedp.CSS("#live.live")),
			chromedp.Click(chromedp.CSS("#edit summary")),
			chromedp.WaitVisible(chromedp.ID("answer-result")),
			chromedp.SetValue(chromedp.ID("answer-result"), "answered on the page"),
			chromedp.Click(chromedp.ID("answer")),
			chromedp.WaitVisible(chromedp.CSS("#status.s-done")),
		); err != nil {
			t.Fatalf("answer on the page: %v\nrecord: %s", err, p.ok("show", id))
		}
		if !sentTo(model, "their answer:\nanswered on the page") {
			t.Errorf("the model did not get the page's answer: %q", toolMessages(model))
		}
		if d := dialogs(); len(d) > 0 {
			t.Errorf("dialogs opened: %q", d)
		}
	})
}

// TestDecideAsWritten runs the README's "Decisions the run checks" commands as printed,
// with examples/agents' config and script: a decision naming the wrong call is refused by
// the run, an edit writes where the human said, an answer writes nothing.
func TestDecideAsWritten(t *testing.T) {
	t.Parallel()
	cmds := readmeBlockCommands(t, "bin/starter answer <id> --call 2.1")
	var lines []string
	for _, c := range cmds {
		lines = append(lines, strings.Join(c, " "))
	}
	want := []string{
		`agent scribe Write a haiku to notes.md --wait`,
		`show <id>`,
		`approve <id> --call 9.9`,
		`approve <id> --call 2.1 --args {"path":"drafts/haiku.md","content":"Edited by a human.\n"} --wait`,
		`agent scribe Write a haiku to notes.md --wait`,
		`answer <id> --call 2.1 --result No need: the haiku is in the wiki. --wait`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the README's decision commands changed; update this test with them:\n%s", strings.Join(lines, "\n"))
	}
	cfg, _ := exampleConfig(t, "agents", "scribe.script.json")
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	id := ""
	run := func(i, code int) result {
		t.Helper()
		args := substitute(cmds[i], map[string]string{"<id>": id})
		r := p.starter(args...)
		if r.code != code {
			t.Fatalf("starter %s: exit %d, want %d\n%s\n%s\nworker:\n%s", lines[i], r.code, code, r.stdout, r.stderr, p.output())
		}
		if k := strings.Index(r.stdout+r.stderr, "started agent scribe run "); k >= 0 {
			id = strings.Fields((r.stdout + r.stderr)[k+len("started agent scribe run "):])[0]
		}
		t.Logf("$ starter %s\n%s%s", lines[i], r.stdout, r.stderr)
		return r
	}
	ws := filepath.Join(p.dir, "workspace")

	if r := run(0, 0); !strings.Contains(r.stdout+r.stderr, "suspended: approval of write_file (call 2.1)") {
		t.Fatalf("not suspended on call 2.1:\n%s\n%s", r.stdout, r.stderr)
	}
	a, _ := p.record(id).Approval()
	if out := run(1, 0).stdout; !strings.Contains(out, "args_sha256  "+a.ArgsSHA256) {
		t.Errorf("show lacks the args_sha256:\n%s", out)
	}
	if r := run(2, 1); !strings.Contains(r.stderr, "starter approve: run "+id+` refused the decision on tool call 9.9: unknown tool call "9.9": the pending call is 2.1 (write_file)`) {
		t.Errorf("approve --call 9.9 said %q", r.stderr)
	}
	if r := run(3, 0); !strings.Contains(r.stdout+r.stderr, "with edited arguments") || !strings.Contains(r.stdout+r.stderr, "You edited my call; I wrote the file where you said.") {
		t.Errorf("approve --args --wait:\n%s%s", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "drafts", "haiku.md")); err != nil || string(b) != "Edited by a human.\n" {
		t.Errorf("drafts/haiku.md = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.md")); err == nil {
		t.Error("the edited call wrote notes.md too")
	}
	run(4, 0)
	if r := run(5, 0); !strings.Contains(r.stdout+r.stderr, "answered tool call 2.1 (write_file)") || !strings.Contains(r.stdout+r.stderr, "You answered for me, so I wrote nothing.") {
		t.Errorf("answer --wait:\n%s%s", r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.md")); err == nil {
		t.Error("the answered call wrote notes.md")
	}

	// An edit the run refuses (its path leaves the workspace): the model is told, and its
	// last word says it wrote nothing, not that it wrote where the human said (issue 29,
	// item 6).
	refused := strings.TrimSpace(p.ok("agent", "scribe", "Write a haiku to notes.md"))
	p.waitStatus(refused, api.StatusSuspended)
	p.ok("approve", refused, "--call", "2.1", "--args", `{"path":"../outside.md","content":"Edited by a human.\n"}`)
	rec := p.waitStatus(refused, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "You edited my call, but the edit was refused, so I wrote nothing." {
		t.Errorf("the refused edit's run ended with %s (%v), want the model saying it wrote nothing", rec.Result, err)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "outside.md")); err == nil {
		t.Error("the refused edit wrote outside the workspace")
	}
}
