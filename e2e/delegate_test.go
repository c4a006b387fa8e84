package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// delegateConfig is docs/agents.md's "Agents as tools" example: lead (auto) offers
// researcher (approve) as the tool agent_researcher.
func delegateConfig(t *testing.T, baseURL string) string {
	return "llm:\n  base_url: " + baseURL + "\n  model: fake-model\n" + readmeBlock(t, "yaml", "delegates: [researcher]")
}

// delegateModel scripts the lead's two replies (the delegation, then its answer) and
// researcher's (a write_file that needs approval, then its answer), the latter matched
// by the child's prompt.
func delegateModel() *fakellm.Server {
	const task = "Write notes.md saying the launch is on Monday."
	return fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{toolCall("agent_researcher", map[string]any{"prompt": task})}},
		fakellm.Reply{Content: "Done: the researcher wrote the note."},
		fakellm.Reply{Prompt: task, ToolCalls: []fakellm.Call{writeCall("notes.md", "The launch is on Monday.\n")}},
		fakellm.Reply{Prompt: task, Content: "notes.md now says the launch is on Monday."},
	)
}

// waitDelegate polls the parent's record until it names its child run (delegate_started).
func waitDelegate(t *testing.T, p *platform, id string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, e := range p.record(id).Events {
			if e.Type == api.EventDelegateStarted {
				var d struct{ Child string }
				if err := json.Unmarshal(e.Data, &d); err != nil || d.Child == "" {
					t.Fatalf("delegate_started %s: %v", e.Data, err)
				}
				return d.Child
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s started no delegate in 60s", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDelegateApprovedFromTheInbox: lead delegates to researcher, a child run whose
// write_file waits for approval; the approvals inbox lists the call under the child with
// its parent named, the real starter approves it, and the lead's answer follows the
// child's. `starter show --json` links the two runs both ways.
func TestDelegateApprovedFromTheInbox(t *testing.T) {
	t.Parallel()
	model := delegateModel()
	p := newPlatform(t)
	p.writeConfig(delegateConfig(t, model.Start(t)))
	p.start()

	id := strings.TrimSpace(p.ok("agent", "lead", "Have the researcher write the launch note."))
	child := waitDelegate(t, p, id)
	if child != id+"-1.1" {
		t.Errorf("child run = %s, want %s-1.1 (the parent's id and the call's)", child, id)
	}
	wantPending(t, p, child, "1.1")

	out := p.ok("approvals", "--json")
	var inbox []map[string]any
	if err := json.Unmarshal([]byte(out), &inbox); err != nil {
		t.Fatalf("approvals --json: %v\n%s", err, out)
	}
	if len(inbox) != 1 || inbox[0]["run"] != child || inbox[0]["agent"] != "researcher" || inbox[0]["parent"] != id {
		t.Fatalf("approvals = %s, want researcher's call in run %s with parent %s", out, child, id)
	}

	if out := p.ok("approvals"); !strings.Contains(out, "researcher (delegate of "+id+")") || !strings.Contains(out, child) {
		t.Errorf("approvals:\n%s\nwant researcher's call in %s, named a delegate of %s", out, child, id)
	}

	p.ok("approve", child, "--by", "ada")
	rec := p.waitStatus(id, api.StatusDone)
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != "Done: the researcher wrote the note." {
		t.Fatalf("parent result = %s (%v)", rec.Result, err)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if tool := last[len(last)-1]; tool["role"] != "tool" || tool["content"] != "notes.md now says the launch is on Monday." {
		t.Errorf("the lead's last call ends with %v, want the researcher's answer as the tool result", tool)
	}
	crec := p.waitStatus(child, api.StatusDone)
	if out := p.ok("show", child); !strings.Contains(out, id+" (call 1.1 of agent lead, depth 1)") {
		t.Errorf("show %s:\n%s\nwant its parent named", child, out)
	}
	if out := p.ok("show", id); !strings.Contains(out, child+" (agent researcher, call 1.1)") {
		t.Errorf("show %s:\n%s\nwant its delegate named", id, out)
	}
	var link api.ParentLink
	if err := json.Unmarshal(crec.State[api.StateParent], &link); err != nil || link.Run != id || link.Call != "1.1" || link.Agent != "lead" || link.Depth != 1 {
		t.Errorf("child's state.parent = %s (%v), want run %s call 1.1 agent lead depth 1", crec.State[api.StateParent], err, id)
	}
	if a, ok := crec.FindArtifact("notes.md"); ok && a.Content != nil && !strings.Contains(*a.Content, "Monday") {
		t.Errorf("notes.md = %q", *a.Content)
	}
	if countEvents(rec, api.EventDelegateDone) != 1 || rec.Usage == nil || rec.Usage.ByAgent["lead"].Calls != 3 {
		t.Errorf("parent: %d delegate_done, usage %+v; want 1 and lead's two calls plus the child's usage", countEvents(rec, api.EventDelegateDone), rec.Usage)
	}
}

// recordDelegate records TestDelegateApprovedFromTheInbox's parent run for the replay
// fixtures (version 1 of "agent-delegates").
func recordDelegate(t *testing.T, r *recorder) {
	model := delegateModel()
	p := newPlatform(t)
	p.writeConfig(delegateConfig(t, model.Start(t)))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "lead", "Have the researcher write the launch note."))
	child := waitDelegate(t, p, id)
	wantPending(t, p, child, "1.1")
	p.ok("approve", child, "--by", "ada")
	p.waitStatus(id, api.StatusDone)
	c := p.dial()
	r.save(c, "lead_done.json", id, "")
	r.save(c, "child_approved_done.json", child, "")
}

// TestDelegateCanceledWithItsParent: cancelling the lead while its child waits for an
// approval cancels the child too (parent close policy REQUEST_CANCEL); the inbox then
// holds nothing of either.
func TestDelegateCanceledWithItsParent(t *testing.T) {
	t.Parallel()
	model := delegateModel()
	p := newPlatform(t)
	p.writeConfig(delegateConfig(t, model.Start(t)))
	p.start()

	id := strings.TrimSpace(p.ok("agent", "lead", "Have the researcher write the launch note."))
	child := waitDelegate(t, p, id)
	wantPending(t, p, child, "1.1")
	p.ok("cancel", id)
	p.waitStatus(id, api.StatusCanceled)
	p.waitStatus(child, api.StatusCanceled)
	if out := p.ok("approvals", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("approvals after the cancel = %s, want none", out)
	}
}
