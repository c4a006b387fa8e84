package e2e

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/fakellm"
)

// runsPageIDs returns the run ids the gateway's Runs page lists for search term q, read
// from its rows (data-id) as a browser would render them.
func runsPageIDs(t *testing.T, g gwClient, q string) []string {
	t.Helper()
	status, body := g.call(http.MethodGet, "/?q="+url.QueryEscape(q), nil)
	if status != http.StatusOK {
		t.Fatalf("GET /?q=%s: status %d\n%s", q, status, body)
	}
	var ids []string
	for _, m := range regexp.MustCompile(`<tr data-id="([^"]+)"`).FindAllStringSubmatch(string(body), -1) {
		ids = append(ids, m[1])
	}
	slices.Sort(ids)
	return ids
}

// TestRunsPageSearchFindsRealRuns: runs of two agents and of another workflow type, started
// through the real worker and starter; the Runs page's search box (?q=) finds each by
// agent, by workflow type and by id prefix, and never lists the others.
func TestRunsPageSearchFindsRealRuns(t *testing.T) {
	t.Parallel()
	model := fakellm.New(fakellm.Reply{Content: "Done."})
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: scribe
    instructions: You write minutes.
    sandbox: {type: virtual}
  - name: reader
    instructions: You read reports.
    sandbox: {type: virtual}
`)
	p.start()

	p.ok("agent", "scribe", "Write the minutes.", "--id", "minutes-7", "--wait")
	p.ok("agent", "reader", "Summarise the report.", "--id", "report-9", "--wait")
	p.ok("run", "DocumentApproval", "--input", `{"doc_id":"42","approved":true}`, "--id", "invoice-42", "--wait")

	g := gateway(t, p)
	for _, tc := range []struct{ q, want string }{
		{"scribe", "minutes-7"},            // an agent
		{"reader", "report-9"},             // the other agent
		{"DocumentApproval", "invoice-42"}, // a workflow type
		{"AgentRun", "minutes-7 report-9"}, // the agents' type
		{"invoice", "invoice-42"},          // an id prefix
		{"minutes-7", "minutes-7"},         // a whole id
		{"nobody", ""},                     // nothing matches
	} {
		// Visibility trails a close by a moment: poll until the page shows what it
		// should, then check it shows nothing else.
		deadline := time.Now().Add(30 * time.Second)
		var got []string
		for {
			got = runsPageIDs(t, g, tc.q)
			if strings.Join(got, " ") == tc.want || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Runs page search %q lists %q, want %q", tc.q, got, tc.want)
		}
	}
	// The page says what it searched for when nothing matches.
	if _, body := g.call(http.MethodGet, "/?q=nobody", nil); !strings.Contains(string(body), "No runs matching nobody.") {
		t.Errorf("empty search page does not say what it searched:\n%s", body)
	}
}
