package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/runs"
)

// bench chaos: runs in flight while workers are SIGKILLed at random and restarted, then a
// count of what went wrong. See runChaos.

type chaosFlags struct {
	server    string
	runs      int
	kills     int
	workers   int
	killEvery time.Duration
	drain     time.Duration
	docker    string
}

func parseChaosFlags(args []string) (chaosFlags, error) {
	var f chaosFlags
	fs := flag.NewFlagSet("bench chaos", flag.ContinueOnError)
	fs.StringVar(&f.server, "server", "embedded", "embedded (the dev server, in this process) or cluster (PostgreSQL + temporal-server)")
	fs.IntVar(&f.runs, "runs", 20, "runs kept in flight while the kills go on")
	fs.IntVar(&f.kills, "kills", 100, "worker SIGKILLs in total")
	fs.IntVar(&f.workers, "workers", 3, "worker processes")
	fs.DurationVar(&f.killEvery, "kill-every", 1500*time.Millisecond, "mean time between kills (uniform 0.5x-1.5x)")
	fs.DurationVar(&f.drain, "drain", 5*time.Minute, "how long runs may take to finish after the last kill before they count as stuck")
	fs.StringVar(&f.docker, "docker", "auto", "agent runs on docker sandboxes too: auto (when the image nexo-sandbox:busybox exists), on, off")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.runs < 1 || f.kills < 0 || f.workers < 2 {
		return f, fmt.Errorf("bench chaos: --runs must be >= 1, --kills >= 0, --workers >= 2 (a kill needs a survivor)")
	}
	switch f.docker {
	case "auto":
		f.docker = "off"
		if exec.Command("docker", "image", "inspect", "nexo-sandbox:busybox").Run() == nil {
			f.docker = "on"
		}
	case "on", "off":
	default:
		return f, fmt.Errorf("bench chaos: --docker %q: want auto, on or off", f.docker)
	}
	return f, nil
}

// chaosConfig: agents with five tool calls each, on local and docker sandboxes. Each worker
// has its own sandbox root (its own directory under the fleet's), so a run moved off a
// killed host finds its files only through the snapshot taken after every change.
const chaosConfig = `llm:
  base_url: {{model}}
  model: fake-model
agents:
  - name: local
    instructions: You keep notes.
    permissions: {mode: auto}
    sandbox: {type: local}
    max_turns: 8
  - name: boxed
    instructions: You keep notes in a box.
    permissions: {mode: auto}
    sandbox: {type: docker, image: "nexo-sandbox:busybox"}
    max_turns: 8
`

// chaosScript: five tool calls per run. Every shell call appends "<call> <marker>" to a log:
// for a local sandbox the host's effects log, the marker the workspace's name (the run id);
// for a docker sandbox the workspace's .effects, read back by the last call. A line twice is
// a tool side effect repeated.
func chaosScript(effects string) []fakellm.Reply {
	call := func(name string, args map[string]string) fakellm.Call {
		b, _ := json.Marshal(args)
		return fakellm.Call{Name: name, Arguments: b}
	}
	var s []fakellm.Reply
	for _, k := range []struct{ prompt, log string }{{"chaos local", effects}, {"chaos boxed", ".effects"}} {
		mark := func(n int) fakellm.Call {
			return call("shell", map[string]string{"command": fmt.Sprintf(`echo "%d $(basename "$PWD")" >> %s; sleep 0.3`, n, k.log)})
		}
		for _, r := range []fakellm.Reply{
			{ToolCalls: []fakellm.Call{call("write_file", map[string]string{"path": "notes.md", "content": "kept"}), mark(1)}},
			{ToolCalls: []fakellm.Call{mark(2)}},
			{ToolCalls: []fakellm.Call{mark(3)}},
			{ToolCalls: []fakellm.Call{call("read_file", map[string]string{"path": "notes.md"}),
				call("shell", map[string]string{"command": "cat .effects 2>/dev/null; true"})}},
			{Content: "chaos done"},
		} {
			r.Prompt = k.prompt
			s = append(s, r)
		}
	}
	return s
}

// chaosRun is one run the chaos started.
type chaosRun struct {
	id, kind string
}

