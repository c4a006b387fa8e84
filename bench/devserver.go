package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Samples per server per round, and the throughput batch. Chosen so a default run (5 rounds)
// gives at least 150 samples per latency row, so that the p99 is not simply the maximum, and
// finishes in five to ten minutes on two busy cores with start-dev's stock latency.
const (
	oneActivityPerRound = 30
	activitiesPerRound  = 8 // each gives stepsPerWorkflow step samples
	stepsPerWorkflow    = 10
	signalsPerRound     = 30
	queriesPerRound     = 100
	updatesPerRound     = 50
	throughputTotal     = 500
	throughputInFlight  = 50

	// idleSettle is how long the servers sit idle after warm-up before their RSS is read.
	idleSettle = 5 * time.Second
)

// The workloads, by the names --workloads takes.
const (
	workloadOne        = "one"        // one-activity workflow
	workloadTen        = "ten"        // ten sequential activities
	workloadSignal     = "signal"     // signal round trip
	workloadMessages   = "messages"   // query and update round trips
	workloadThroughput = "throughput" // the throughput batch
)

var allWorkloads = []string{workloadOne, workloadTen, workloadSignal, workloadMessages, workloadThroughput}

// devserverFlags are the flags of `bench devserver`.
type devserverFlags struct {
	rounds           int
	throughputRounds int
	only             string
	temporal         string
	dc               dynamicConfig
	variantDC        dynamicConfig
	variantStock     bool
	startDevDC       dynamicConfig
	worker           workerOptions
	keep             bool
	pprof            string
	workloads        map[string]bool
	idleAfter        time.Duration
}

