package docker

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

var benchRuns = flag.Int("bench-runs", 30, "runs of each operation in BenchmarkVersusCLI")

// BenchmarkVersusCLI times the Docker tier's operations beside the same operations done
// with the docker command-line client, interleaved in one run on the same engine, and
// prints the median and p95 of each with their ratios. Run it with
//
//	go test ./sandbox/docker -run '^$' -bench VersusCLI -benchtime 1x
//
// Targets: a shell call at least 2x faster than `docker exec` at the median; container
// create+start within 1.1x of `docker run -d`. The "first call" rows time what a run's
// first tool call waits for on its host: Ensure and a `true` on a cold Manager, the same
// on a Manager with a warm pool of one (refilled off the clock), and by hand `docker run
// -d` then `docker exec true`. Targets: warm <= 50 ms at the median; cold within 1.1x of
// the hand-made pair.
func BenchmarkVersusCLI(b *testing.B) {
	cli := needEngine(b)
	dockerBin, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("no docker command-line client to compare with")
	}
	n := *benchRuns
	ctx := context.Background()
	m := NewManager(cli, "gotest-bench")
	defer m.Close()
	// A second Manager keeps the warm pool, so m's Ensure stays cold.
	warm := NewManager(cli, "gotest-bench-warm")
	warmOpts := Options{Image: testImage}
	if err := warm.Warm(ctx, warmOpts, 1); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = warm.StopWarm(context.Background())
		warm.Close()
	}()
	waitWarm := func() {
		deadline := time.Now().Add(time.Minute)
		for warm.WarmReady(warmOpts) < 1 {
			if time.Now().After(deadline) {
				b.Fatal("the warm pool did not refill within a minute")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	firstCall := func(mgr *Manager, id string) func() error {
		return func() error {
			sb, err := mgr.Ensure(ctx, id, Options{Image: testImage})
			if err != nil {
				return err
			}
			res, err := sb.Shell(ctx, "true", 0)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("true exited %d", res.ExitCode)
			}
			return err
		}
	}
	tmp := b.TempDir()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	src := filepath.Join(tmp, "1mib.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	docker := func(args ...string) time.Duration {
		start := time.Now()
		out, err := exec.Command(dockerBin, args...).CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return d
	}
	timed := func(f func() error) time.Duration {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// The CLI container gets the same hardening as ours.
	runArgs := func(name string) []string {
		return []string{"run", "-d", "--name", name, "--label", LabelManaged + "=true",
			"--label", LabelRun + "=" + name, "--init", "--network", "none", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777,size=" + tmpSize,
			"--ipc", "private", "--memory", DefaultMemory, "--memory-swap", DefaultMemory, "--cpus", "1",
			"--pids-limit", strconv.Itoa(DefaultPidsLimit), "--mount", "type=volume,dst=/workspace",
			"-w", "/workspace", "--entrypoint", "tail", testImage, "-f", "/dev/null"}
	}

	type op struct {
		name      string
		ours, cli []time.Duration
	}
	ops := []*op{{name: "container create+start"}, {name: "shell `true`"}, {name: "write 1 MiB"}, {name: "read 1 MiB"},
		{name: "first call, cold"}, {name: "first call, warm pool"}}
	// byHand is `docker run -d` then `docker exec true`: the first call without nexo.
	byHand := func(name string) time.Duration {
		d := docker(runArgs(name)...) + docker("exec", name, "true")
		docker("rm", "-f", "-v", name)
		return d
	}
	for i := 0; i < b.N; i++ {
		// The container the per-call operations use, warmed up once (its first command
		// starts the command server; its first write looks up the user).
		runID := fmt.Sprintf("gotest-bench-%d-%d", os.Getpid(), i)
		sb, err := m.Ensure(ctx, runID, Options{Image: testImage})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Remove(context.Background(), runID)
		if _, err := sb.Shell(ctx, "mkdir -p bench", 0); err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Write(ctx, "bench/ours.bin", data); err != nil {
			b.Fatal(err)
		}
		docker("exec", sb.ID(), "sh", "-c", "true")

		for r := 0; r < n; r++ {
			oursFirst := r%2 == 0
			pair := func(o *op, ours func() time.Duration, viaCLI func() time.Duration) {
				if oursFirst {
					o.ours = append(o.ours, ours())
					o.cli = append(o.cli, viaCLI())
				} else {
					o.cli = append(o.cli, viaCLI())
					o.ours = append(o.ours, ours())
				}
			}
			pair(ops[0], func() time.Duration {
				id := fmt.Sprintf("%s-start-%d", runID, r)
				d := timed(func() error { _, err := m.Ensure(ctx, id, Options{Image: testImage}); return err })
				if err := m.Remove(ctx, id); err != nil {
					b.Fatal(err)
				}
				return d
			}, func() time.Duration {
				name := fmt.Sprintf("%s-cli-%d", runID, r)
				d := docker(runArgs(name)...)
				docker("rm", "-f", "-v", name)
				return d
			})
			pair(ops[1], func() time.Duration {
				return timed(func() error {
					res, err := sb.Shell(ctx, "true", 0)
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("true exited %d", res.ExitCode)
					}
					return err
				})
			}, func() time.Duration {
				return docker("exec", sb.ID(), "sh", "-c", "true")
			})
			pair(ops[2], func() time.Duration {
				return timed(func() error { _, err := sb.Write(ctx, "bench/ours.bin", data); return err })
			}, func() time.Duration {
				return docker("cp", src, sb.ID()+":/workspace/bench/cli.bin")
			})
			pair(ops[3], func() time.Duration {
				return timed(func() error {
					got, err := sb.Read(ctx, "bench/ours.bin")
					if err == nil && len(got) != len(data) {
						err = fmt.Errorf("read %d bytes", len(got))
					}
					return err
				})
			}, func() time.Duration {
				return docker("cp", sb.ID()+":/workspace/bench/cli.bin", filepath.Join(tmp, "out.bin"))
			})
			waitWarm()
			pair(ops[4], func() time.Duration {
				id := fmt.Sprintf("%s-cold-%d", runID, r)
				d := timed(firstCall(m, id))
				if err := m.Remove(ctx, id); err != nil {
					b.Fatal(err)
				}
				return d
			}, func() time.Duration { return byHand(fmt.Sprintf("%s-hand-%d", runID, r)) })
			waitWarm()
			pair(ops[5], func() time.Duration {
				id := fmt.Sprintf("%s-warm-%d", runID, r)
				d := timed(firstCall(warm, id))
				if err := warm.Remove(ctx, id); err != nil {
					b.Fatal(err)
				}
				waitWarm() // the refill is off the clock, and off the CLI's
				return d
			}, func() time.Duration { return byHand(fmt.Sprintf("%s-hand2-%d", runID, r)) })
		}
	}
	b.StopTimer()

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d runs each, interleaved, Docker engine %s\n", len(ops[0].ours), engineVersion(cli))
	fmt.Fprintf(&sb, "%-24s %10s %10s %12s %12s %12s %12s\n", "operation", "nexo p50", "nexo p95", "docker p50", "docker p95", "docker/nexo", "docker/nexo")
	fmt.Fprintf(&sb, "%-24s %10s %10s %12s %12s %12s %12s\n", "", "", "", "", "", "p50", "p95")
	for _, o := range ops {
		op50, op95 := percentile(o.ours, 50), percentile(o.ours, 95)
		cp50, cp95 := percentile(o.cli, 50), percentile(o.cli, 95)
		fmt.Fprintf(&sb, "%-24s %10s %10s %12s %12s %11.2fx %11.2fx\n", o.name, ms(op50), ms(op95), ms(cp50), ms(cp95),
			float64(cp50)/float64(op50), float64(cp95)/float64(op95))
		key := strings.NewReplacer(" ", "-", "`", "", "+", "-", ",", "").Replace(o.name)
		b.ReportMetric(float64(op50.Microseconds())/1000, key+"-ms-p50")
		b.ReportMetric(float64(cp50)/float64(op50), key+"-speedup-p50")
	}
	shell := float64(percentile(ops[1].cli, 50)) / float64(percentile(ops[1].ours, 50))
	start := float64(percentile(ops[0].ours, 50)) / float64(percentile(ops[0].cli, 50))
	fmt.Fprintf(&sb, "target shell call >= 2x faster than docker exec (p50): %.2fx %s\n", shell, verdict(shell >= 2))
	fmt.Fprintf(&sb, "target create+start within 1.1x of docker run -d (p50): %.2fx %s\n", start, verdict(start <= 1.1))
	cold := float64(percentile(ops[4].ours, 50)) / float64(percentile(ops[4].cli, 50))
	fmt.Fprintf(&sb, "target cold first call within 1.1x of docker run -d + docker exec (p50): %.2fx %s\n", cold, verdict(cold <= 1.1))
	w50 := percentile(ops[5].ours, 50)
	fmt.Fprintf(&sb, "target warm first call <= 50 ms (p50): %s %s\n", ms(w50), verdict(w50 <= 50*time.Millisecond))
	fmt.Print(sb.String())
}

func engineVersion(cli *client.Client) string {
	v, err := cli.ServerVersion(context.Background(), client.ServerVersionOptions{})
	if err != nil {
		return "?"
	}
	return v.Version + " (API " + cli.ClientVersion() + ")"
}

// percentile is the nearest-rank percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	k := (p*len(s) + 99) / 100 // ceil(p/100 · n)
	return s[max(k, 1)-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(NOT met)"
}
