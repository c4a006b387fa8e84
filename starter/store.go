package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

// storeCmd looks after the artifact store (artifacts.url) itself: gc removes what no run
// needs any more; verify rehashes everything in it.
func storeCmd() *command {
	return &command{
		name: "store", args: "gc [--dry-run] [--grace DURATION] | verify",
		summary: "Look after the artifact store: gc removes blobs and run artifacts that no open run, no run Temporal still keeps and no stored record (within artifacts.retention) references; verify rehashes every blob and run artifact and lists each changed or missing one (exit 1 if any).",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("dry-run", false, "gc: list what would be removed and remove nothing")
			fs.Duration("grace", artifacts.DefaultGrace, fmt.Sprintf("gc: keep anything written within this long, referenced or not (at least %s)", artifacts.MinGrace))
			fs.Bool("json", false, "gc, verify: print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: gc or verify")
			}
			switch args[0] {
			case "gc":
				return storeGC(ctx, e, fs, args[1:])
			case "verify":
				return storeVerify(ctx, e, fs, args[1:])
			}
			return usagef("unknown store subcommand %q (want gc or verify)", args[0])
		},
	}
}

// gcOutput is what store gc --json prints.
type gcOutput struct {
	Marked runs.MarkStats     `json:"marked"`
	Report artifacts.GCReport `json:"report"`
}