func runChaos(ctx context.Context, args []string) error {
	fl, err := parseChaosFlags(args)
	if err != nil {
		return err
	}
	effects := filepath.Join(os.TempDir(), fmt.Sprintf("nexo-chaos-effects-%d.log", os.Getpid()))
	defer os.Remove(effects)
	f, err := startFleet(ctx, fl.server, fl.workers, chaosScript(effects), chaosConfig)
	if err != nil {
		return err
	}
	defer f.stop()
	kinds := []string{"DocumentApproval", "BuildDashboard", "agent local"}
	if fl.docker == "on" {
		kinds = append(kinds, "agent boxed")
	}
	progress("chaos on %s: %d runs in flight, %d kills over %d workers, kinds %s", fl.server, fl.runs, fl.kills, fl.workers, strings.Join(kinds, ", "))

	start := time.Now()
	var (
		mu        sync.Mutex
		started   []chaosRun
		startErrs int
	)
	stopStarting := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	// Each slot keeps one run in flight: start, drive (approve), wait for the close.
	for slot := 0; slot < fl.runs; slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopStarting:
					return
				case <-ctx.Done():
					return
				default:
				}
				n := seq.Add(1)
				kind := kinds[int(n)%len(kinds)]
				id, err := f.startChaosRun(ctx, kind, n)
				if err != nil {
					mu.Lock()
					startErrs++
					mu.Unlock()
					progress("start %s: %v", kind, err)
					time.Sleep(time.Second)
					continue
				}
				mu.Lock()
				started = append(started, chaosRun{id: id, kind: kind})
				mu.Unlock()
				f.driveUntilClosed(ctx, id, kind, stopStarting)
			}
		}()
	}

	// The killer.
	workers := f.c.Workers()
	var restarts sync.WaitGroup
	kills := 0
	for kills < fl.kills && ctx.Err() == nil {
		d := time.Duration(float64(fl.killEvery) * (0.5 + rand.Float64()))
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
		var up []int
		for i, w := range workers {
			if w.Running() {
				up = append(up, i)
			}
		}
		if len(up) < 2 {
			continue // keep one worker serving
		}
		w := workers[up[rand.IntN(len(up))]]
		w.Kill()
		kills++
		if kills%10 == 0 {
			progress("%d kills, %d runs started", kills, len(started))
		}
		restarts.Add(1)
		go func() {
			defer restarts.Done()
			time.Sleep(200 * time.Millisecond)
			if err := w.Start(ctx); err != nil {
				progress("restart %s: %v", w.Name, err)
			}
		}()
	}
	restarts.Wait()
	close(stopStarting)
	killWall := time.Since(start)
	progress("kills done after %s; waiting up to %s for the %d runs to finish", killWall.Round(time.Second), fl.drain, len(started))

	// Drain: every run started must close.
	dctx, cancel := context.WithTimeout(ctx, fl.drain)
	defer cancel()
	wg.Wait()
	type verdict struct {
		lost, stuck, cpRepeated, toolRepeated, missed int
		notes                                         []string
	}
	var v verdict
	for _, r := range started {
		rec, err := f.waitClosed(dctx, r.id)
		if err != nil || !closed(rec.Status) {
			v.stuck++
			v.notes = append(v.notes, fmt.Sprintf("stuck %s %s: %v (%s)", r.kind, r.id, err, rec.Status))
			continue
		}
		if strings.HasPrefix(r.kind, "agent") && missedReads(rec) != "" {
			v.missed++
		}
		if problem := chaosResultProblem(r.kind, rec); problem != "" {
			v.lost++
			v.notes = append(v.notes, fmt.Sprintf("lost %s %s: %s", r.kind, r.id, problem))
		}
		act, err := readActivities(ctx, f.tc, r.id)
		if err != nil {
			v.notes = append(v.notes, fmt.Sprintf("history of %s: %v", r.id, err))
		}
		if rep := checkpointRepeats(r.kind, act); rep > 0 {
			v.cpRepeated += rep
			v.notes = append(v.notes, fmt.Sprintf("checkpoint repeated %s %s: %v", r.kind, r.id, act.completed))
		}
		if r.kind == "agent boxed" {
			v.toolRepeated += repeatedLines(boxedEffects(rec))
		}
	}
	wall := time.Since(start)
	v.toolRepeated += repeatedLines(readLines(effects))

	// Left behind after the reaper: restart every worker (the reaper runs at start) and give
	// it a moment, then count the runs' containers and workspace directories.
	for _, w := range workers {
		w.Kill()
		if err := w.Start(ctx); err != nil {
			return err
		}
	}
	time.Sleep(5 * time.Second)
	ids := map[string]bool{}
	for _, r := range started {
		ids[r.id] = true
	}
	containers := leftContainers(ids)
	dirs := 0
	for _, w := range workers {
		entries, _ := os.ReadDir(filepath.Join(w.Dir, "workspaces"))
		for _, e := range entries {
			if ids[e.Name()] {
				dirs++
			}
		}
	}

	for _, n := range v.notes {
		progress("%s", n)
	}
	fmt.Printf("\n`go run ./bench chaos --server %s --runs %d --kills %d` (%d workers, docker %s), %s, load %s\n\n",
		fl.server, fl.runs, fl.kills, fl.workers, fl.docker, time.Now().UTC().Format("2006-01-02"), loadavg())
	fmt.Println("| server | runs | kills | lost | stuck | runs with a read missing its own write | checkpoints repeated | tool side effects repeated | containers left | dirs left | wall |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", fl.server, len(started), kills, v.lost, v.stuck, v.missed,
		v.cpRepeated, v.toolRepeated, containers, dirs, wall.Round(time.Second))
	if startErrs > 0 {
		fmt.Printf("\n%d starts were refused while workers were down and retried\n", startErrs)
	}
	return nil
}

