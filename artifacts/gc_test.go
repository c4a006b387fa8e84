package artifacts

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// gcStore is a directory store whose objects the test can age (the collector goes by
// modification time).
type gcStore struct {
	*Bucket
	dir string
	t   *testing.T
}

func newGCStore(t *testing.T) gcStore {
	t.Helper()
	dir := t.TempDir()
	b, err := OpenWith(context.Background(), "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return gcStore{Bucket: b, dir: dir, t: t}
}

// blob stores data and makes it age old.
func (g gcStore) blob(data string, age time.Duration) string {
	g.t.Helper()
	sum, err := g.PutBlob(context.Background(), []byte(data))
	if err != nil {
		g.t.Fatal(err)
	}
	g.age(blobKey(sum), age)
	return sum
}

func (g gcStore) artifact(run, name, data string, age time.Duration) {
	g.t.Helper()
	if err := g.Put(context.Background(), run, name, []byte(data)); err != nil {
		g.t.Fatal(err)
	}
	g.age(run+"/"+name, age)
}

func (g gcStore) age(key string, age time.Duration) {
	g.t.Helper()
	at := time.Now().Add(-age)
	if err := os.Chtimes(filepath.Join(g.dir, filepath.FromSlash(key)), at, at); err != nil {
		g.t.Fatal(err)
	}
}

func (g gcStore) exists(key string) bool {
	g.t.Helper()
	ok, err := g.b.Exists(context.Background(), key)
	if err != nil {
		g.t.Fatal(err)
	}
	return ok
}

func manifestOf(t *testing.T, files map[string]string) string {
	t.Helper()
	m := api.Manifest{Version: api.ManifestVersion}
	for path, content := range files {
		m.Entries = append(m.Entries, api.ManifestEntry{Path: path, Type: api.EntryFile, Size: int64(len(content)), SHA256: Sum([]byte(content))})
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const old = 48 * time.Hour

// world is a store as runs leave it: a run's history names a snapshot manifest (naming
// a file's bytes) and a thread head (naming the segment before it); one run keeps its
// artifacts; an orphan blob and a dead run's artifact are old, another orphan is new.
type world struct {
	g                              gcStore
	marks                          *Marks
	manifest, file, head, prev     string
	orphan, young                  string
	orphanBytes, deadArtifactBytes int64
}

func newWorld(t *testing.T) world {
	g := newGCStore(t)
	w := world{g: g, marks: NewMarks()}
	w.file = g.blob("hello from the workspace\n", old)
	w.manifest = g.blob(manifestOf(t, map[string]string{"a.txt": "hello from the workspace\n"}), old)
	w.prev = g.blob(`{"messages":[{"role":"user","content":"hi"}]}`, old)
	w.head = g.blob(fmt.Sprintf(`{"prev":"%s","messages":[{"role":"assistant","content":"hello"}]}`, w.prev), old)
	w.orphan = g.blob("a tool output of an attempt that was retried", old)
	w.orphanBytes = int64(len("a tool output of an attempt that was retried"))
	w.young = g.blob("written a minute ago", time.Minute)
	g.artifact("run-kept", "report.md", "# kept", old)
	g.artifact("run-dead", "report.md", "# nobody needs me", old)
	w.deadArtifactBytes = int64(len("# nobody needs me"))
	// What the caller found in the run's history: the result of a tool call (its snapshot)
	// and a model call's input (the thread head).
	w.marks.Scan([]byte(fmt.Sprintf(`{"snapshot":{"manifest":"%s"}}`, w.manifest)))
	w.marks.Scan([]byte(fmt.Sprintf(`{"thread":"%s"}`, w.head)))
	w.marks.Run("run-kept")
	return w
}

func TestCollectSweepsOnlyWhatNothingReferences(t *testing.T) {
	w := newWorld(t)
	rep, err := w.g.Collect(context.Background(), w.marks, GCOptions{Grace: DefaultGrace})
	if err != nil {
		t.Fatal(err)
	}
	for _, sum := range []string{w.manifest, w.file, w.head, w.prev, w.young} {
		if !w.g.exists(blobKey(sum)) {
			t.Errorf("blob %s was swept; it is referenced (or young)", sum)
		}
	}
	if w.g.exists(blobKey(w.orphan)) {
		t.Errorf("orphan blob %s is still there", w.orphan)
	}
	if !w.g.exists("run-kept/report.md") || w.g.exists("run-dead/report.md") {
		t.Errorf("run artifacts: kept run's exists=%v (want true), dead run's exists=%v (want false)",
			w.g.exists("run-kept/report.md"), w.g.exists("run-dead/report.md"))
	}
	if rep.Blobs != 6 || rep.Kept != 4 || rep.Young != 1 || rep.Swept != 1 || rep.SweptBytes != w.orphanBytes ||
		rep.ArtifactsSwept != 1 || rep.ArtifactBytesSwept != w.deadArtifactBytes {
		t.Errorf("report = %+v; want 6 blobs, 4 kept, 1 young, 1 swept (%d bytes), 1 artifact swept (%d bytes)", rep, w.orphanBytes, w.deadArtifactBytes)
	}
	if len(rep.Removed) != 2 || len(rep.Problems) != 0 {
		t.Errorf("removed = %v, problems = %v; want the orphan and the dead run's artifact, no problems", rep.Removed, rep.Problems)
	}
}

func TestCollectDryRunDeletesNothing(t *testing.T) {
	w := newWorld(t)
	rep, err := w.g.Collect(context.Background(), w.marks, GCOptions{Grace: DefaultGrace, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !w.g.exists(blobKey(w.orphan)) || !w.g.exists("run-dead/report.md") {
		t.Fatal("a dry run deleted something")
	}
	keys := []string{}
	for _, e := range rep.Removed {
		keys = append(keys, e.Key)
	}
	want := []string{blobKey(w.orphan), "run-dead/report.md"}
	if strings.Join(keys, " ") != strings.Join(want, " ") && strings.Join(keys, " ") != want[1]+" "+want[0] {
		t.Errorf("dry run lists %v; want %v", keys, want)
	}
	if !rep.DryRun || rep.Swept != 1 || rep.ArtifactsSwept != 1 {
		t.Errorf("report = %+v; want a dry run counting 1 blob and 1 artifact", rep)
	}
	// And the real run afterwards removes exactly what the dry run listed.
	rep2, err := w.g.Collect(context.Background(), w.marks, GCOptions{Grace: DefaultGrace})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep2.Removed) != len(rep.Removed) || w.g.exists(blobKey(w.orphan)) {
		t.Errorf("after the dry run, gc removed %v; want %v", rep2.Removed, rep.Removed)
	}
}

func TestCollectGrace(t *testing.T) {
	g := newGCStore(t)
	twoHours := g.blob("unreferenced for two hours", 2*time.Hour)
	if _, err := g.Collect(context.Background(), NewMarks(), GCOptions{Grace: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if !g.exists(blobKey(twoHours)) {
		t.Fatal("a blob within the 3h grace period was swept")
	}
	if _, err := g.Collect(context.Background(), NewMarks(), GCOptions{Grace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if g.exists(blobKey(twoHours)) {
		t.Fatal("a 2h old unreferenced blob survived a 1h grace period")
	}
	_, err := g.Collect(context.Background(), NewMarks(), GCOptions{Grace: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "grace 1m0s is shorter than the minimum 1h0m0s") {
		t.Fatalf("grace 1m: err = %v; want it refused, naming the minimum", err)
	}
}

// A run that writes while the collector sweeps: its new snapshot finds a file's bytes
// already in the store (dedup) and references that old, so far unreferenced blob again.
func TestCollectSparesABlobReferencedAgainDuringTheSweep(t *testing.T) {
	g := newGCStore(t)
	content := "the same bytes a run writes again\n"
	again := g.blob(content, old)
	gone := g.blob("really nobody's", old)
	var newManifest string
	o := GCOptions{Grace: DefaultGrace, afterMark: func() {
		// What activities.storeFile and the manifest put do, after the mark.
		if _, err := g.PutBlob(context.Background(), []byte(content)); err != nil {
			t.Error(err)
		}
		newManifest = g.blob(manifestOf(t, map[string]string{"again.txt": content}), 0)
	}}
	rep, err := g.Collect(context.Background(), NewMarks(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !g.exists(blobKey(again)) {
		t.Fatalf("blob %s, referenced again by manifest %s during the sweep, was swept", again, newManifest)
	}
	if g.exists(blobKey(gone)) {
		t.Fatal("the blob nothing referenced again survived")
	}
	if rep.Swept != 1 || rep.Young != 1 {
		t.Errorf("report = %+v; want 1 swept, 1 young (the freshened blob)", rep)
	}
}

func TestPutBlobFreshensOnlyAnOldBlob(t *testing.T) {
	g := newGCStore(t)
	sum := g.blob("x", 10*time.Minute)
	st0, _ := os.Stat(filepath.Join(g.dir, "blobs", sum))
	if _, err := g.PutBlob(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(filepath.Join(g.dir, "blobs", sum))
	if !st1.ModTime().Equal(st0.ModTime()) {
		t.Errorf("a blob written 10 minutes ago was rewritten (mtime %v → %v); want it left alone", st0.ModTime(), st1.ModTime())
	}
	g.age(blobKey(sum), FreshenAfter+time.Minute)
	if _, err := g.PutBlob(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(filepath.Join(g.dir, "blobs", sum))
	if time.Since(st2.ModTime()) > time.Minute {
		t.Errorf("a blob last written %s ago was not freshened (mtime %v)", FreshenAfter+time.Minute, st2.ModTime())
	}
}

func TestCollectReportsMissingAndTamperedBlobsOfAManifest(t *testing.T) {
	g := newGCStore(t)
	ok := g.blob("intact\n", old)
	tampered := g.blob("will be changed\n", old)
	m := g.blob(manifestOf(t, map[string]string{"ok.txt": "intact\n", "tampered.txt": "will be changed\n", "missing.txt": "never stored\n"}), old)
	if err := os.WriteFile(filepath.Join(g.dir, "blobs", tampered), []byte("changed by hand, longer than before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.age(blobKey(tampered), old)
	// A manifest whose own bytes were changed: still read for what it names.
	kept := g.blob("named only by a tampered manifest\n", old)
	m2 := g.blob(manifestOf(t, map[string]string{"x.txt": "a different file\n"}), old)
	if err := os.WriteFile(filepath.Join(g.dir, "blobs", m2), []byte(manifestOf(t, map[string]string{"k.txt": "named only by a tampered manifest\n"})), 0o644); err != nil {
		t.Fatal(err)
	}
	g.age(blobKey(m2), old)

	marks := NewMarks()
	marks.Blob(m)
	marks.Blob(m2)
	rep, err := g.Collect(context.Background(), marks, GCOptions{Grace: DefaultGrace})
	if err != nil {
		t.Fatalf("Collect: %v; want the problems reported, not an error", err)
	}
	all := strings.Join(rep.Problems, "\n")
	for _, want := range []string{
		"names missing.txt (sha256 " + Sum([]byte("never stored\n")) + "), which is not in the store",
		"names tampered.txt (sha256 " + tampered + ", 16 bytes), but the store holds 36 bytes",
		"blob " + m2 + " is corrupt",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems:\n%s\nwant one containing %q", all, want)
		}
	}
	for _, sum := range []string{ok, tampered, m, m2, kept} {
		if !g.exists(blobKey(sum)) {
			t.Errorf("blob %s was swept; a manifest references it", sum)
		}
	}
}

func TestCollectKeepsStoredRecordsWithinRetention(t *testing.T) {
	g := newGCStore(t)
	thread := g.blob(`{"messages":[{"role":"user","content":"a run Temporal forgot"}]}`, old)
	rec := api.Record{ID: "run-forgotten", Workflow: "AgentRun", Status: api.StatusDone,
		State:     map[string]json.RawMessage{"thread": json.RawMessage(fmt.Sprintf("%q", thread))},
		CreatedAt: time.Now().Add(-73 * time.Hour), UpdatedAt: time.Now().Add(-72 * time.Hour)}
	body, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	recSum := g.blob(string(body), old)
	g.artifact("run-forgotten", "out.txt", "an artifact of it", old)

	// Default: every stored record stays, with what it references and its artifacts.
	rep, err := g.Collect(context.Background(), NewMarks(), GCOptions{Grace: DefaultGrace})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 1 || !g.exists(blobKey(recSum)) || !g.exists(blobKey(thread)) || !g.exists("run-forgotten/out.txt") {
		t.Fatalf("no retention: report %+v; want the record, its thread and its artifact kept", rep)
	}
	// A retention shorter than the time since the run closed lets them go.
	rep, err = g.Collect(context.Background(), NewMarks(), GCOptions{Grace: DefaultGrace, Retention: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RecordsExpired != 1 || g.exists(blobKey(recSum)) || g.exists(blobKey(thread)) || g.exists("run-forgotten/out.txt") {
		t.Fatalf("retention 48h, closed 72h ago: report %+v; want the record, its thread and its artifact swept", rep)
	}
}

func TestMarksScanFindsOnlyWholeSums(t *testing.T) {
	m := NewMarks()
	s := Sum([]byte("x"))
	m.Scan([]byte(`{"a":"` + s + `","b":"` + s + `ff","c":"` + s[:63] + `","d":"` + strings.ToUpper(Sum([]byte("y"))) + `"}`))
	if len(m.refs) != 1 || !m.refs[s] {
		t.Errorf("refs = %v; want only %s (a longer or shorter hex run, or upper case, names no blob)", m.refs, s)
	}
}
