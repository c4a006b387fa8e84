package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestRunPageFilesAndForkInTheBrowser: the run page of a finished agent run, served by
// `starter serve` with no worker anywhere, in headless Chromium. Call 2.1's "files" link
// shows the workspace as that call found it (a.txt still v1), a.txt's page its bytes;
// call 3.1's "changes" show the file it added, named and filled with markup, as text (no
// dialog opens). "Fork from here" at a call the run does not have says so on the page and
// starts nothing; at 2.1 with a prompt it goes to the new run's page, and once a worker is
// back the fork runs from the files 2.1 found.
func TestRunPageFilesAndForkInTheBrowser(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no chromium binary found on PATH (Debian: apt-get install -y chromium); skipping the browser test")
	}
	const markup = `<img src=x onerror=alert(1)>.txt`
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("a.txt", "v1\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall("a.txt", "v2\n")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{writeCall(markup, `<script>alert(2)</script>`)}},
		fakellm.Reply{Content: "Done."},
		// The fork's prompt: asked again from before 2.1, the model writes otherwise.
		fakellm.Reply{Match: "Start over", ToolCalls: []fakellm.Call{shellCall("echo forked > a.txt")}},
	)
	p := newPlatform(t)
	p.plain = true
	srv := startDevServer(t, devserver.Options{FrontendPort: p.frontend})
	t.Cleanup(func() { _ = srv.Stop() })
	p.writeConfig(autoConfig(model.Start(t), "local"))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Write a.txt."))
	rec := p.waitStatus(id, api.StatusDone)
	if calls := callIDs(t, rec); strings.Join(calls, " ") != "1.1 2.1 3.1" {
		t.Fatalf("calls %v, want 1.1 2.1 3.1: %s", calls, eventList(rec))
	}
	p.stop() // no worker from here on: the pages read the record and the blob store
	serveGateway(t, p)

	base := fmt.Sprintf("http://127.0.0.1:%d", p.gateway)
	browser, bctx, dialogs := openBrowser(t, chrome, 1400, 900)
	pageText := func() string {
		dctx, dcancel := context.WithTimeout(browser, 5*time.Second)
		defer dcancel()
		body, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		return body
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
		if err != nil {
			t.Fatalf("read %s: %v\npage: %s", sel, err, pageText())
		}
		return s
	}
	call := func(c string) string { return fmt.Sprintf(`tr.call[data-call="%s"]`, c) }

	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(call("2.1")+" a.files")),
		chromedp.Click(chromedp.CSS(call("2.1")+" a.files")),
		chromedp.WaitVisible(chromedp.ID("files")),
	); err != nil {
		t.Fatalf("follow call 2.1's files link: %v\npage: %s", err, pageText())
	}
	if h, files := text("h1"), text("#files"); h != "Files as call 2.1 found them" || !strings.Contains(files, "a.txt") || strings.Contains(files, "onerror") {
		t.Errorf("the files 2.1 found: heading %q, want a.txt only\n%s", h, files)
	}
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#files a[href$="/files/a.txt?at=2.1"]`)),
		chromedp.WaitVisible(chromedp.ID("content")),
	); err != nil {
		t.Fatalf("open a.txt from the files page: %v\npage: %s", err, pageText())
	}
	if got := text("#content"); got != "v1\n" {
		t.Errorf("a.txt as 2.1 found it reads %q on its page, want v1", got)
	}

	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(call("3.1")+" a.changes")),
		chromedp.Click(chromedp.CSS(call("3.1")+" a.changes")),
		chromedp.WaitVisible(chromedp.ID("changes")),
	); err != nil {
		t.Fatalf("follow call 3.1's changes link: %v\npage: %s", err, pageText())
	}
	if got := text("#changes"); !strings.Contains(got, "added "+markup) || !strings.Contains(got, "+<script>alert(2)</script>") || strings.Contains(got, "a.txt") {
		t.Errorf("the changes of 3.1: want the markup file added, its content as text, a.txt untouched\n%s", got)
	}

	// A fork at a call the run does not have: the page says so, nothing starts.
	before := len(p.ok("list", "--json"))
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(call("2.1")+" form.fork")),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('tr.call[data-call="2.1"] form.fork').dataset.at = "9.9"`),
		chromedp.Click(chromedp.CSS(call("2.1")+" form.fork button")),
		chromedp.Poll[chromedp.Void](`document.querySelector('tr.call[data-call="2.1"] form.fork .msg').textContent.includes("has no tool call 9.9")`),
	); err != nil {
		t.Fatalf("fork at an unknown call from the page: %v\npage: %s", err, pageText())
	}
	if n := len(p.ok("list", "--json")); n != before {
		t.Error("a fork at an unknown call started a run")
	}

	// Fork from 2.1 with a prompt: the page goes to the new run.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(call("2.1")+" form.fork")),
		chromedp.Poll[chromedp.Void](`document.readyState === "complete"`),
		chromedp.SendKeys(chromedp.CSS(call("2.1")+` form.fork input[name="prompt"]`), "Start over"),
		chromedp.Click(chromedp.CSS(call("2.1")+" form.fork button")),
		// The page goes to the new run: a run page of another id.
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#run:not([data-id=%q])`, id))),
	); err != nil {
		t.Fatalf("fork from 2.1 on the page: %v\npage: %s", err, pageText())
	}
	forkPath, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.pathname`))
	if err != nil {
		t.Fatal(err)
	}
	fid := strings.TrimPrefix(forkPath, "/runs/")
	p.start() // a worker again: the fork runs
	frec := p.waitStatus(fid, api.StatusDone)
	if d := eventOf(t, frec, "forked_from"); d["run"] != id || d["call"] != "2.1" {
		t.Errorf("forked_from = %v, want run %s call 2.1", d, id)
	}
	if got := p.ok("sandbox", "cat", fid, "a.txt", "--at", callIDs(t, frec)[0]); got != "v1\n" {
		t.Errorf("the fork's first call found a.txt = %q, want v1 (the files 2.1 found)", got)
	}
	if got := p.ok("sandbox", "cat", fid, "a.txt"); got != "forked\n" {
		t.Errorf("the fork's a.txt = %q, want what the model wrote after the page's prompt\n%s", got, p.ok("logs", fid))
	}
	if got := p.ok("sandbox", "cat", id, "a.txt"); got != "v2\n" {
		t.Errorf("the source's a.txt = %q after the fork, want v2 (untouched)", got)
	}
	if d := dialogs(); len(d) > 0 {
		t.Errorf("a file's name or content ran as script: dialogs %q", d)
	}
}
