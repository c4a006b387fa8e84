package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// BenchmarkSnapshotOverhead is what a snapshot after every change costs an agent turn:
// the same 20-turn run (each turn a write_file call, then a final answer, fake model) on
// the real worker and the embedded server, in a local directory of 200 files that is
// snapshotted after every write (sandbox.snapshot: true) or not (a user's dir), the two
// kinds of run interleaved. Target (issue "durable workspaces"): <= 1.15x.
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench SnapshotOverhead -benchtime 5x
func BenchmarkSnapshotOverhead(b *testing.B) {
	const turns = 20
	var script []fakellm.Reply
	for i := 1; i < turns; i++ {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{writeCall(fmt.Sprintf("notes/n%02d.txt", i), strings.Repeat(fmt.Sprintf("turn %d\n", i), 100))}})
	}
	script = append(script, fakellm.Reply{Content: "done"})
	p := newPlatform(b)
	dirs := map[string]string{}
	for _, name := range []string{"snap", "plain"} {
		dir := filepath.Join(b.TempDir(), name)
		for i := range 200 {
			f := filepath.Join(dir, fmt.Sprintf("src/p%02d/f%03d.go", i%10, i))
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(f, bytes.Repeat([]byte(fmt.Sprintf("// file %d\n", i)), 1000), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		dirs[name] = dir
	}
	p.writeConfig(`llm:
  base_url: ` + fakellm.New(script...).Start(b) + `
  model: fake-model
agents:
  - name: snap
    instructions: You write files.
    permissions: {mode: auto}
    sandbox: {type: local, dir: ` + dirs["snap"] + `, snapshot: true}
    max_turns: ` + fmt.Sprint(turns) + `
  - name: plain
    instructions: You write files.
    permissions: {mode: auto}
    sandbox: {type: local, dir: ` + dirs["plain"] + `}
    max_turns: ` + fmt.Sprint(turns) + `
`)
	p.start()
	tc := p.dial()
	run := func(agent string) (time.Duration, api.AgentResult) {
		in, _ := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: "write the notes"})
		t0 := time.Now()
		wr, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: api.DefaultTaskQueue}, api.WorkflowAgentRun, json.RawMessage(in))
		if err != nil {
			b.Fatal(err)
		}
		var res api.AgentResult
		if err := wr.Get(context.Background(), &res); err != nil {
			b.Fatal(err)
		}
		if res.Turns != turns {
			b.Fatalf("%s: %d turns, want %d", agent, res.Turns, turns)
		}
		d := time.Since(t0)
		if agent == "snap" {
			rec := p.record(wr.GetID())
			if n := countSnapshots(rec); n != turns-1 {
				b.Fatalf("the snapshotted run recorded %d snapshots, want %d: %s", n, turns-1, eventList(rec))
			}
		}
		return d / turns, res
	}
	run("snap") // warm up both
	run("plain")
	var on, off []time.Duration
	b.ResetTimer()
	for range b.N {
		d, _ := run("snap")
		on = append(on, d)
		d, _ = run("plain")
		off = append(off, d)
	}
	b.StopTimer()
	ratio := float64(median(on)) / float64(median(off))
	b.ReportMetric(ms(median(on)), "ms/turn-snapshots")
	b.ReportMetric(ms(median(off)), "ms/turn-plain")
	b.ReportMetric(ratio, "x")
	b.ReportMetric(0, "ns/op")
	b.Logf("per turn: %.1f ms with a snapshot after every write, %.1f ms without: %.2fx (n=%d each)", ms(median(on)), ms(median(off)), ratio, len(on))
}

// countSnapshots counts the tool results of rec that carry a workspace snapshot.
func countSnapshots(rec api.Record) int {
	n := 0
	for _, e := range rec.Events {
		var d struct {
			Snapshot json.RawMessage `json:"snapshot"`
		}
		if e.Type == "agent_tool_result" && json.Unmarshal(e.Data, &d) == nil && len(d.Snapshot) > 0 && string(d.Snapshot) != "null" {
			n++
		}
	}
	return n
}

// BenchmarkWorkspaceFork is the time from `starter fork` to the new run's first model
// call, forking at a call whose workspace holds 1,000 files, 50 MB (real worker, embedded
// server, local sandbox). Target (issue "durable workspaces"): <= 300 ms.
//
//	GOTOOLCHAIN=go1.27.3 go test ./e2e -run '^$' -bench WorkspaceFork -benchtime 5x
func BenchmarkWorkspaceFork(b *testing.B) {
	model := fakellm.New(
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall(`i=0; while [ $i -lt 1000 ]; do mkdir -p d$((i%20)); head -c 52428 /dev/urandom > d$((i%20))/f$i.bin; i=$((i+1)); done`)}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("echo appended >> a.txt")}},
		fakellm.Reply{Content: "Done."},
	)
	// The first request whose thread carries a fork's prompt is that fork's first model call.
	var mu sync.Mutex
	first := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if i := bytes.Index(body, []byte("fork-marker-")); i >= 0 {
			mark := string(body[i : i+len("fork-marker-")+4])
			mu.Lock()
			if _, ok := first[mark]; !ok {
				first[mark] = time.Now()
			}
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		model.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	p := newPlatform(b)
	p.writeConfig(autoConfig(srv.URL+"/v1", "local"))
	p.start()
	id := strings.TrimSpace(p.ok("agent", "scribe", "Make the data."))
	rec := p.waitStatus(id, api.StatusDone)
	calls := callIDs(b, rec)
	if len(calls) != 2 {
		b.Fatalf("calls %v, want 2: %s", calls, eventList(rec))
	}
	if files := p.ok("sandbox", "files", id, "--at", calls[1]); strings.Count(files, ".bin") != 1000 {
		b.Fatalf("the forked call found %d files, want 1000", strings.Count(files, ".bin"))
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		mark := fmt.Sprintf("fork-marker-%04d", i)
		t0 := time.Now()
		fid := strings.TrimSpace(p.ok("fork", id, "--at", calls[1], "--prompt", mark))
		frec := p.waitStatus(fid, api.StatusDone)
		mu.Lock()
		at, ok := first[mark]
		mu.Unlock()
		if !ok {
			b.Fatalf("fork %s made no model call with its prompt: %s", fid, eventList(frec))
		}
		lat = append(lat, at.Sub(t0))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(lat)), "ms-to-first-call")
	b.ReportMetric(0, "ns/op")
	b.Logf("starter fork → the fork's first model call: median %.0f ms (n=%d), 1,000 files / 50 MB", ms(median(lat)), len(lat))
}
