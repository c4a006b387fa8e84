package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// TestGatewayLimitedTokens: `worker --dev` with the README's two tokens, docs-team limited
// to the agents scribe and support-*, ops unlimited, and two agent runs waiting for
// approval, scribe's and keeper's. docs-team lists, reads, streams and decides scribe's run
// only; keeper's run is, on every surface, the very answer an unknown id gets; starting a
// keeper run is a 403 naming the limits; /codec is ops's only. The README's curl commands
// run as printed.
func TestGatewayLimitedTokens(t *testing.T) {
	t.Parallel()
	const (
		docsSecret = "docs-team-e2e-secret-0123456789"
		opsSecret  = "ops-e2e-secret-0123456789abcdef"
	)
	write := func(path string) fakellm.Call {
		args, _ := json.Marshal(map[string]string{"path": path, "content": "limits"})
		return fakellm.Call{Name: "write_file", Arguments: args}
	}
	model := fakellm.New(
		fakellm.Reply{Prompt: "scribe task", ToolCalls: []fakellm.Call{write("scribe.md")}},
		fakellm.Reply{Prompt: "scribe task", Content: "Wrote scribe.md."},
		fakellm.Reply{Prompt: "keeper task", ToolCalls: []fakellm.Call{write("keeper-secret.md")}},
		fakellm.Reply{Prompt: "keeper task", Content: "Wrote keeper-secret.md."},
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
` + readmeBlock(t, "yaml", "agents: [scribe, support-*]"))
	p.extraEnv = append(p.extraEnv, "NEXO_DOCS_TOKEN="+docsSecret, "NEXO_OPS_TOKEN="+opsSecret)
	p.start()
	if !strings.Contains(p.output(), "docs-team (read, operate, approve; agents scribe, support-*; workflows all)") {
		t.Errorf("the worker does not say what docs-team is limited to:\n%s", p.output())
	}

	base := fmt.Sprintf("http://127.0.0.1:%d", p.gateway)
	docs := gwClient{t: t, base: base, token: docsSecret}
	ops := gwClient{t: t, base: base, token: opsSecret}
	scribeRun := docs.startRun(api.WorkflowAgentRun, map[string]string{"agent": "scribe", "prompt": "the scribe task"})
	keeperRun := ops.startRun(api.WorkflowAgentRun, map[string]string{"agent": "keeper", "prompt": "the keeper task"})
	status, b := docs.call("POST", "/v1/runs", map[string]any{"workflow": api.WorkflowAgentRun, "input": map[string]string{"agent": "keeper", "prompt": "the keeper task"}})
	if want := "token docs-team may not start a run of workflow AgentRun of agent keeper: it is limited to agents scribe, support-*; workflows all"; status != 403 || !strings.Contains(string(b), want) {
		t.Errorf("docs-team starting a keeper run: %d %s, want 403 %q", status, b, want)
	}
	p.waitStatus(scribeRun, api.StatusSuspended)
	p.waitStatus(keeperRun, api.StatusSuspended)

	// Lists.
	ids := func(g gwClient, path string) string {
		return string(g.must(http.StatusOK, "GET", path, nil))
	}
	if l := ids(docs, "/v1/runs"); !strings.Contains(l, scribeRun) || strings.Contains(l, keeperRun) {
		t.Errorf("docs-team's runs: %s, want %s and not %s", l, scribeRun, keeperRun)
	}
	if l := ids(ops, "/v1/runs"); !strings.Contains(l, scribeRun) || !strings.Contains(l, keeperRun) {
		t.Errorf("ops's runs: %s, want both", l)
	}
	// What a limited list costs: with agents set, each AgentRun row's agent is read from
	// its record.
	median := func(g gwClient) time.Duration {
		var ds []time.Duration
		for range 21 {
			began := time.Now()
			g.must(http.StatusOK, "GET", "/v1/runs", nil)
			ds = append(ds, time.Since(began))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	t.Logf("GET /v1/runs (2 agent runs), median of 21: docs-team (limited) %s, ops (unlimited) %s", median(docs), median(ops))
	var inbox struct{ Approvals []inboxRow }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_ = json.Unmarshal(ops.must(http.StatusOK, "GET", "/v1/approvals", nil), &inbox)
		if len(inbox.Approvals) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(inbox.Approvals) != 2 {
		t.Fatalf("ops's inbox: %+v, want both runs' calls", inbox)
	}
	callOf := map[string]string{}
	for _, r := range inbox.Approvals {
		callOf[r.Run] = r.CallID
	}
	if l := ids(docs, "/v1/approvals"); !strings.Contains(l, scribeRun) || strings.Contains(l, keeperRun) || strings.Contains(l, "keeper-secret.md") {
		t.Errorf("docs-team's inbox: %s, want scribe's call only", l)
	}

	// keeper's run answers as an unknown id does, for reading, streaming and deciding.
	unknown := "019aaaaa-0000-7000-8000-000000000000"
	sameAsUnknown := func(what string, hidden, unknownAnswer func(id string) (int, string)) {
		t.Helper()
		ws, wb := unknownAnswer(unknown)
		gs, gb := hidden(keeperRun)
		if ws != 404 || gs != ws || gb != strings.ReplaceAll(wb, unknown, keeperRun) {
			t.Errorf("%s keeper's run: %d %s\nwant an unknown id's: %d %s", what, gs, gb, ws, wb)
		}
	}
	asDocs := func(method, suffix string, body any) func(string) (int, string) {
		return func(id string) (int, string) {
			s, b := docs.call(method, "/v1/runs/"+id+suffix, body)
			return s, string(b)
		}
	}
	asOps := func(method, suffix string, body any) func(string) (int, string) {
		return func(id string) (int, string) {
			s, b := ops.call(method, "/v1/runs/"+id+suffix, body)
			return s, string(b)
		}
	}
	for _, c := range []struct {
		what, method, suffix string
		body                 any
	}{
		{"GET", "GET", "", nil},
		{"GET events of", "GET", "/events", nil},
		{"decide", "POST", "/approvals/" + callOf[keeperRun], map[string]any{"approved": true}},
		{"cancel", "POST", "/cancel", map[string]any{}},
	} {
		sameAsUnknown("docs-team: "+c.what, asDocs(c.method, c.suffix, c.body), asDocs(c.method, c.suffix, c.body))
		sameAsUnknown("docs-team (against ops on an unknown id): "+c.what, asDocs(c.method, c.suffix, c.body), asOps(c.method, c.suffix, c.body))
	}
	sse := func(token string) func(string) (int, string) {
		return func(id string) (int, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/runs/"+id+"/events", nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("stream %s: %v", id, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode == 200 {
				return 200, ""
			}
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
	}
	sameAsUnknown("docs-team: SSE of", sse(docsSecret), sse(opsSecret))
	if s, _ := sse(docsSecret)(scribeRun); s != 200 {
		t.Errorf("docs-team streaming scribe's run: status %d, want 200", s)
	}
	if s, _ := sse(opsSecret)(keeperRun); s != 200 {
		t.Errorf("ops streaming keeper's run: status %d, want 200", s)
	}

	// The README's commands, as printed.
	if _, err := exec.LookPath("curl"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lines := readmeShellLines(t, "$GW/v1/runs/$KEEPER_RUN")
		if len(lines) != 3 {
			t.Fatalf("README's limits block: %q", lines)
		}
		env := []string{"GW=" + base, "NEXO_DOCS_TOKEN=" + docsSecret, "KEEPER_RUN=" + keeperRun}
		if out := shell(t, ctx, p.dir, lines[0], env...); !strings.Contains(out, scribeRun) || strings.Contains(out, keeperRun) {
			t.Errorf("%s: %s", lines[0], out)
		}
		if out := shell(t, ctx, p.dir, lines[1], env...); !strings.Contains(out, `"status": 404`) || !strings.Contains(out, "no run "+keeperRun) {
			t.Errorf("%s: %s", lines[1], out)
		}
		if out := shell(t, ctx, p.dir, lines[2], env...); !strings.Contains(out, `"status": 403`) || !strings.Contains(out, "limited to agents scribe, support-*") {
			t.Errorf("%s: %s", lines[2], out)
		}
	} else {
		t.Log("no curl on this machine: the README's limits commands are not run")
	}

	// /codec is for unlimited tokens.
	if s, b := docs.call("POST", "/codec/decode", `{"payloads":[]}`); s != 403 || !strings.Contains(string(b), "unlimited tokens only") {
		t.Errorf("docs-team on /codec/decode: %d %s, want 403", s, b)
	}
	if s, b := ops.call("POST", "/codec/decode", `{"payloads":[]}`); s != 200 {
		t.Errorf("ops on /codec/decode: %d %s, want 200", s, b)
	}

	// docs-team decides its own run; the record keeps the token's name.
	docs.must(http.StatusAccepted, "POST", "/v1/runs/"+scribeRun+"/approvals/"+callOf[scribeRun], map[string]any{"approved": true, "by": "grace"})
	p.waitStatus(scribeRun, api.StatusDone)
	if record := p.ok("show", scribeRun, "--json"); !strings.Contains(record, "docs-team (grace)") || strings.Contains(record, docsSecret) {
		t.Errorf("the decision does not record the token's name and the person (and never its secret):\n%s", record)
	}
	if r := p.waitStatus(keeperRun, api.StatusSuspended); r.Status != api.StatusSuspended {
		t.Errorf("keeper's run is %s after docs-team's attempts, want still suspended", r.Status)
	}
}
