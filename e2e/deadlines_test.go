package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// TestApprovalDeadlineDenies runs docs/approvals.md's Deadlines demo as printed, with the
// shipped examples/approvals/deadline.yaml and its script: an agent with approval_timeout
// 5s and on_timeout deny asks for a write nobody decides. While it waits, `starter
// approvals` and `starter show` print when the call expires; when the deadline passes the
// run goes on by itself, the model is told the call was denied by its deadline and says
// so (the script's reply for that outcome, not the one for an approval), nothing was
// written, and the record says the call was denied by timeout.
func TestApprovalDeadlineDenies(t *testing.T) {
	t.Parallel()
	cfg, _ := shippedDemo(t, `bin/starter agent scribe "write late.md"`)
	p := newPlatform(t)
	p.writeConfig(cfg)
	p.start()
	cmds := readmeStarterCommands(t, "### Deadlines", "### Notifications")
	if len(cmds) != 4 {
		t.Fatalf("the Deadlines commands = %q, want agent, approvals, show, show", cmds)
	}
	run := strings.TrimSpace(p.ok(shellArgs(cmds[0])...))

	rows := p.waitInbox(run)
	var row struct {
		ExpiresAt *time.Time `json:"expires_at"`
		OnTimeout string     `json:"on_timeout"`
		Since     time.Time  `json:"waiting_since"`
	}
	if err := json.Unmarshal([]byte(p.ok("approvals", "--json")), &[]any{&row}); err != nil {
		t.Fatal(err)
	}
	// 5s leaves the inbox and show time to run while the call waits (checked below).
	if row.ExpiresAt == nil || row.ExpiresAt.Sub(row.Since) != 5*time.Second || row.OnTimeout != "deny" {
		t.Errorf("inbox row = %+v (rows %+v), want expires_at 5s after waiting_since, on_timeout deny", row, rows)
	}
	table := p.ok(shellArgs(cmds[1])...)
	show := p.ok(shellArgs(strings.ReplaceAll(cmds[2], "<id>", run))...)
	if rec := p.record(run); rec.Status != api.StatusSuspended {
		t.Fatalf("the call expired before starter approvals and show ran (status %s); the machine is too slow for a 5s deadline", rec.Status)
	}
	t.Logf("starter approvals:\n%s\nstarter show:\n%s", table, show)
	if !strings.Contains(table, "EXPIRES") || !strings.Contains(table, row.ExpiresAt.UTC().Format(time.RFC3339)+" (deny)") {
		t.Errorf("starter approvals lacks the EXPIRES column:\n%s", table)
	}
	if !strings.Contains(show, "expires      "+row.ExpiresAt.UTC().Format(time.RFC3339)+" (deny)") {
		t.Errorf("starter show lacks the pending call's expiry:\n%s", show)
	}

	rec := p.waitStatus(run, api.StatusDone)
	const timedOut = "Nobody decided in time, so late.md is not written."
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != timedOut {
		t.Errorf("result = %s (%v), want the model's answer to being told no decision within 5s", rec.Result, err)
	}
	if out := p.ok(shellArgs(strings.ReplaceAll(cmds[3], "<id>", run))...); !strings.Contains(out, timedOut) {
		t.Errorf("starter show after the deadline lacks the model's answer:\n%s", out)
	}
	var decided map[string]any
	for _, e := range rec.Events {
		if e.Type == "approval_decided" {
			_ = json.Unmarshal(e.Data, &decided)
		}
	}
	if decided["by"] != "timeout" || decided["action"] != "deny" || decided["reason"] != "no decision within 5s" {
		t.Errorf("approval_decided = %v, want a deny by timeout", decided)
	}
	if _, ok := rec.FindArtifact("late.md"); ok {
		t.Error("the timed-out write produced late.md")
	}
	if rows := p.inbox(); len(rows) != 0 {
		t.Errorf("the inbox still lists %+v after the deadline", rows)
	}
}
