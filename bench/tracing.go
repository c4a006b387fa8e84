package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/cluster"
)

// bench tracing: what exporting traces costs an agent run. One worker process on the
// embedded dev server runs the same agent runs (three model calls and two tool calls each,
// fake model) with tracing off and on (OTLP/HTTP to a receiver in the bench), in
// interleaved rounds; the worker restarts between modes, outside the measurement.

type tracingFlags struct {
	runs   int
	rounds int
	warmup int
}

func parseTracingFlags(args []string) (tracingFlags, error) {
	var f tracingFlags
	fs := flag.NewFlagSet("bench tracing", flag.ContinueOnError)
	fs.IntVar(&f.runs, "runs", 20, "measured agent runs per mode and round, one at a time")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds; each runs both modes, the order alternating")
	fs.IntVar(&f.warmup, "warmup", 3, "runs after each worker start that are not measured")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("bench tracing: unexpected argument %q (flags only: --runs, --rounds, --warmup)", fs.Arg(0))
	}
	if f.runs < 1 || f.rounds < 1 || f.warmup < 0 {
		return f, fmt.Errorf("bench tracing: --runs and --rounds must be >= 1 and --warmup >= 0 (got %d, %d, %d)", f.runs, f.rounds, f.warmup)
	}
	return f, nil
}

// The modes, by the names the report uses.
const (
	tracingOff = "off"
	tracingOn  = "on (OTLP/HTTP)"
)

// spanCounter is an OTLP/HTTP trace receiver that counts the spans it is sent.
type spanCounter struct {
	url   string
	spans atomic.Int64
	srv   *http.Server
}

func startSpanCounter() (*spanCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for OTLP: %w", err)
	}
	c := &spanCounter{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range in.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans.Add(int64(len(ss.GetSpans())))
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// tracingSample is one mode's measurements in one round.
type tracingSample struct {
	wall  []float64 // ms per run
	cpu   float64   // worker CPU ms per measured run
	spans float64   // spans received per run (warm-up included: they are traced too)
}

func runTracing(ctx context.Context, args []string) error {
	fl, err := parseTracingFlags(args)
	if err != nil {
		return err
	}
	otlp, err := startSpanCounter()
	if err != nil {
		return err
	}
	defer otlp.srv.Close()
	f, err := startFleet(ctx, "embedded", 1, scaleScript(), scaleConfig)
	if err != nil {
		return err
	}
	defer f.stop()
	w := f.c.Workers()[0]
	env := map[string][]string{
		tracingOff: nil,
		// The batch processor's defaults (5 s schedule delay, 512 spans a batch): what a
		// deployment that sets only the endpoint gets.
		tracingOn: {"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.url, "OTEL_SERVICE_NAME=nexo-bench-worker"},
	}
	load0 := loadavg()
	samples := map[string][]tracingSample{}
	for round := range fl.rounds {
		modes := []string{tracingOff, tracingOn}
		if round%2 == 1 {
			modes = []string{tracingOn, tracingOff}
		}
		for _, mode := range modes {
			progress("round %d/%d, tracing %s: %d runs (+%d warm-up)", round+1, fl.rounds, mode, fl.runs, fl.warmup)
			s, err := f.tracingRound(ctx, w, env[mode], mode == tracingOn, fl, otlp)
			if err != nil {
				return fmt.Errorf("round %d, tracing %s: %w", round+1, mode, err)
			}
			samples[mode] = append(samples[mode], s)
		}
	}

	fmt.Printf("\n`go run ./bench tracing --runs %d --rounds %d --warmup %d` (agent runs of three model calls and two tool calls, fake model, one worker, embedded dev server), %s, %s, load %s before / %s after\n\n",
		fl.runs, fl.rounds, fl.warmup, time.Now().UTC().Format("2006-01-02"), cpuModel(), load0, loadavg())
	fmt.Println("| tracing | runs | wall time per run, median (p90) | worker CPU per run (median of rounds) | spans per run |")
	fmt.Println("|---|---:|---:|---:|---:|")
	type figures struct{ wall, cpu float64 }
	got := map[string]figures{}
	for _, mode := range []string{tracingOff, tracingOn} {
		var wall, cpu, spans []float64
		for _, s := range samples[mode] {
			wall = append(wall, s.wall...)
			cpu = append(cpu, s.cpu)
			spans = append(spans, s.spans)
		}
		got[mode] = figures{median(wall), median(cpu)}
		fmt.Printf("| %s | %d | %.1f ms (%.1f) | %.1f ms | %.1f |\n", mode, len(wall), median(wall), percentile(wall, 0.9), median(cpu), median(spans))
	}
	off, on := got[tracingOff], got[tracingOn]
	fmt.Printf("\ntracing on ÷ off: wall time %.2f×, worker CPU %.2f×\n", on.wall/off.wall, on.cpu/off.cpu)
	return nil
}

// tracingRound (re)starts w with env, runs the warm-up, then fl.runs measured runs one at
// a time, and stops w, which flushes its spans. A run that does not end done is an error,
// and so is a traced worker that exported nothing or an untraced one that exported spans.
func (f *fleet) tracingRound(ctx context.Context, w *cluster.Worker, env []string, traced bool, fl tracingFlags, otlp *spanCounter) (tracingSample, error) {
	var s tracingSample
	w.Stop()
	w.Env = env
	if err := w.Start(ctx); err != nil {
		return s, err
	}
	if says := strings.Contains(w.Output(), "Traces: OTLP to "); says != traced {
		w.Stop()
		return s, fmt.Errorf("the worker says it exports traces: %v, want %v:\n%s", says, traced, w.Output())
	}
	spans0 := otlp.spans.Load()
	for i := range fl.warmup {
		if _, err := f.timedAgentRun(ctx, fmt.Sprintf("warm-up %d", i)); err != nil {
			w.Stop()
			return s, err
		}
	}
	cpu0, err := procCPU(w.PID())
	if err != nil {
		w.Stop()
		return s, err
	}
	for i := range fl.runs {
		d, err := f.timedAgentRun(ctx, fmt.Sprintf("trace %d", i))
		if err != nil {
			w.Stop()
			return s, err
		}
		s.wall = append(s.wall, float64(d)/float64(time.Millisecond))
	}
	cpu1, err := procCPU(w.PID())
	if err != nil {
		w.Stop()
		return s, err
	}
	s.cpu = float64(cpu1-cpu0) / float64(time.Millisecond) / float64(fl.runs)
	w.Stop() // a clean stop flushes the batch processor
	n := otlp.spans.Load() - spans0
	s.spans = float64(n) / float64(fl.warmup+fl.runs)
	if traced != (n > 0) {
		return s, fmt.Errorf("the receiver got %d spans from a worker with tracing %v", n, traced)
	}
	return s, nil
}

// timedAgentRun starts one agent run and waits for its workflow to close (the server's
// long poll, not a record poll), returning the wall time from before the start to the
// close; a run that did not end done is an error.
func (f *fleet) timedAgentRun(ctx context.Context, prompt string) (time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	id, err := f.startAgent(rctx, "scaler", prompt)
	if err != nil {
		return 0, fmt.Errorf("start an agent run: %w", err)
	}
	err = f.tc.GetWorkflow(rctx, id, "").Get(rctx, nil)
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", id, err)
	}
	rec, err := f.runs.Get(rctx, id)
	if err != nil {
		return 0, fmt.Errorf("read run %s: %w", id, err)
	}
	if rec.Status != api.StatusDone {
		return 0, fmt.Errorf("run %s ended %s: %s", id, rec.Status, errText(rec.Error))
	}
	return d, nil
}
