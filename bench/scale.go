package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nexo-temporal/nexo/fakellm"
)

// bench scale: agent runs per second on the cluster with 1, 2 and 3 workers, in one run,
// and each worker's share of the activities (from history's ActivityTaskStarted identity).

type scaleFlags struct {
	server   string
	runs     int
	inFlight int
	max      int
}

func parseScaleFlags(args []string) (scaleFlags, error) {
	var f scaleFlags
	fs := flag.NewFlagSet("bench scale", flag.ContinueOnError)
	fs.StringVar(&f.server, "server", "cluster", "cluster (PostgreSQL + temporal-server) or embedded")
	fs.IntVar(&f.runs, "runs", 60, "agent runs per step")
	fs.IntVar(&f.inFlight, "in-flight", 12, "runs started but not finished at any time")
	fs.IntVar(&f.max, "workers", 3, "the last step's worker count (steps 1..N)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.runs < 1 || f.inFlight < 1 || f.max < 1 {
		return f, fmt.Errorf("bench scale: --runs, --in-flight and --workers must be >= 1")
	}
	return f, nil
}

const scaleConfig = `llm:
  base_url: {{model}}
  model: fake-model
agents:
  - name: scaler
    instructions: You write and read a note.
    permissions: {mode: auto}
    sandbox: {type: local}
    max_turns: 4
`

// scaleScript: two tool calls per run (a write, then a read), then the answer.
func scaleScript() []fakellm.Reply {
	w, _ := json.Marshal(map[string]string{"path": "n.md", "content": "x"})
	r, _ := json.Marshal(map[string]string{"path": "n.md"})
	return []fakellm.Reply{
		{ToolCalls: []fakellm.Call{{Name: "write_file", Arguments: w}}},
		{ToolCalls: []fakellm.Call{{Name: "read_file", Arguments: r}}},
		{Content: "scaled"},
	}
}

func runScale(ctx context.Context, args []string) error {
	fl, err := parseScaleFlags(args)
	if err != nil {
		return err
	}
	f, err := startFleet(ctx, fl.server, fl.max, scaleScript(), scaleConfig)
	if err != nil {
		return err
	}
	defer f.stop()
	workers := f.c.Workers()
	type step struct {
		n      int
		rate   float64
		share  map[string]int
		total  int
		failed int
	}
	var steps []step
	// Warm-up on every worker: the first runs pay for connections and caches.
	if _, _, err := f.scaleBatch(ctx, fl.max*2, fl.max*2); err != nil {
		return err
	}
	for n := 1; n <= fl.max; n++ {
		for i, w := range workers {
			if i < n {
				if err := w.Start(ctx); err != nil {
					return err
				}
			} else {
				w.Stop()
			}
		}
		progress("%d worker(s): %d runs, %d in flight", n, fl.runs, fl.inFlight)
		ids, wall, err := f.scaleBatch(ctx, fl.runs, fl.inFlight)
		if err != nil {
			return err
		}
		s := step{n: n, rate: float64(len(ids)) / wall.Seconds(), share: map[string]int{}}
		for _, id := range ids {
			act, err := readActivities(ctx, f.tc, id)
			if err != nil {
				s.failed++
				continue
			}
			for ident, k := range act.startedBy {
				name := f.c.WorkerOf(ident)
				if name == "" {
					name = "?"
				}
				s.share[name] += k
				s.total += k
			}
		}
		steps = append(steps, s)
	}
	fmt.Printf("\n`go run ./bench scale --server %s --runs %d --in-flight %d` (agent runs with two tool calls, fake model), %s, %s, load %s\n\n",
		fl.server, fl.runs, fl.inFlight, time.Now().UTC().Format("2006-01-02"), cpuModel(), loadavg())
	head := []string{"workers", "runs/s"}
	for _, w := range workers {
		head = append(head, w.Name+" share")
	}
	fmt.Println("| " + strings.Join(head, " | ") + " |")
	fmt.Println("|" + strings.Repeat("---|", len(head)))
	for _, s := range steps {
		cells := []string{fmt.Sprint(s.n), fmt.Sprintf("%.2f", s.rate)}
		for _, w := range workers {
			if s.total == 0 {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, fmt.Sprintf("%.0f%%", 100*float64(s.share[w.Name])/float64(s.total)))
		}
		fmt.Println("| " + strings.Join(cells, " | ") + " |")
	}
	return nil
}

// scaleBatch runs total agent runs, inFlight at a time, and returns their ids and the wall
// time from the first start to the last close. A run that does not end done is an error.
func (f *fleet) scaleBatch(ctx context.Context, total, inFlight int) ([]string, time.Duration, error) {
	sem := make(chan struct{}, inFlight)
	var mu sync.Mutex
	var ids []string
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < total; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
			id, err := f.startAgent(ctx, "scaler", fmt.Sprintf("scale %d", i))
			if err != nil {
				fail(err)
				return
			}
			wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			rec, err := f.waitClosed(wctx, id)
			if err != nil || rec.Status != "done" {
				fail(fmt.Errorf("run %s: %s %v %s", id, rec.Status, err, errText(rec.Error)))
				return
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	sort.Strings(ids)
	return ids, time.Since(start), firstErr
}
