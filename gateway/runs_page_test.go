package gateway

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// parsePage parses an HTML page, failing the test when it is not one.
func parsePage(t *testing.T, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("parse page: %v\n%s", err, page)
	}
	return doc
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

// findAll returns the elements under n (n included) for which match holds, in document order.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func tagged(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

// textOf is the text under n, as a reader sees it (entities decoded), trimmed.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// runsTable reads the Runs page's rows: one map of column header to cell text per row.
func runsTable(t *testing.T, doc *html.Node) []map[string]string {
	t.Helper()
	tables := findAll(doc, func(n *html.Node) bool { return n.Data == "table" && hasClass(n, "runs") })
	if len(tables) != 1 {
		t.Fatalf("runs page has %d runs tables, want 1", len(tables))
	}
	var heads []string
	for _, th := range findAll(tables[0], tagged("th")) {
		heads = append(heads, textOf(th))
	}
	var rows []map[string]string
	for _, tr := range findAll(tables[0], func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-id") != "" }) {
		row := map[string]string{}
		for i, td := range findAll(tr, tagged("td")) {
			if i < len(heads) {
				row[heads[i]] = textOf(td)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// TestRunsPageShowsAgentsAndPrompts: ten AgentRun rows no longer look alike: each shows
// its agent and the start of its prompt (as text, however marked up), next to its id,
// type, status and start.
func TestRunsPageShowsAgentsAndPrompts(t *testing.T) {
	t.Parallel()
	long := `Summarise <b>the</b> "quarterly" report & list every risk you find in it, with a page number for each one of them please`
	f := &fakeRuns{list: func(context.Context, runs.ListRequest) ([]runs.Summary, []byte, error) {
		return []runs.Summary{
			{ID: "0193a-1", Workflow: "AgentRun", Agent: "scribe", Prompt: long, Status: api.StatusDone, CreatedAt: t0},
			{ID: "0193a-2", Workflow: "AgentRun", Agent: "keeper", Prompt: "Tidy the workspace.", Status: api.StatusRunning, CreatedAt: t0},
			{ID: "session:helper:u1", Workflow: "Session", Agent: "helper", Status: api.StatusRunning, CreatedAt: t0},
			{ID: "doc-1", Workflow: "DocumentApproval", Status: api.StatusSuspended, CreatedAt: t0},
		}, nil, nil
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/"})
	page := readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d\n%s", resp.StatusCode, page)
	}
	rows := runsTable(t, parsePage(t, page))
	short := string([]rune(long)[:80]) + "…"
	want := []map[string]string{
		{"Run": "0193a-1", "Workflow": "AgentRun", "Agent": "scribe", "Prompt": short, "Status": "done", "Started": "2026-11-30 09:12:01 UTC"},
		{"Run": "0193a-2", "Workflow": "AgentRun", "Agent": "keeper", "Prompt": "Tidy the workspace.", "Status": "running"},
		{"Run": "session:helper:u1", "Workflow": "Session", "Agent": "helper", "Prompt": "", "Status": "running"},
		{"Run": "doc-1", "Workflow": "DocumentApproval", "Agent": "", "Prompt": "", "Status": "suspended"},
	}
	if len(rows) != len(want) {
		t.Fatalf("runs page shows %d rows, want %d: %v", len(rows), len(want), rows)
	}
	for i, w := range want {
		for col, v := range w {
			if rows[i][col] != v {
				t.Errorf("row %d column %s = %q, want %q", i, col, rows[i][col], v)
			}
		}
	}
	if strings.Contains(page, "<b>the</b>") {
		t.Error("the prompt's markup reached the page as markup")
	}
}

// TestRunsPageSearch: the search box's term and the status filter reach the listing as
// they were typed (a quote included: package runs quotes it into the visibility query),
// and every link of the page (the status chips, the next page) keeps them, so a link
// reproduces the view.
func TestRunsPageSearch(t *testing.T) {
	t.Parallel()
	var got runs.ListRequest
	f := &fakeRuns{list: func(_ context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error) {
		got = req
		return []runs.Summary{{ID: "it's-1", Workflow: "AgentRun", Agent: "o'brien", Status: api.StatusFailed, CreatedAt: t0}}, []byte("next"), nil
	}}
	s := newServer(t, f, Options{})
	term := `o'brien" OR 1=1`
	resp := do(t, s, request{method: "GET", path: "/?status=failed&q=" + url.QueryEscape(term)})
	page := readBody(t, resp)
	if resp.StatusCode != 200 || got.Search != term || got.Status != api.StatusFailed {
		t.Fatalf("status %d, List got %+v, want search %q and status failed\n%s", resp.StatusCode, got, term, page)
	}
	doc := parsePage(t, page)
	boxes := findAll(doc, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == "q" })
	if len(boxes) != 1 || attr(boxes[0], "value") != term {
		t.Fatalf("search box: %d boxes, value %q; want one holding %q", len(boxes), attr(boxes[0], "value"), term)
	}
	links := map[string]url.Values{}
	for _, a := range findAll(doc, tagged("a")) {
		href := attr(a, "href")
		if u, err := url.Parse(href); err == nil && u.Path == "/" && (hasClass(a, "chip") || textOf(a) == "Older runs →") {
			links[textOf(a)] = u.Query()
		}
	}
	for _, name := range []string{"all", "running", "failed", "Older runs →"} {
		q, ok := links[name]
		if !ok {
			t.Errorf("runs page has no %q link", name)
			continue
		}
		if q.Get("q") != term {
			t.Errorf("%q link drops the search: %v", name, q)
		}
	}
	if q := links["running"]; q.Get("status") != "running" {
		t.Errorf("running chip: %v", q)
	}
	if q := links["all"]; q.Has("status") {
		t.Errorf("all chip keeps a status: %v", q)
	}
	if q := links["Older runs →"]; q.Get("status") != "failed" || q.Get("page_token") != encodePageToken([]byte("next")) {
		t.Errorf("next page link: %v", q)
	}
	active := findAll(doc, func(n *html.Node) bool { return hasClass(n, "chip") && hasClass(n, "active") })
	if len(active) != 1 || textOf(active[0]) != "failed" {
		t.Errorf("active chips %d, want failed alone", len(active))
	}
	if rows := runsTable(t, doc); len(rows) != 1 || rows[0]["Agent"] != "o'brien" || rows[0]["Run"] != "it's-1" {
		t.Errorf("rows %v", rows)
	}
}

// TestRunsPageRefusesABadSearch: a search the listing refuses is said on the page with a
// 400, naming what was wrong.
func TestRunsPageRefusesABadSearch(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{list: func(_ context.Context, req runs.ListRequest) ([]runs.Summary, []byte, error) {
		return nil, nil, &runs.BadRequestError{Msg: "search \"a\\x00\" contains a control character"}
	}}
	s := newServer(t, f, Options{})
	resp := do(t, s, request{method: "GET", path: "/?q=a%00"})
	if body := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "contains a control character") {
		t.Errorf("status %d\n%s", resp.StatusCode, body)
	}
}

// TestRunPageShowsUsageAndCost: the run page's usage box gives the totals as the CLI's
// usage does, a row per model (tokens in and out, cost in USD) and the budget the run
// met: its bound as raised, and what was used at the pause.
func TestRunPageShowsUsageAndCost(t *testing.T) {
	t.Parallel()
	u := &api.RunUsage{}
	u.Add("scribe", "gpt-small", api.Usage{PromptTokens: 900, CompletionTokens: 100, TotalTokens: 1000, Cost: 0.000506, Priced: true})
	u.Add("scribe", "gpt-small", api.Usage{PromptTokens: 400, CompletionTokens: 50, TotalTokens: 450, Cost: 0.0002, Priced: true})
	u.Add("scribe", "local-<llama>", api.Usage{PromptTokens: 30, CompletionTokens: 20, TotalTokens: 50})
	ev := func(seq int64, typ string, d map[string]any) api.Event {
		return api.Event{Seq: seq, Type: typ, Data: mustJSON(d), At: t0}
	}
	rec := api.Record{ID: "run-usage", Workflow: "AgentRun", Status: api.StatusDone, Usage: u, CreatedAt: t0, UpdatedAt: t0,
		Payload: json.RawMessage(`{"agent":"scribe","prompt":"p"}`),
		Events: []api.Event{
			ev(1, api.EventBudgetExceeded, map[string]any{"agent": "scribe", "scope": "run", "used_tokens": 1000, "max_tokens": 800}),
			ev(2, api.EventBudgetRaised, map[string]any{"agent": "scribe", "scope": "run", "tokens": 1000, "max_tokens": 1800}),
		}}
	s := newServer(t, &fakeRuns{get: getRecords(rec)}, Options{})
	resp := do(t, s, request{method: "GET", path: "/runs/run-usage"})
	page := readBody(t, resp)
	doc := parsePage(t, page)
	boxes := findAll(doc, func(n *html.Node) bool { return attr(n, "id") == "usage" })
	if resp.StatusCode != 200 || len(boxes) != 1 {
		t.Fatalf("status %d, %d usage boxes\n%s", resp.StatusCode, len(boxes), page)
	}
	box := boxes[0]
	total := findAll(box, func(n *html.Node) bool { return attr(n, "id") == "usage-total" })
	if want := "3 calls, 1500 tokens (1330 in, 170 out), ≥ $0.000706 (1 unpriced calls)"; len(total) != 1 || textOf(total[0]) != want {
		t.Errorf("usage total %q, want %q", textOf(total[0]), want)
	}
	var models []string
	for _, tr := range findAll(box, func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "model") }) {
		var cells []string
		for _, td := range findAll(tr, tagged("td")) {
			cells = append(cells, textOf(td))
		}
		models = append(models, strings.Join(cells, " "))
	}
	if want := []string{"gpt-small 2 1300 150 1450 $0.000706", "local-<llama> 1 30 20 50 unpriced"}; strings.Join(models, "|") != strings.Join(want, "|") {
		t.Errorf("model rows %q, want %q", models, want)
	}
	budget := findAll(box, func(n *html.Node) bool { return hasClass(n, "budget-line") })
	if want := "Budget of scribe (run): 1000 of 1800 tokens used, bound raised at its last pause."; len(budget) != 1 || textOf(budget[0]) != want {
		t.Errorf("budget lines %d: %q, want %q", len(budget), textOf(budget[0]), want)
	}

	// A run that made no model call has no usage box.
	plain := docSuspended()
	s = newServer(t, &fakeRuns{get: getRecords(plain)}, Options{})
	if page := readBody(t, do(t, s, request{method: "GET", path: "/runs/" + url.PathEscape(plain.ID)})); strings.Contains(page, `id="usage"`) {
		t.Error("a run without model calls shows a usage box")
	}
}
