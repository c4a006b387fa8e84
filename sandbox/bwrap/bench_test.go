package bwrap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/egress"
)

// BenchmarkShellStart times a trivial command from the call to its result on the local
// tier, on the bubblewrap tier, with bwrap run by hand with the tier's own options (its
// namespaces, binds, filter and limits) on /bin/true, and with a bare bwrap (a user
// namespace and /usr, nothing else: what bubblewrap itself costs on this machine), on the
// bubblewrap tier with egress (its forwarder starts before each command), and the
// tier as it was with a guard process beside bwrap (bubblewrap-guarded), beside the
// Docker tier's VersusCLI.
// It reports each one's median per command (<name>-p50-ms) and the bubblewrap tier's
// cost over bwrap by hand (over-by-hand-p50-ms) and what the guard process cost it
// (guard-cost-p50-ms), each the median of per-round differences. Run it with
//
//	go test ./sandbox/bwrap -run '^$' -bench ShellStart -benchtime 20x -count 5
//
// Targets: bubblewrap <= 10 ms p50 per command, <= 3 ms over bwrap by hand.
func BenchmarkShellStart(b *testing.B) {
	if err := Probe(context.Background(), ""); err != nil {
		b.Skipf("bubblewrap cannot run here: %v", err)
	}
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "ws")
	sealed, err := New(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sealed.Close(ctx)
	// With egress: the forwarder (this test binary, run as egress.ForwarderName) starts
	// before each command.
	proxy, err := egress.New(egress.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	sess, err := proxy.Open("bench", api.EgressSpec{Agent: "bench", Allow: []string{"example.com"}})
	if err != nil {
		b.Fatal(err)
	}
	fwd, err := egress.Executable()
	if err != nil {
		b.Fatal(err)
	}
	withEgress, err := New(filepath.Join(b.TempDir(), "ws"), Options{Egress: &Egress{Forwarder: fwd, Socket: sess.Socket, Token: sess.Token, Bundle: proxy.CABundle()}})
	if err != nil {
		b.Fatal(err)
	}
	defer withEgress.Close(ctx)
	local, err := sandbox.NewLocal(dir, sandbox.LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close(ctx)
	// The tier as it was before bwrap ran without a guard process beside it: the same
	// sealed command, led by the guard (sandbox/proc_unix.go), for the comparison.
	guarded, err := sandbox.NewLocal(dir, sandbox.LocalOptions{Wrap: sealed.wrap})
	if err != nil {
		b.Fatal(err)
	}
	defer guarded.Close(ctx)
	// By hand: the tier's bwrap options and limits, then /bin/true without a shell.
	args := append(slices.Clone(sealed.prefix), "/bin/true")

	shell := func(sb sandbox.Sandbox) func(b *testing.B) {
		return func(b *testing.B) {
			b.Helper()
			res, err := sb.Shell(ctx, "true", 0)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("true: %v, %+v", err, res)
			}
		}
	}
	byHand := func(b *testing.B) {
		filter, err := filterFile()
		if err != nil {
			b.Fatal(err)
		}
		defer filter.Close()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.ExtraFiles = []*os.File{filter}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bwrap by hand: %v: %s", err, out)
		}
	}
	bin, err := LookPath("")
	if err != nil {
		b.Fatal(err)
	}
	bare := []string{bin, "--unshare-user", "--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/lib", "/lib64"} {
		if target, err := os.Readlink(d); err == nil {
			bare = append(bare, "--symlink", target, d)
		} else if _, err := os.Stat(d); err == nil {
			bare = append(bare, "--ro-bind", d, d)
		}
	}
	bare = append(bare, "--", "/bin/true")
	bareBwrap := func(b *testing.B) {
		if out, err := exec.Command(bare[0], bare[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("bare bwrap: %v: %s", err, out)
		}
	}
	// The variants run interleaved, one of each per round in a rotating order, so the
	// machine's load (shared, it moves by the second) weighs on all alike; the tier's cost
	// over bwrap by hand is the median of the per-round differences.
	variants := []struct {
		name string
		run  func(*testing.B)
	}{{"local", shell(local)}, {"bubblewrap", shell(sealed)}, {"bubblewrap-egress", shell(withEgress)}, {"bwrap-by-hand", byHand}, {"bwrap-bare", bareBwrap},
		{"bubblewrap-guarded", shell(guarded)}}
	for _, v := range variants {
		v.run(b) // warm: page cache, first fork
	}
	times := make([][]time.Duration, len(variants))
	var over []time.Duration  // bubblewrap minus by hand, per round
	var saved []time.Duration // bubblewrap-guarded minus bubblewrap, per round
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round := make([]time.Duration, len(variants))
		for k := range variants {
			j := (i + k) % len(variants)
			start := time.Now()
			variants[j].run(b)
			round[j] = time.Since(start)
			times[j] = append(times[j], round[j])
		}
		over = append(over, round[1]-round[3])
		saved = append(saved, round[5]-round[1])
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		s := slices.Sorted(slices.Values(ds))
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	for j, v := range variants {
		b.ReportMetric(p50(times[j]), v.name+"-p50-ms")
	}
	b.ReportMetric(p50(over), "over-by-hand-p50-ms")
	b.ReportMetric(p50(saved), "guard-cost-p50-ms")
}
