package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// budgetConfig is the budget demo's shipped config (examples/agents/budget.yaml): the agent
// counter (read_only: it may glob) whose budget is one token, so its first model call
// spends it and it pauses before the second; the model is priced.
func budgetConfig(t *testing.T, modelURL string) string {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "agents", "budget.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^  base_url: .*$`).ReplaceAllString(string(cfg), "  base_url: "+modelURL)
}

// budgetModel is the demo's shipped script (examples/agents/counter.script.json): it
// globs, then answers; every run of counter makes at most these two calls.
func budgetModel(t *testing.T) *fakellm.Server {
	t.Helper()
	model, err := fakellm.Load(filepath.Join("..", "examples", "agents", "counter.script.json"))
	if err != nil {
		t.Fatal(err)
	}
	return model
}

// TestBudgetEndToEnd, through the real worker and starter: a run that spent its budget
// suspends with a budget pause (show, approvals); approve without a raise is refused;
// `approve --budget +N` lets it finish, with usage and cost in `show`; a second run is
// denied and ends done with a result saying it stopped at its budget; a third is raised
// through the HTTP API; `starter usage` sums the three, by agent and by model, and refuses
// a bad time.
func TestBudgetEndToEnd(t *testing.T) {
	t.Parallel()
	cfg, _ := shippedDemo(t, "bin/starter approve <id> --budget +50000") // the docs' demo, as shipped
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()

	id := strings.TrimSpace(p.ok("agent", "counter", "Count the files."))
	rec := p.waitStatus(id, api.StatusSuspended)
	a, ok := rec.Approval()
	if !ok || a.Capability != api.CapabilityBudget || a.CallID != "budget-2" {
		t.Fatalf("pending = %+v, want the budget pause budget-2", a)
	}
	show := p.ok("show", id)
	for _, want := range []string{"suspended: budget: agent counter used", "of 1 tokens in this run", "budget pause budget-2: agent counter used ", " of 1 (reached), cost $",
		"Usage", "1 call,", "next: starter approve " + id + " --budget +N"} {
		if !strings.Contains(show, want) {
			t.Errorf("show while paused lacks %q:\n%s", want, show)
		}
	}
	if inbox := p.ok("approvals"); !strings.Contains(inbox, "budget-2") || !strings.Contains(inbox, "counter") {
		t.Errorf("approvals does not list the budget pause:\n%s", inbox)
	} else {
		// Issue 29 item 7: the row reads as a pause (no ": " lead, figures instead of
		// JSON) and the footer gives the command a budget pause takes.
		for _, want := range []string{"agent counter used ", " of 1 tokens in this run", "of 1 (reached)",
			"budget pauses: starter approve <run> --budget +N (tokens) or --budget +$X (USD)  or  starter deny <run> --reason TEXT"} {
			if !strings.Contains(inbox, want) {
				t.Errorf("approvals lacks %q:\n%s", want, inbox)
			}
		}
		for _, bad := range []string{"  : agent", `{"agent"`, "--call <call>"} {
			if strings.Contains(inbox, bad) {
				t.Errorf("approvals shows %q for a budget pause:\n%s", bad, inbox)
			}
		}
	}
	if r := p.starter("approve", id); r.code != 1 || !strings.Contains(r.stderr, "approve it with a raise") {
		t.Errorf("approve without --budget: exit %d\n%s", r.code, r.stderr)
	}
	// One +N or +$X, bounded (hardening round two, item 1: 2^63-1 overflowed the bound
	// and "+5,+5" was taken as +10).
	for raise, want := range map[string]string{
		"lots":                 `"lots" is not a raise`,
		"+5,+5":                `"+5,+5" is not a raise: want one +N tokens`,
		"+9223372036854775807": `"+9223372036854775807" is not a token raise: want +N tokens with 1 ≤ N ≤ 1000000000`,
	} {
		if r := p.starter("approve", id, "--budget", raise); r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("approve --budget %s: exit %d, want 2 and %q\n%s", raise, r.code, want, r.stderr)
		}
	}
	if out := p.ok("approve", id, "--budget", "+50000"); !strings.Contains(out, "raised the budget of run "+id+" by +50000 tokens (budget-2)") {
		t.Errorf("approve --budget: %s", out)
	}
	rec = p.waitStatus(id, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "There are no files." {
		t.Fatalf("result %s (%v)", rec.Result, err)
	}
	if rec.Usage == nil || rec.Usage.Calls != 2 || rec.Usage.TotalTokens == 0 || rec.Usage.Cost <= 0 || rec.Usage.UnpricedCalls != 0 ||
		rec.Usage.ByModel["fake-model"].Calls != 2 {
		t.Fatalf("usage in the stored record = %+v", rec.Usage)
	}
	if countEvents(rec, api.EventBudgetExceeded) != 1 || countEvents(rec, api.EventBudgetRaised) != 1 {
		t.Errorf("budget events: %d exceeded, %d raised", countEvents(rec, api.EventBudgetExceeded), countEvents(rec, api.EventBudgetRaised))
	}
	show = p.ok("show", id)
	if !strings.Contains(show, "2 calls, "+itoa(rec.Usage.TotalTokens)+" tokens") || !strings.Contains(show, api.FormatCost(rec.Usage.Cost)) ||
		!strings.Contains(show, "fake-model: 2 calls") {
		t.Errorf("show of the finished run lacks its usage:\n%s", show)
	}

	denied := strings.TrimSpace(p.ok("agent", "counter", "Count them again."))
	p.waitStatus(denied, api.StatusSuspended)
	if out := p.ok("deny", denied, "--reason", "enough for today"); !strings.Contains(out, "denied more budget to run "+denied) {
		t.Errorf("deny: %s", out)
	}
	rec = p.waitStatus(denied, api.StatusDone)
	res = api.AgentResult{}
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Stopped != "budget" ||
		!strings.HasPrefix(res.Content, "Stopped at its budget: agent counter used") || !strings.HasSuffix(res.Content, "a human denied more: enough for today.") {
		t.Errorf("denied run's result %s (%v)", rec.Result, err)
	}
	if countEvents(rec, api.EventBudgetDenied) != 1 || rec.Error != nil {
		t.Errorf("denied run: %d budget_denied, error %v", countEvents(rec, api.EventBudgetDenied), rec.Error)
	}

	// The same pause through the HTTP API: a decision without a raise is refused (409, the
	// run's reason); one with a raise goes on; the record the API returns carries the usage.
	viaAPI := strings.TrimSpace(p.ok("agent", "counter", "Count them through the API."))
	p.waitStatus(viaAPI, api.StatusSuspended)
	g := gateway(t, p)
	if status, b := g.call("POST", "/v1/runs/"+viaAPI+"/approvals/budget-2", map[string]any{"action": "approve"}); status != 409 || !strings.Contains(string(b), "approve it with a raise") {
		t.Errorf("API approve without a raise: %d %s", status, b)
	}
	if status, b := g.call("POST", "/v1/runs/"+viaAPI+"/approvals/budget-2", map[string]any{"action": "approve", "budget": map[string]any{"tokens": 1000}, "by": "ada"}); status != 202 || !strings.Contains(string(b), "raised the budget") {
		t.Errorf("API approve with a raise: %d %s", status, b)
	}
	p.waitStatus(viaAPI, api.StatusDone)
	status, b := g.call("GET", "/v1/runs/"+viaAPI, nil)
	var viaRec api.Record
	if err := json.Unmarshal(b, &viaRec); status != 200 || err != nil || viaRec.Usage == nil || viaRec.Usage.Calls != 2 || viaRec.Usage.Cost <= 0 {
		t.Errorf("GET /v1/runs/%s: %d usage %+v (%v)", viaAPI, status, viaRec.Usage, err)
	}

	out := p.ok("usage")
	if !strings.Contains(out, "counter") || !strings.Contains(out, "3 runs (all time)") {
		t.Errorf("usage:\n%s", out)
	}
	var rep struct {
		By    string
		Runs  int
		Total api.UsageSum
		Rows  []struct {
			Name string
			Runs int
			api.UsageSum
		}
	}
	if err := json.Unmarshal([]byte(p.ok("usage", "--since", "24h", "--by", "model", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.By != "model" || rep.Runs != 3 || rep.Total.Calls != 5 || len(rep.Rows) != 1 || rep.Rows[0].Name != "fake-model" ||
		rep.Rows[0].Runs != 3 || rep.Rows[0].Calls != 5 || rep.Total.Cost <= rec.Usage.Cost {
		t.Errorf("usage --by model --json = %+v", rep)
	}
	// A run that calls no model is counted in the total and in no row: usage says so, so
	// the RUNS column adding up to less than the total is explained (issue 29 item 7).
	doc := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"1","approved":true}`))
	p.waitStatus(doc, api.StatusDone)
	if out := p.ok("usage"); !strings.Contains(out, "4 runs (all time)") || !strings.Contains(out, "1 of them made no model call and are in no row") {
		t.Errorf("usage with a run that calls no model:\n%s", out)
	}
	js := p.ok("usage", "--json")
	if !strings.Contains(js, `"runs_without_usage": 1`) || strings.Contains(js, "99999") || strings.Contains(js, "00000001") {
		t.Errorf("usage --json: want runs_without_usage and costs without float noise:\n%s", js)
	}
	if r := p.starter("usage", "--until", "2000-01-01", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"runs": 0`) {
		t.Errorf("usage before any run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := p.starter("usage", "--since", "yesterday"); r.code != 2 || !strings.Contains(r.stderr, `--since: "yesterday" is not a time`) {
		t.Errorf("usage --since yesterday: exit %d\n%s", r.code, r.stderr)
	}
}

// TestBudgetInTheBrowser: the web page decides budget pauses as approve --budget and deny
// do, in headless Chromium. The Approvals view shows a paused run's spend against its
// token bound; a raise that is not a positive number is refused on the page (nothing
// sent, the run still waits); a raise of 50000 tokens from the row removes it and lets the
// run finish, budget_raised recording +50000 by the page's user. Another run's pause,
// denied from its run page with a reason, ends the agent done with "stopped": "budget".
func TestBudgetInTheBrowser(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser test")
	}
	model := budgetModel(t)
	p := newPlatform(t)
	p.writeConfig(budgetConfig(t, model.Start(t)))
	p.start()
	raised := strings.TrimSpace(p.ok("agent", "counter", "Count the files."))
	p.waitStatus(raised, api.StatusSuspended)
	p.waitInbox(raised)

	base := fmt.Sprintf("http://127.0.0.1:%d", p.gateway)
	browser, bctx, _ := openBrowser(t, chrome, 1400, 900)
	pageText := func() string {
		dctx, dcancel := context.WithTimeout(browser, 5*time.Second)
		defer dcancel()
		body, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		return body
	}
	row := fmt.Sprintf(`tr.pending-call[data-key="%s budget-2"]`, raised)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS(row+` form.budget`)),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
	); err != nil {
		t.Fatalf("open the Approvals view: %v\npage: %s", err, pageText())
	}
	rowText, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).innerText`, row)))
	if err != nil || !strings.Contains(rowText, "agent counter used ") || !strings.Contains(rowText, " of 1 tokens in this run") {
		t.Errorf("the budget row reads %q (%v), want what counter spent of its 1 token", rowText, err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(row+` input[name="raise_tokens"]`), "-5"),
		chromedp.Click(chromedp.CSS(row+` button[value="raise"]`)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).innerText.includes("whole number above 0")`, row+` p.msg`)),
	); err != nil {
		t.Fatalf("a negative raise on the page: %v\npage: %s", err, pageText())
	}
	if rec := p.waitStatus(raised, api.StatusSuspended); countEvents(rec, api.EventBudgetRaised) != 0 {
		t.Fatal("the page sent a negative raise")
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(row+` input[name="raise_tokens"]`), "50000"),
		chromedp.Click(chromedp.CSS(row+` button[value="raise"]`)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q) === null`, row)),
		chromedp.WaitVisible(chromedp.ID("approvals-empty")),
	); err != nil {
		t.Fatalf("raise from the Approvals view: %v\npage: %s", err, pageText())
	}
	rec := p.waitStatus(raised, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "There are no files." {
		t.Errorf("the raised run's result %s (%v)", rec.Result, err)
	}
	var got []map[string]any
	for _, ev := range rec.Events {
		if ev.Type == api.EventBudgetRaised {
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			got = append(got, d)
		}
	}
	if len(got) != 1 || got[0]["tokens"] != float64(50000) || got[0]["max_tokens"] != float64(50001) || got[0]["call_id"] != "budget-2" || got[0]["by"] != "local" {
		t.Errorf("budget_raised events %v, want one of +50000 tokens (bound 50001) on budget-2 by local", got)
	}

	// Denied from the run page.
	denied := strings.TrimSpace(p.ok("agent", "counter", "Count them again."))
	p.waitStatus(denied, api.StatusSuspended)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs/"+denied),
		chromedp.WaitVisible(chromedp.CSS(`#pending form.budget`)),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
	); err != nil {
		t.Fatalf("open the paused run's page: %v\npage: %s", err, pageText())
	}
	if txt := pageText(); !strings.Contains(txt, "Budget reached: decision budget-2") || !strings.Contains(txt, "of 1 tokens in this run") {
		t.Errorf("the run page of a budget pause shows:\n%s", txt)
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#pending form.budget input[name="reason"]`), "enough for today"),
		chromedp.Click(chromedp.CSS(`#pending form.budget button[value="deny"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.s-done`)), // the page follows the run to its end
	); err != nil {
		t.Fatalf("deny from the run page: %v\npage: %s", err, pageText())
	}
	rec = p.waitStatus(denied, api.StatusDone)
	res = api.AgentResult{}
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Stopped != "budget" || !strings.HasSuffix(res.Content, "a human denied more: enough for today.") ||
		countEvents(rec, api.EventBudgetDenied) != 1 {
		t.Errorf("the denied run: result %s (%v), %d budget_denied", rec.Result, err, countEvents(rec, api.EventBudgetDenied))
	}

	// A session turn prompted from its page pauses on the turn's budget: the page (its
	// stream) turns to the pause's figures and raise form, and the raise lets the turn end.
	turn := `li.turn[data-turn="1"]`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/sessions/counter/desk"),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
		chromedp.SendKeys(chromedp.ID("prompt-text"), "Count the files."),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.CSS(`#budget-pending form.budget`)),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
	); err != nil {
		t.Fatalf("a session turn's budget pause on its page: %v\npage: %s", err, pageText())
	}
	if txt := pageText(); !strings.Contains(txt, "Budget reached: decision budget-1.2") || !strings.Contains(txt, "of 1 tokens in this turn") ||
		strings.Contains(txt, "Approval needed") {
		t.Errorf("the session page of a budget pause shows:\n%s", txt)
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#budget-pending input[name="raise_tokens"]`), "50000"),
		chromedp.Click(chromedp.CSS(`#budget-pending button[value="raise"]`)),
		chromedp.WaitNotVisible(chromedp.ID("budget-pending")),
		chromedp.Poll[chromedp.Void](`(document.querySelector('`+turn+`.done .said.agent .text') || {}).textContent === "There are no files."`),
	); err != nil {
		t.Fatalf("raise a session turn's budget from its page: %v\npage: %s", err, pageText())
	}
	if rec := p.waitStatus(api.SessionID("counter", "desk"), api.StatusRunning); countEvents(rec, api.EventBudgetRaised) != 1 {
		t.Errorf("the session records %d budget_raised, want 1", countEvents(rec, api.EventBudgetRaised))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// recordAgentBudget records the budget scenarios (version 1 of "agent-budget"): a run
// paused on its budget and still waiting, one raised and done, one denied and done.
func recordAgentBudget(t *testing.T, r *recorder) {
	model := budgetModel(t)
	p := newPlatform(t)
	p.writeConfig(budgetConfig(t, model.Start(t)))
	p.start()
	c := p.dial()

	raised := strings.TrimSpace(p.ok("agent", "counter", "Count the files."))
	p.waitStatus(raised, api.StatusSuspended)
	p.ok("approve", raised, "--budget", "+50000")
	p.waitStatus(raised, api.StatusDone)

	denied := strings.TrimSpace(p.ok("agent", "counter", "Count them again."))
	p.waitStatus(denied, api.StatusSuspended)
	p.ok("deny", denied, "--reason", "enough for today")
	p.waitStatus(denied, api.StatusDone)

	waiting := strings.TrimSpace(p.ok("agent", "counter", "Count them once more."))
	p.waitStatus(waiting, api.StatusSuspended)

	r.save(c, "agent_raised_done.json", raised, "")
	r.save(c, "agent_denied_done.json", denied, "")
	r.save(c, "agent_suspended_on_budget.json", waiting, "")
}
