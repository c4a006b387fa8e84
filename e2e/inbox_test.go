package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// inboxRow is a row of `starter approvals --json` and GET /v1/approvals.
type inboxRow struct {
	Agent      string          `json:"agent"`
	Run        string          `json:"run"`
	Workflow   string          `json:"workflow"`
	Instance   string          `json:"instance"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Capability string          `json:"capability"`
	Detail     string          `json:"detail"`
	Args       json.RawMessage `json:"args"`
	Since      time.Time       `json:"waiting_since"`
	Error      string          `json:"error"`
}

func (p *platform) inbox(args ...string) []inboxRow {
	p.t.Helper()
	out := p.ok(append([]string{"approvals", "--json"}, args...)...)
	var rows []inboxRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		p.t.Fatalf("starter approvals --json %v: %v\n%s", args, err, out)
	}
	return rows
}

// waitInbox polls `starter approvals --json` until it lists exactly the runs want (in any
// order) and returns the rows.
func (p *platform) waitInbox(want ...string) []inboxRow {
	p.t.Helper()
	slices.Sort(want)
	var rows []inboxRow
	var got []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		rows = p.inbox()
		got = got[:0]
		for _, r := range rows {
			got = append(got, r.Run)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return rows
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the inbox lists %q, want %q\nworker:\n%s", got, want, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestApprovalsInbox: two agent runs (agents scribe and keeper) and a session of keeper
// wait for approvals; `starter approvals` lists all three pending calls with what they
// would do, `--agent` filters by one visibility query, `--json` is an array, and the
// README's commands run as written. The API lists the same. A call approved from the CLI
// leaves the inbox; the Approvals page in headless Chromium lists what is left, approving
// a run's call there removes its row and lets the run finish, and the session's call,
// approved from the CLI while the page is open, goes from the page by itself.
func TestApprovalsInbox(t *testing.T) {
	write := func(path string) fakellm.Call {
		args, _ := json.Marshal(map[string]string{"path": path, "content": "inbox"})
		return fakellm.Call{Name: "write_file", Arguments: args}
	}
	model := fakellm.New(
		fakellm.Reply{Prompt: "scribe task", ToolCalls: []fakellm.Call{write("scribe.md")}},
		fakellm.Reply{Prompt: "scribe task", Content: "Wrote scribe.md."},
		fakellm.Reply{Prompt: "keeper task", ToolCalls: []fakellm.Call{write("keeper.md")}},
		fakellm.Reply{Prompt: "keeper task", Content: "Wrote keeper.md."},
		fakellm.Reply{Prompt: "session task", ToolCalls: []fakellm.Call{write("session.md")}},
		fakellm.Reply{Prompt: "session task", Content: "Wrote session.md."},
	)
	p := newPlatform(t)
	p.writeConfig(`llm: {base_url: ` + model.Start(t) + `, model: fake}
agents:
  - name: scribe
    permissions: {mode: approve}
    sandbox: {type: virtual}
  - name: keeper
    permissions: {mode: approve}
    sandbox: {type: virtual}
`)
	p.start()

	if out := p.ok("approvals"); !strings.Contains(out, "no tool call waits for a decision") {
		t.Errorf("an empty inbox prints %q", out)
	}
	scribeRun := strings.TrimSpace(p.ok("agent", "scribe", "the scribe task"))
	keeperRun := strings.TrimSpace(p.ok("agent", "keeper", "the keeper task"))
	// The session's prompt waits for its turn, so it runs in its own process.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prompt := p.startStarter(ctx, "session", "prompt", "keeper", "desk", "the session task")
	session := api.SessionID("keeper", "desk")

	rows := p.waitInbox(scribeRun, keeperRun, session)
	byRun := map[string]inboxRow{}
	for _, r := range rows {
		byRun[r.Run] = r
	}
	for run, want := range map[string]struct{ agent, workflow, instance, path string }{
		scribeRun: {"scribe", api.WorkflowAgentRun, "", "scribe.md"},
		keeperRun: {"keeper", api.WorkflowAgentRun, "", "keeper.md"},
		session:   {"keeper", api.WorkflowSession, "desk", "session.md"},
	} {
		r := byRun[run]
		var args bytes.Buffer
		_ = json.Compact(&args, r.Args)
		if r.Agent != want.agent || r.Workflow != want.workflow || r.Instance != want.instance || r.CallID == "" ||
			r.Tool != "write_file" || r.Capability != "write" || r.Detail != want.path ||
			!strings.Contains(args.String(), `"path":"`+want.path+`"`) || r.Since.IsZero() || r.Error != "" {
			t.Errorf("inbox row of %s = %+v, want agent %s, workflow %s, a write_file of %s", run, r, want.agent, want.workflow, want.path)
		}
	}
	if !rows[0].Since.Before(rows[2].Since) && !rows[0].Since.Equal(rows[2].Since) {
		t.Errorf("the inbox is not oldest first: %v then %v", rows[0].Since, rows[2].Since)
	}

	began := time.Now()
	table := p.ok("approvals")
	t.Logf("starter approvals (%s for the process, 3 calls):\n%s", time.Since(began).Round(time.Millisecond), table)
	for _, want := range []string{"AGENT", "RUN", "CALL", "TOOL", "CAPABILITY", "DETAIL", "ARGS", "WAITING SINCE",
		scribeRun, keeperRun, session, "scribe.md", `{"content":"inbox","path":"keeper.md"}`, "starter approve <run> --call <call>"} {
		if !strings.Contains(table, want) {
			t.Errorf("starter approvals lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(strings.ToUpper(table), "EXPIRES") {
		t.Errorf("starter approvals shows an expiry column, but calls have no deadline:\n%s", table)
	}
	if got := p.inbox("--agent", "keeper"); len(got) != 2 || got[0].Agent != "keeper" || got[1].Agent != "keeper" {
		t.Errorf("--agent keeper lists %+v, want the keeper run and the keeper session", got)
	}
	if got := p.inbox("--agent", "scribe"); len(got) != 1 || got[0].Run != scribeRun {
		t.Errorf("--agent scribe lists %+v, want %s only", got, scribeRun)
	}
	if out := p.ok("approvals", "--agent", "nobody"); !strings.Contains(out, "no tool call of agent nobody waits for a decision") {
		t.Errorf("--agent nobody prints %q", out)
	}
	if r := p.starter("approvals", "--agent", "x'y"); r.code == 0 || !strings.Contains(r.stderr, "contains a quote") {
		t.Errorf("--agent with a quote: exit %d, stderr %q", r.code, r.stderr)
	}
	// The README's commands, as written.
	for _, args := range readmeBlockCommands(t, "bin/starter approvals --agent keeper") {
		out := p.ok(args...)
		if !strings.Contains(out, keeperRun) || !strings.Contains(out, session) {
			t.Errorf("README's starter %s does not list the keeper's calls:\n%s", strings.Join(args, " "), out)
		}
	}

	// The API lists the same.
	g := gateway(t, p)
	var list struct{ Approvals []inboxRow }
	if err := json.Unmarshal(g.must(http.StatusOK, "GET", "/v1/approvals", nil), &list); err != nil || len(list.Approvals) != 3 {
		t.Fatalf("GET /v1/approvals: %+v (%v), want 3 calls", list, err)
	}
	if err := json.Unmarshal(g.must(http.StatusOK, "GET", "/v1/approvals?agent=scribe", nil), &list); err != nil ||
		len(list.Approvals) != 1 || list.Approvals[0].Run != scribeRun || list.Approvals[0].CallID != byRun[scribeRun].CallID {
		t.Fatalf("GET /v1/approvals?agent=scribe: %+v (%v)", list, err)
	}
	g.must(http.StatusBadRequest, "GET", "/v1/approvals?agent=a/b", nil)

	// Approved from the CLI, the scribe's call leaves the inbox.
	p.ok("approve", scribeRun, "--call", byRun[scribeRun].CallID)
	p.waitStatus(scribeRun, api.StatusDone)
	p.waitInbox(keeperRun, session)

	// The Approvals view.
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser part")
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", p.gateway)
	browser, bctx, _ := openBrowser(t, chrome, 1400, 900)
	pageText := func() string {
		dctx, dcancel := context.WithTimeout(browser, 5*time.Second)
		defer dcancel()
		body, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		return body
	}
	row := func(run string) string {
		return fmt.Sprintf(`tr.pending-call[data-key="%s %s"]`, run, byRun[run].CallID)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.Click(chromedp.CSS(`header nav a[href="/approvals"]`)), // linked from the header
		chromedp.WaitVisible(chromedp.CSS(row(keeperRun))),
		chromedp.WaitVisible(chromedp.CSS(row(session))),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
	); err != nil {
		t.Fatalf("open the Approvals view: %v\npage: %s", err, pageText())
	}
	n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.pending-call").length`))
	if err != nil || n != 2 {
		t.Errorf("the Approvals view shows %d calls (%v), want 2:\n%s", n, err, pageText())
	}
	if txt := pageText(); !strings.Contains(txt, "keeper.md") || !strings.Contains(txt, "session.md") || strings.Contains(txt, scribeRun) {
		t.Errorf("the Approvals view shows:\n%s", txt)
	}
	// The keeper's call is approved with edited arguments, from its row.
	edited := `{"content":"edited in the inbox","path":"keeper.md"}`
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row(keeperRun)+` details.edit summary`)),
		chromedp.SetValue(chromedp.CSS(row(keeperRun)+` textarea[name="args"]`), edited),
		chromedp.Click(chromedp.CSS(row(keeperRun)+` button[value="edit"]`)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q) === null`, row(keeperRun))),
	); err != nil {
		t.Fatalf("approve edited on the Approvals view: %v\npage: %s", err, pageText())
	}
	rec := p.waitStatus(keeperRun, api.StatusDone)
	if countEvents(rec, "approval_decided") != 1 {
		t.Errorf("the keeper run has %d approval_decided events, want 1", countEvents(rec, "approval_decided"))
	}
	for _, ev := range rec.Events {
		var d struct {
			EditedArgs struct{ Content string } `json:"edited_args"`
		}
		if ev.Type == "approval_decided" && (json.Unmarshal(ev.Data, &d) != nil || d.EditedArgs.Content != "edited in the inbox") {
			t.Errorf("the keeper's decision from the Approvals view is %s, want the edited arguments", ev.Data)
		}
	}
	p.waitInbox(session)

	// Decided elsewhere, the session's call goes from the open page by itself.
	p.ok("approve", session, "--call", byRun[session].CallID)
	if err := chromedp.Do(bctx,
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q) === null`, row(session))),
		chromedp.WaitVisible(chromedp.ID("approvals-empty")),
	); err != nil {
		t.Fatalf("the page kept the decided session call: %v\npage: %s", err, pageText())
	}
	if err := prompt.Wait(); err != nil {
		t.Fatalf("session prompt: %v\n%s\n%s", err, prompt.Stdout(), prompt.Stderr())
	}
	reply := prompt.Stdout()
	if !strings.Contains(reply, "Wrote session.md.") {
		t.Errorf("the session's turn replied %q", reply)
	}
	p.waitInbox()
}