func parseDevserverFlags(args []string) (devserverFlags, error) {
	var f devserverFlags
	fs := flag.NewFlagSet("bench devserver", flag.ContinueOnError)
	fs.IntVar(&f.rounds, "rounds", 5, "measured rounds (each server, each workload, interleaved)")
	fs.IntVar(&f.throughputRounds, "throughput-rounds", 3,
		fmt.Sprintf("rounds that also run the throughput batch (%d workflows, %d in flight); at most --rounds",
			throughputTotal, throughputInFlight))
	fs.StringVar(&f.only, "only", "", "measure one server: ours or start-dev")
	fs.StringVar(&f.temporal, "temporal", "", "the temporal CLI (default: on PATH, else $GOPATH/bin/temporal)")
	fs.Var(&f.dc, "dc", "dynamic config override for OUR server, key=value (repeatable), e.g. --dc history.longPollExpirationInterval=200ms")
	fs.Var(&f.variantDC, "variant-dc", "also run a second embedded server, "+serverVariant+", with this override on top of --dc (repeatable); an A/B test under the same load")
	fs.Var(&f.startDevDC, "start-dev-dc", "dynamic config override for start-dev, key=value with a JSON value as `temporal server start-dev --dynamic-config-value` takes it (repeatable), e.g. --start-dev-dc history.transferProcessorMaxPollRPS=1000")
	fs.BoolVar(&f.variantStock, "variant-stock", false, "also run a second embedded server, "+serverVariant+", as Temporal ships it (devserver.Options.Stock: stock dynamic config, every visibility index in its new database), with --variant-dc on top")
	fs.IntVar(&f.worker.workflowPollers, "workflow-pollers", 0, "worker workflow task pollers (0: SDK default, 2)")
	fs.IntVar(&f.worker.activityPollers, "activity-pollers", 0, "worker activity task pollers (0: SDK default, 2)")
	fs.BoolVar(&f.worker.eagerStart, "eager-start", false, "start workflows with EnableEagerStart (first task handed to the bench's worker inline)")
	fs.StringVar(&f.pprof, "ours-pprof", "", "serve net/http/pprof from our server's process on this address, e.g. 127.0.0.1:6060")
	fs.DurationVar(&f.idleAfter, "idle-after", idleSettle, "how long the servers sit idle after the last round before their RSS is read again (the Go runtime returns freed memory to the OS over minutes)")
	fs.BoolVar(&f.keep, "keep", false, "keep the temporary directory (databases, server logs)")
	workloads := fs.String("workloads", strings.Join(allWorkloads, ","), "the workloads to measure, comma-separated")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	f.workloads = map[string]bool{}
	for w := range strings.SplitSeq(*workloads, ",") {
		if !slices.Contains(allWorkloads, w) {
			return f, fmt.Errorf("--workloads: unknown workload %q (want some of %s)", w, strings.Join(allWorkloads, ","))
		}
		f.workloads[w] = true
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if f.rounds < 1 {
		return f, fmt.Errorf("--rounds %d: want at least 1", f.rounds)
	}
	f.throughputRounds = min(max(f.throughputRounds, 0), f.rounds)
	switch f.only {
	case "", serverOurs, serverStartDev:
	default:
		return f, fmt.Errorf("--only %q: want %s or %s", f.only, serverOurs, serverStartDev)
	}
	if f.worker.workflowPollers == 1 {
		return f, errors.New("--workflow-pollers 1: the SDK needs at least 2 (sticky and normal queue)")
	}
	return f, nil
}

// runDevserver is `bench devserver`: start the servers, warm up, measure in interleaved rounds,
// print the report.
func runDevserver(ctx context.Context, args []string) (err error) {
	f, err := parseDevserverFlags(args)
	if err != nil {
		return err
	}
	servers := []string{serverOurs, serverStartDev}
	if f.only != "" {
		servers = []string{f.only}
	}
	if len(f.variantDC) > 0 || f.variantStock {
		servers = append(servers, serverVariant)
	}
	var temporalBin string
	if slices.Contains(servers, serverStartDev) {
		// Fail before starting anything when start-dev cannot run.
		if temporalBin, err = findTemporal(f.temporal, goPath()); err != nil {
			return err
		}
	}

	loadBefore := loadavg()
	cpuBefore := readCPUTimes()
	began := time.Now()

	dir, err := os.MkdirTemp("", "nexo-bench-")
	if err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	defer func() {
		if f.keep || err != nil {
			fmt.Fprintf(os.Stderr, "databases and server logs kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	rep := &report{servers: servers}
	rowStart := rep.declare("server start (spawn → namespace usable)", valueRow, "ms")
	rowOne := rep.declare("one-activity workflow (start → result)", latencyRow, "ms")
	rowTen := rep.declare("ten sequential activities (start → result)", latencyRow, "ms")
	rowPerAct := rep.declare("per activity = (ten − one-activity median) / 9", latencyRow, "ms")
	rowStep := rep.declare("per activity, each step by server clock (schedule → next task)", latencyRow, "ms")
	rowSignal := rep.declare("signal round trip (signal → result)", latencyRow, "ms")
	rowQuery := rep.declare("query round trip (running workflow)", latencyRow, "ms")
	rowUpdate := rep.declare("update round trip (wait for completed)", latencyRow, "ms")
	rowTput := rep.declare(fmt.Sprintf("throughput, %d workflows / %d in flight (median, worst round)", throughputTotal, throughputInFlight), rateRow, "wf/s")
	rowTputLat := rep.declare("… start → result under that load", latencyRow, "ms")
	rowTputCPU := rep.declare("… server CPU per workflow in that batch", latencyRow, "ms")
	rowTputBenchCPU := rep.declare("… bench CPU (SDK worker + client) per workflow", latencyRow, "ms")
	rowRSS := rep.declare(fmt.Sprintf("idle RSS after warm-up (%s idle)", idleSettle), valueRow, "MiB")
	rowRSSAfter := rep.declare(fmt.Sprintf("idle RSS after the run (%s idle)", f.idleAfter), valueRow, "MiB")
	rowHWM := rep.declare("peak RSS (VmHWM)", valueRow, "MiB")
	rowCPU := rep.declare("server CPU time during the measured rounds", valueRow, "s")

	// Servers, each in a child process, then a client and a worker for each.
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.close()
			t.srv.stop()
		}
	}()
	for _, name := range servers {
		progress("starting %s", name)
		t0 := time.Now()
		var srv *server
		switch name {
		case serverOurs:
			srv, err = startOurs(ctx, dir, name, false, f.dc, f.pprof)
		case serverVariant:
			srv, err = startOurs(ctx, dir, name, f.variantStock, append(slices.Clone(f.dc), f.variantDC...), "")
		default:
			srv, err = startDev(ctx, dir, temporalBin, f.startDevDC)
		}
		if err != nil {
			return err
		}
		rowStart.add(name, ms(time.Since(t0)))
		t, err := newTarget(srv, dir, f.worker)
		if err != nil {
			srv.stop()
			return err
		}
		targets = append(targets, t)
		progress("%s: %s at %s, pid %d", name, srv.version, srv.addr, srv.pid())
	}

	// Warm-up: connections, caches, the workers' sticky queues, first-task costs. Not measured.
	for _, t := range targets {
		progress("%s: warm-up", t.srv.name)
		if err := warmUp(ctx, t); err != nil {
			return err
		}
	}
	progress("idle %s, then reading RSS", idleSettle)
	if err := sleep(ctx, idleSettle); err != nil {
		return err
	}
	cpuStart := map[string]time.Duration{}
	for _, t := range targets {
		rss, err := procStatus(t.srv.pid(), "VmRSS")
		if err != nil {
			return err
		}
		rowRSS.add(t.srv.name, rss)
		if cpuStart[t.srv.name], err = procCPU(t.srv.pid()); err != nil {
			return err
		}
	}

	// One measured round of each workload on one server; the rounds loop interleaves servers.
	workloads := []struct {
		name string
		run  func(t *target) error
	}{
		{workloadOne, func(t *target) error {
			for range oneActivityPerRound {
				d, err := t.oneActivity(ctx)
				if err != nil {
					return err
				}
				rowOne.add(t.srv.name, ms(d))
			}
			return nil
		}},
		{workloadTen, func(t *target) error {
			for range activitiesPerRound {
				d, steps, err := t.activities(ctx, stepsPerWorkflow)
				if err != nil {
					return err
				}
				rowTen.add(t.srv.name, ms(d))
				for _, s := range steps {
					rowStep.add(t.srv.name, ms(s))
				}
			}
			return nil
		}},
		{workloadSignal, func(t *target) error {
			for range signalsPerRound {
				d, err := t.signalRoundTrip(ctx)
				if err != nil {
					return err
				}
				rowSignal.add(t.srv.name, ms(d))
			}
			return nil
		}},
		{workloadMessages, func(t *target) error {
			id, err := t.startMessages(ctx)
			if err != nil {
				return err
			}
			for range queriesPerRound {
				d, err := t.queryRoundTrip(ctx, id)
				if err != nil {
					return err
				}
				rowQuery.add(t.srv.name, ms(d))
			}
			for range updatesPerRound {
				d, err := t.updateRoundTrip(ctx, id)
				if err != nil {
					return err
				}
				rowUpdate.add(t.srv.name, ms(d))
			}
			return t.stopMessages(ctx, id)
		}},
		{workloadThroughput, func(t *target) error {
			cpu0, err := procCPU(t.srv.pid())
			if err != nil {
				return err
			}
			self0, err := procCPU(os.Getpid())
			if err != nil {
				return err
			}
			rate, lat, err := t.throughput(ctx, throughputTotal, throughputInFlight)
			if err != nil {
				return err
			}
			cpu1, err := procCPU(t.srv.pid())
			if err != nil {
				return err
			}
			self1, err := procCPU(os.Getpid())
			if err != nil {
				return err
			}
			rowTputCPU.add(t.srv.name, ms(cpu1-cpu0)/throughputTotal)
			rowTputBenchCPU.add(t.srv.name, ms(self1-self0)/throughputTotal)
			rowTput.add(t.srv.name, rate)
			for _, d := range lat {
				rowTputLat.add(t.srv.name, ms(d))
			}
			progress("%s: %.1f wf/s, server CPU %.1f ms per workflow", t.srv.name, rate, ms(cpu1-cpu0)/throughputTotal)
			return nil
		}},
	}
	for r := range f.rounds {
		order := slices.Clone(targets)
		if r%2 == 1 {
			slices.Reverse(order) // alternate who goes first
		}
		for _, w := range workloads {
			if !f.workloads[w.name] || (w.name == workloadThroughput && r >= f.throughputRounds) {
				continue
			}
			for _, t := range order {
				progress("round %d/%d %s: %s", r+1, f.rounds, t.srv.name, w.name)
				if err := w.run(t); err != nil {
					return err
				}
			}
		}
	}

	for _, t := range targets {
		cpu, err := procCPU(t.srv.pid())
		if err != nil {
			return err
		}
		rowCPU.add(t.srv.name, (cpu - cpuStart[t.srv.name]).Seconds())
	}
	progress("idle %s, then reading RSS", f.idleAfter)
	if err := sleep(ctx, f.idleAfter); err != nil {
		return err
	}
	for _, t := range targets {
		rss, err := procStatus(t.srv.pid(), "VmRSS")
		if err != nil {
			return err
		}
		rowRSSAfter.add(t.srv.name, rss)
		hwm, err := procStatus(t.srv.pid(), "VmHWM")
		if err != nil {
			return err
		}
		rowHWM.add(t.srv.name, hwm)
	}

	// Per activity from the client's view: each ten-activity run minus the median one-activity
	// run, over the nine further activities.
	for _, name := range servers {
		if ones := rowOne.values[name]; len(ones) > 0 {
			base := median(ones)
			for _, ten := range rowTen.values[name] {
				rowPerAct.add(name, (ten-base)/(stepsPerWorkflow-1))
			}
		}
	}

	// Header, table, goals.
	out := os.Stdout
	fmt.Fprintf(out, "### Embedded dev server vs `temporal server start-dev`\n\n")
	fmt.Fprintf(out, "- command: `%s`\n", strings.Join(append([]string{"go run ./bench devserver"}, args...), " "))
	fmt.Fprintf(out, "- date: %s; run took %s\n", began.Format(time.RFC3339), time.Since(began).Round(time.Second))
	fmt.Fprintf(out, "- machine: %d CPUs (%s), %s %s/%s\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(out, "- load average (1/5/15 min): before %s, after %s; all CPUs %.0f%% busy during the run (every process on the machine, the bench included)\n",
		loadBefore, loadavg(), busyPercent(cpuBefore, readCPUTimes()))
	for _, t := range targets {
		fmt.Fprintf(out, "- %s: %s, SQLite file, task queue %s\n", t.srv.name, t.srv.version, t.queue)
	}
	fmt.Fprintf(out, "- rounds: %d, servers interleaved; per server per round: %d one-activity, %d ten-activity, %d signal, %d query, %d update; throughput in %d of them; warm-up excluded\n",
		f.rounds, oneActivityPerRound, activitiesPerRound, signalsPerRound, queriesPerRound, updatesPerRound, f.throughputRounds)
	fmt.Fprintf(out, "- worker: raw Go SDK in the bench process, workflow pollers %s, activity pollers %s, eager start %v; dynamic config overrides for ours: %s\n",
		orDefault(f.worker.workflowPollers), orDefault(f.worker.activityPollers), f.worker.eagerStart, orNone(f.dc.String()))
	if len(f.startDevDC) > 0 {
		fmt.Fprintf(out, "- dynamic config overrides for start-dev: %s\n", f.startDevDC.String())
	}
	switch {
	case f.variantStock:
		overrides := append(slices.Clone(f.dc), f.variantDC...)
		fmt.Fprintf(out, "- %s: the embedded server as Temporal ships it (stock dynamic config, every visibility index), overrides %s\n",
			serverVariant, orNone(overrides.String()))
	case len(f.variantDC) > 0:
		fmt.Fprintf(out, "- %s: ours plus %s\n", serverVariant, f.variantDC.String())
	}
	fmt.Fprintln(out)
	rep.writeTable(out)
	fmt.Fprintf(out, "\nRatios are how many times better ours is: start-dev ÷ ours for times and memory, ours ÷ start-dev for throughput (whose second column is the worst round, not a p99). p99 is nearest-rank. n is the sample count per server, in column order.\n\n")
	if slices.Contains(servers, serverOurs) {
		fmt.Fprintf(out, "Issue 7 targets (our server):\n")
		writeGoals(out, issueGoals(rowPerAct, rowStep, rowSignal, rowTput, rowRSS, rowRSSAfter))
	}
	return nil
}

// issueGoals are issue 7's acceptance criteria.
func issueGoals(perAct, step, signal, tput, rss, rssAfter *row) []goal {
	latency := func(rw *row, useTail bool, limit float64) func() (string, bool, bool) {
		return func() (string, bool, bool) {
			mid, tail, _, ok := rw.summary(serverOurs)
			v := mid
			if useTail {
				v = tail
			}
			return formatValue(v, "ms"), v <= limit, ok
		}
	}
	memory := func(rw *row, limit float64) func() (string, bool, bool) {
		return func() (string, bool, bool) {
			v, _, _, ok := rw.summary(serverOurs)
			return formatValue(v, "MiB"), v <= limit, ok
		}
	}
	return []goal{
		{"per activity ≤ 20 ms median, (ten − one)/9", latency(perAct, false, 20)},
		{"per activity ≤ 20 ms median, each step by server clock", latency(step, false, 20)},
		{"per activity ≤ 100 ms p99, each step by server clock", latency(step, true, 100)},
		{"per activity ≤ 100 ms p99, (ten − one)/9 per run", latency(perAct, true, 100)},
		{"signal to result ≤ 20 ms median", latency(signal, false, 20)},
		{"throughput ≥ 3× start-dev (median rounds)", func() (string, bool, bool) {
			r, _, ok := tput.ratio()
			return formatRatio(r), r >= 3, ok
		}},
		{"idle RSS ≤ 250 MiB after warm-up", memory(rss, 250)},
		{"idle RSS ≤ 250 MiB after the run", memory(rssAfter, 250)},
	}
}

// warmUp runs every workload a few times on t, unmeasured.
func warmUp(ctx context.Context, t *target) error {
	for range 10 {
		if _, err := t.oneActivity(ctx); err != nil {
			return err
		}
	}
	for range 2 {
		if _, _, err := t.activities(ctx, stepsPerWorkflow); err != nil {
			return err
		}
	}
	for range 5 {
		if _, err := t.signalRoundTrip(ctx); err != nil {
			return err
		}
	}
	id, err := t.startMessages(ctx)
	if err != nil {
		return err
	}
	for range 10 {
		if _, err := t.queryRoundTrip(ctx, id); err != nil {
			return err
		}
		if _, err := t.updateRoundTrip(ctx, id); err != nil {
			return err
		}
	}
	if err := t.stopMessages(ctx, id); err != nil {
		return err
	}
	_, _, err = t.throughput(ctx, 100, throughputInFlight)
	return err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// progress reports a step on stderr, so a long run shows where it is.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func orDefault(n int) string {
	if n == 0 {
		return "SDK default"
	}
	return fmt.Sprint(n)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