// startChaosRun starts run number n of kind.
func (f *fleet) startChaosRun(ctx context.Context, kind string, n int64) (string, error) {
	switch kind {
	case "DocumentApproval":
		return f.runs.Start(ctx, runs.StartRequest{Workflow: "DocumentApproval", Payload: json.RawMessage(fmt.Sprintf(`{"doc_id":"chaos-%d"}`, n))})
	case "BuildDashboard":
		return f.runs.Start(ctx, runs.StartRequest{Workflow: "BuildDashboard", Payload: json.RawMessage(`{"title":"chaos","metrics":["sales","signups","traffic"]}`)})
	case "agent local":
		return f.startAgent(ctx, "local", fmt.Sprintf("chaos local %d", n))
	default:
		return f.startAgent(ctx, "boxed", fmt.Sprintf("chaos boxed %d", n))
	}
}

// driveUntilClosed approves a DocumentApproval once it waits and returns when the run closes
// (or when the chaos stops starting runs: the drain then waits for it).
func (f *fleet) driveUntilClosed(ctx context.Context, id, kind string, stop <-chan struct{}) {
	approved := false
	for {
		rec, err := f.runs.Get(ctx, id)
		if err == nil {
			if closed(rec.Status) {
				return
			}
			if kind == "DocumentApproval" && !approved && rec.Status == api.StatusSuspended {
				if err := f.runs.Resume(ctx, id, runs.ResumeRequest{Input: map[string]any{"approved": true, "approver": "chaos"}}); err == nil {
					approved = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		if approved || kind != "DocumentApproval" {
			select {
			case <-stop:
				if approved || kind != "DocumentApproval" {
					return
				}
			default:
			}
		}
	}
}

// chaosResultProblem says what is wrong with a closed run's result ("" when it is right).
func chaosResultProblem(kind string, rec api.Record) string {
	if rec.Status != api.StatusDone {
		return fmt.Sprintf("status %s: %s", rec.Status, errText(rec.Error))
	}
	var res map[string]any
	_ = json.Unmarshal(rec.Result, &res)
	switch kind {
	case "DocumentApproval":
		if res["done"] != true || res["approver"] != "chaos" {
			return "result " + string(rec.Result)
		}
	case "BuildDashboard":
		if len(rec.Artifacts) == 0 {
			return "no dashboard.html"
		}
	default:
		if res["content"] != "chaos done" {
			return "result " + string(rec.Result)
		}
		if missed := missedReads(rec); missed != "" {
			return "a read missed the run's own write: " + missed
		}
	}
	return ""
}

// missedReads describes the run's read_file calls of notes.md that did not see the "kept"
// its first call wrote ("" when every read saw it): a workspace lost with its host.
func missedReads(rec api.Record) string {
	var missed []string
	for _, e := range rec.Events {
		var d struct{ Name, Content, Error string }
		// A retried call's result starts with a note saying so; the file's bytes come last.
		if e.Type == "agent_tool_result" && json.Unmarshal(e.Data, &d) == nil && d.Name == "read_file" &&
			d.Content != "kept" && !strings.HasSuffix(d.Content, "\nkept") {
			missed = append(missed, fmt.Sprintf("read_file notes.md answered %q %s", d.Content, d.Error))
		}
	}
	return strings.Join(missed, "; ")
}

// checkpointRepeats counts checkpoint activities completed more often than the run has
// checkpoints of that kind: a completed checkpoint executed again.
func checkpointRepeats(kind string, act activityLog) int {
	want := map[string]int{}
	switch kind {
	case "DocumentApproval":
		want = map[string]int{api.ActivityFetchDocument: 1, api.ActivityPublishDocument: 1}
	case "BuildDashboard":
		want = map[string]int{api.ActivityFetchMetric: 3}
	}
	n := 0
	for typ, w := range want {
		if got := act.completed[typ]; got > w {
			n += got - w
		}
	}
	return n
}

// boxedEffects is the .effects file a docker run's last shell call printed.
func boxedEffects(rec api.Record) []string {
	var last string
	for _, e := range rec.Events {
		if e.Type == "agent_tool_result" {
			var d struct{ Content string }
			_ = json.Unmarshal(e.Data, &d)
			if strings.Contains(d.Content, " workspace") || strings.HasPrefix(d.Content, "1 ") {
				last = d.Content
			}
		}
	}
	return strings.Split(strings.TrimSpace(last), "\n")
}

func readLines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// repeatedLines counts the lines beyond the first of each distinct line.
func repeatedLines(lines []string) int {
	seen := map[string]int{}
	n := 0
	for _, l := range lines {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if seen[l]++; seen[l] > 1 {
			n++
		}
	}
	return n
}

// leftContainers counts the containers of the given runs still present.
func leftContainers(ids map[string]bool) int {
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=nexo.managed=true", "--format", `{{.Label "nexo.run"}}`).Output()
	if err != nil {
		return 0
	}
	n := 0
	for _, id := range strings.Fields(string(out)) {
		if ids[id] {
			n++
		}
	}
	return n
}

// errText is a record's error ("" when none).
func errText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
