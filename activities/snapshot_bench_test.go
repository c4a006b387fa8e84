package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// BenchmarkSnapshot is the cost of one incremental snapshot of a 1,000-file, 50 MB
// workspace after one 10 KB file changed (issue "durable workspaces": <= 20 ms median on
// the local tier), and the bytes the snapshot adds to history (a call's request asks for
// it and names its base, its result carries the reference: <= 300 B). The store is a
// directory, as artifacts.url's default.
//
//	go test ./activities -run '^$' -bench Snapshot -benchtime 20x
func BenchmarkSnapshot(b *testing.B) {
	for _, tier := range []string{api.SandboxLocal, api.SandboxVirtual} {
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
			a := New(Deps{Store: st, Sandboxes: sbs})
			spec := api.SandboxSpec{Type: tier}
			sb, err := sbs.Open(ctx, "bench-run", spec)
			if err != nil {
				b.Fatal(err)
			}
			defer sbs.Release(ctx, "bench-run", spec)
			chunk := strings.Repeat("0123456789abcdef", 50<<20/1000/16)
			for i := range 1000 {
				if _, err := sb.Write(ctx, fmt.Sprintf("d%02d/f%04d.txt", i%20, i), []byte(fmt.Sprintf("%04d", i)+chunk)); err != nil {
					b.Fatal(err)
				}
			}
			ref, err := a.snapshotWorkspace(ctx, "bench-run", spec, sb)
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
				if _, err := sb.Write(ctx, "d00/changed.txt", small); err != nil {
					b.Fatal(err)
				}
				if ref, err = a.snapshotWorkspace(ctx, "bench-run", spec, sb); err != nil {
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
