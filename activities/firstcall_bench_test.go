package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// BenchmarkDockerFirstCall drives a run's first tool call on a warm Docker container
// through the real activity code (Tools.RunTool with a snapshot asked for, as the agent
// loop sends it: the claim of a pooled container, the shell command, the snapshot of the
// workspace after it and its upload to a directory store) on a real engine, and prints
// where the time goes, phase by phase (Phases), beside the 50 ms target for the
// whole first call. Two commands: one that leaves the workspace as it was (`true`) and
// one that writes a file (what TestDockerWarmPool's runs do). The pool is refilled off
// the clock, as in BenchmarkVersusCLI.
//
//	go test ./activities -run '^$' -bench DockerFirstCall -benchtime 20x
func BenchmarkDockerFirstCall(b *testing.B) {
	for _, c := range []struct{ name, cmd string }{
		{"unchanged", "true"},
		{"changed", "hostname; ls -A | wc -l; echo mine > left.txt"},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := artifacts.OpenWith(ctx, "file://"+b.TempDir(), artifacts.Options{CacheBytes: artifacts.DefaultCacheBytes})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			sbs, err := NewSandboxes(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			spec := api.SandboxSpec{Type: api.SandboxDocker, Image: benchDockerEngine(b, sbs)}
			opts := DockerOptions(spec)
			if err := sbs.docker.Warm(ctx, opts, 1); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = sbs.docker.StopWarm(context.Background()) }()
			waitWarm := func() {
				deadline := time.Now().Add(time.Minute)
				for sbs.docker.WarmReady(opts) < 1 {
					if time.Now().After(deadline) {
						b.Fatal("the warm pool did not refill within a minute")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			a := New(Deps{Store: st, Sandboxes: sbs})
			args, _ := json.Marshal(map[string]any{"command": c.cmd})
			names := []string{PhaseOpen, PhaseCommand, PhaseSnapshot, PhaseList, PhaseRead, PhaseUpload, PhaseManifest}
			report := append(slices.Clone(names), "rest")
			times := map[string][]time.Duration{}
			var total []time.Duration
			var p Phases
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				waitWarm() // the last claim's replacement is made and started
				runID := fmt.Sprintf("bench-first-%d-%d", time.Now().UnixNano(), i)
				p.Reset()
				b.StartTimer()
				start := time.Now()
				res, err := a.Tools.RunTool(WithPhases(ctx, &p), api.RunToolRequest{
					RunID: runID, CallID: "call-1", Tool: agents.ToolShell, Args: args, Sandbox: spec, Snapshot: true,
				})
				d := time.Since(start)
				b.StopTimer()
				if err != nil || res.IsError || res.Snapshot == nil {
					b.Fatalf("first call: %v %+v", err, res)
				}
				total = append(total, d)
				for _, n := range names {
					times[n] = append(times[n], p.Get(n))
				}
				// What RunTool spends outside its phases (decoding, the output's offload).
				times["rest"] = append(times["rest"], d-p.Get(PhaseOpen)-p.Get(PhaseCommand)-p.Get(PhaseSnapshot))
				if err := sbs.Release(ctx, runID, spec); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			med := func(ds []time.Duration) time.Duration {
				s := slices.Sorted(slices.Values(ds))
				return s[len(s)/2]
			}
			var sb strings.Builder
			fmt.Fprintf(&sb, "\nfirst call on a warm container, %q, %d runs: RunTool p50 %s (p90 %s); phases p50:", c.cmd, len(total),
				msOf(med(total)), msOf(slices.Sorted(slices.Values(total))[len(total)*9/10]))
			for _, n := range report {
				fmt.Fprintf(&sb, " %s %s", n, msOf(med(times[n])))
			}
			fmt.Println(sb.String())
			b.ReportMetric(float64(med(total).Microseconds())/1000, "p50-ms")
			for _, n := range report {
				b.ReportMetric(float64(med(times[n]).Microseconds())/1000, n+"-ms")
			}
		})
	}
}

func msOf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