func storeGC(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	if len(args) != 0 {
		return usagef("gc takes no arguments, got %q", args)
	}
	dry, _ := fs.GetBool("dry-run")
	grace, _ := fs.GetDuration("grace")
	asJSON, _ := fs.GetBool("json")
	if grace < artifacts.MinGrace {
		return usagef("--grace %s is shorter than %s: a blob a run stores again is freshened only when older than %s, so a shorter grace could remove it while the run references it", grace, artifacts.MinGrace, artifacts.FreshenAfter)
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	b, err := e.listableStore(ctx, "gc", cfg.Artifacts.URL)
	if err != nil {
		return err
	}
	// The mark reads every history first and the store after: a blob a run writes in
	// between is younger than the grace period, and one it stores again is freshened.
	now := time.Now()
	marks := artifacts.NewMarks()
	stats, err := rc.MarkStore(ctx, marks, cfg.Artifacts.Retention, now)
	if err != nil {
		return fmt.Errorf("store gc: nothing removed: %w", err)
	}
	rep, err := b.Collect(ctx, marks, artifacts.GCOptions{Grace: grace, Retention: cfg.Artifacts.Retention, DryRun: dry, Now: now})
	if err != nil {
		return fmt.Errorf("store gc: %w", err)
	}
	if asJSON {
		if err := e.printJSON(gcOutput{Marked: stats, Report: rep}); err != nil {
			return err
		}
	} else {
		printGC(e, cfg.Artifacts.URL, cfg.Artifacts.Retention, grace, stats, rep)
	}
	if n := len(rep.Problems); n > 0 {
		return fmt.Errorf("%d referenced blob(s) of %s are missing or corrupt (listed above; kept, and the runs that need them say so when they read them)", n, cfg.Artifacts.URL)
	}
	return nil
}

func printGC(e *env, url string, retention, grace time.Duration, st runs.MarkStats, rep artifacts.GCReport) {
	w := e.stdout
	keep := "every stored record"
	if retention > 0 {
		keep = fmt.Sprintf("stored records of runs closed within %s (artifacts.retention)", retention)
	}
	nsRet := "unknown"
	if st.NamespaceRetention > 0 {
		nsRet = st.NamespaceRetention.String()
	}
	fmt.Fprintf(w, "store %s\n", url)
	fmt.Fprintf(w, "marked from %d open and %d closed executions (%d history events; Temporal keeps closed runs %s) and %d stored records of runs Temporal no longer shows; keeping %s\n",
		st.Open, st.Closed, st.Events, nsRet, rep.Records, keep)
	if st.Expired > 0 || rep.RecordsExpired > 0 {
		fmt.Fprintf(w, "past artifacts.retention: %d closed runs, %d stored records\n", st.Expired, rep.RecordsExpired)
	}
	fmt.Fprintf(w, "blobs: %d (%s); referenced %d (%s); unreferenced but written within the grace period (%s) %d (%s)\n",
		rep.Blobs, byteSize(rep.BlobBytes), rep.Kept, byteSize(rep.KeptBytes), grace, rep.Young, byteSize(rep.YoungBytes))
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	for _, r := range rep.Removed {
		fmt.Fprintf(w, "  %s %s (%s, modified %s)\n", verb, r.Key, byteSize(r.Size), r.ModTime.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "%s %d blobs (%s) and %d run artifacts (%s)\n", verb, rep.Swept, byteSize(rep.SweptBytes), rep.ArtifactsSwept, byteSize(rep.ArtifactBytesSwept))
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing was deleted")
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(e.stderr, "problem: %s\n", p)
	}
}

// verifyProgressEvery: a store of more objects than this gets progress lines on stderr.
const verifyProgressEvery = 1000

func storeVerify(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	if len(args) != 0 {
		return usagef("verify takes no arguments, got %q", args)
	}
	for _, f := range []string{"dry-run", "grace"} {
		if fs.Changed(f) {
			return usagef("--%s is a flag of store gc, not of store verify", f)
		}
	}
	asJSON, _ := fs.GetBool("json")
	cfg, err := e.config()
	if err != nil {
		return err
	}
	b, err := e.listableStore(ctx, "verify", cfg.Artifacts.URL)
	if err != nil {
		return err
	}
	rep, err := b.Verify(ctx, artifacts.VerifyOptions{Progress: func(p artifacts.VerifyProgress) {
		if p.Total >= verifyProgressEvery && (p.Done%verifyProgressEvery == 0 || p.Done == p.Total) {
			fmt.Fprintf(e.stderr, "verified %d of %d objects (%s)\n", p.Done, p.Total, byteSize(p.Bytes))
		}
	}})
	if err != nil {
		return fmt.Errorf("store verify: %w", err)
	}
	if asJSON {
		if err := e.printJSON(rep); err != nil {
			return err
		}
	} else {
		w := e.stdout
		fmt.Fprintf(w, "store %s\n", cfg.Artifacts.URL)
		fmt.Fprintf(w, "rehashed %d blobs and %d run artifacts (%s)\n", rep.Blobs, rep.Artifacts, byteSize(rep.Bytes))
		for _, p := range rep.Problems {
			line := fmt.Sprintf("missing: %s (sha256 %s) is not in the store", p.Key, p.SHA256)
			if p.Kind == "mismatch" {
				line = fmt.Sprintf("mismatch: %s %s do not match their sha256 %s (they hash to %s)", api.StoreCorruptLead, p.Key, p.SHA256, p.Got)
			}
			if len(p.NamedBy) > 0 {
				line += "; named by snapshot manifest " + strings.Join(p.NamedBy, ", ")
			}
			if len(p.Runs) > 0 {
				line += "; runs " + strings.Join(p.Runs, ", ")
			} else {
				line += "; no stored record names it (an open run's history may)"
			}
			fmt.Fprintln(w, line)
		}
	}
	if n := len(rep.Problems); n > 0 {
		return fmt.Errorf("store verify: %d object(s) of %s changed or missing (listed above): restore them from a backup of the store; the runs that read them fail with %s", n, cfg.Artifacts.URL, api.ErrTypeStoreCorrupt)
	}
	if !asJSON {
		fmt.Fprintln(e.stdout, "every object matches its sha256")
	}
	return nil
}

// byteSize prints n bytes for a person: 812 B, 3.4 KiB, 12.0 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// listableStore opens the artifact store for a store subcommand that lists it.
func (e *env) listableStore(ctx context.Context, cmd, url string) (*artifacts.Bucket, error) {
	st, err := e.artifactStore(ctx)
	if err != nil {
		return nil, err
	}
	b, ok := st.(*artifacts.Bucket)
	if !ok {
		return nil, fmt.Errorf("store %s: the store at %s cannot be listed", cmd, url)
	}
	return b, nil
}
