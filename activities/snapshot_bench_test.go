package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// BenchmarkSnapshot is the cost of one incremental snapshot of a 1,000-file, 50 MB
// workspace after one 10 KB file changed (issue "durable workspaces": <= 20 ms median on
// the local tier, <= 60 ms on Docker), and the bytes the snapshot adds to history (a call's request asks for
// it and names its base, its result carries the reference: <= 300 B). The store is a
// directory, as artifacts.url's default.
//
//	go test ./activities -run '^$' -bench Snapshot -benchtime 20x
func BenchmarkSnapshot(b *testing.B) {
	for _, tier := range []string{api.SandboxLocal, api.SandboxVirtual, api.SandboxDocker} {
		b.Run(tier, func(b *testing.B) {
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
			spec := api.SandboxSpec{Type: tier}
			if tier == api.SandboxDocker {
				spec.Image = benchDockerEngine(b, sbs)
			}
			a := New(Deps{Store: st, Sandboxes: sbs})
			runID := fmt.Sprintf("bench-run-%d", time.Now().UnixNano())
			sb, err := sbs.Open(ctx, runID, spec)
			if err != nil {
				b.Fatal(err)
			}
			defer sbs.Release(ctx, runID, spec)
			if tier == api.SandboxDocker {
				// 1,000 files through the archive API would take a minute: one command writes them.
				res, err := sb.Shell(ctx, `i=0; while [ $i -lt 1000 ]; do d=$(printf d%02d $((i%20))); mkdir -p $d; { printf %04d $i; head -c 52424 /dev/zero; } > $d/$(printf f%04d $i).txt; i=$((i+1)); done`, time.Minute)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("write the workspace: %v %+v", err, res)
				}
			} else {
				chunk := strings.Repeat("0123456789abcdef", 50<<20/1000/16)
				for i := range 1000 {
					if _, err := sb.Write(ctx, fmt.Sprintf("d%02d/f%04d.txt", i%20, i), []byte(fmt.Sprintf("%04d", i)+chunk)); err != nil {
						b.Fatal(err)
					}
				}
			}
			// A workspace written long before the call, as in a run: the Docker tier's times
			// are whole seconds, and a file whose second has not ended before the last
			// snapshot began is read again (activities/snapshot.go, sandbox/docker/listing.go).
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + racyWindow)))
			ref, err := a.Host.snapshotWorkspace(ctx, runID, spec, sb)
			if err != nil {
				b.Fatal(err)
			}
			if ref.Files != 1000 || ref.Bytes < 50_000_000 {
				b.Fatalf("first snapshot %+v, want 1000 files, 50 MB", ref)
			}
			small := []byte(strings.Repeat("x", 10<<10))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				small[0] = byte('a' + i%26)
				small[1] = byte('a' + i/26%26)
				small[2] = byte('a' + i/676%26)
				b.StopTimer() // the write is the tool call's, not the snapshot's (Docker's costs 100 ms)
				if _, err := sb.Write(ctx, "d00/changed.txt", small); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if ref, err = a.Host.snapshotWorkspace(ctx, runID, spec, sb); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if ref.Uploaded != int64(len(small)) {
				b.Fatalf("the last snapshot uploaded %d bytes, want only the changed %d", ref.Uploaded, len(small))
			}
			req, _ := json.Marshal(api.RunToolRequest{Snapshot: true, Base: ref.Manifest})
			empty, _ := json.Marshal(api.RunToolRequest{})
			res, _ := json.Marshal(api.RunToolResult{Snapshot: &ref})
			plain, _ := json.Marshal(api.RunToolResult{})
			b.ReportMetric(float64(len(req)-len(empty)+len(res)-len(plain)), "history-B/call")
		})
	}
}

// benchDockerEngine gives the Docker tier to sbs with an image built for the benchmark, or
// skips when no Docker engine answers (as the Docker tier's own tests do).
func benchDockerEngine(b testing.TB, sbs *Sandboxes) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := docker.NewClient(ctx)
	if err != nil {
		b.Skipf("no Docker engine answers: %v", err)
	}
	const tag = "nexo-sandbox:gobench"
	if err := docker.BuildImage(ctx, cli, tag); err != nil {
		b.Fatalf("build %s: %v", tag, err)
	}
	m := docker.NewManager(cli, "gobench-snapshot")
	b.Cleanup(func() { m.Close(); cli.Close() })
	sbs.WithDocker(m)
	return tag
}
