package artifacts

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// TestVerifyFindsChangedAndMissingObjectsAndTheirRuns: a store with an intact blob, a
// changed thread segment a stored record references, a manifest naming a changed file and
// a missing one (the manifest referenced by another run's record), and a run artifact
// changed after its record. Verify lists exactly the changed and missing objects, each with
// the runs whose records reach it, and an intact store has no problem.
func TestVerifyFindsChangedAndMissingObjectsAndTheirRuns(t *testing.T) {
	g := newGCStore(t)
	ctx := context.Background()
	if rep, err := g.Verify(ctx, VerifyOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("empty store: %+v, %v", rep, err)
	}
	g.blob("intact\n", time.Hour)
	segment := g.blob(`{"parent":"","messages":[{"role":"user","content":"hello"}]}`, time.Hour)
	file := g.blob("will be changed\n", time.Hour)
	missing := Sum([]byte("never stored\n"))
	m := g.blob(manifestOf(t, map[string]string{"a.txt": "will be changed\n", "gone.txt": "never stored\n"}), time.Hour)
	g.artifact("run-b", "notes.md", "as recorded", time.Hour)
	record := func(id, ref string, arts []api.Artifact) {
		b, _ := json.Marshal(api.Record{ID: id, Workflow: "AgentRun", Status: api.StatusDone,
			Events: []api.Event{{Seq: 1, Type: "x", Data: json.RawMessage(`{"ref":"` + ref + `"}`)}}, Artifacts: arts})
		g.blob(string(b), time.Hour)
	}
	record("run-a", segment, nil)
	record("run-b", m, []api.Artifact{{Name: "notes.md", SHA256: Sum([]byte("as recorded"))}})
	if rep, err := g.Verify(ctx, VerifyOptions{}); err != nil || len(rep.Problems) != 1 || rep.Problems[0].SHA256 != missing {
		t.Fatalf("before the changes: %+v, %v; want only the missing file", rep.Problems, err)
	}
	for _, sum := range []string{segment, file} {
		if err := os.WriteFile(filepath.Join(g.dir, "blobs", sum), []byte("changed by hand\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(g.dir, "run-b", "notes.md"), []byte("changed too"), 0o644); err != nil {
		t.Fatal(err)
	}

	var seen []VerifyProgress
	rep, err := g.Verify(ctx, VerifyOptions{Progress: func(p VerifyProgress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]VerifyProblem{}
	for _, p := range rep.Problems {
		got[p.Key] = p
	}
	want := map[string]struct {
		kind string
		runs []string
	}{
		blobKey(segment): {"mismatch", []string{"run-a"}},
		blobKey(file):    {"mismatch", []string{"run-b"}},
		blobKey(missing): {"missing", []string{"run-b"}},
		"run-b/notes.md": {"mismatch", []string{"run-b"}},
	}
	if len(got) != len(want) {
		t.Errorf("problems = %+v, want %v", rep.Problems, want)
	}
	for key, w := range want {
		p, ok := got[key]
		if !ok || p.Kind != w.kind || !reflect.DeepEqual(p.Runs, w.runs) {
			t.Errorf("%s: %+v, want %s of runs %v", key, p, w.kind, w.runs)
		}
	}
	if p := got[blobKey(segment)]; p.Got != Sum([]byte("changed by hand\n")) {
		t.Errorf("segment: got %s, want what the changed bytes hash to", p.Got)
	}
	if n := len(seen); n == 0 || seen[n-1].Done != seen[n-1].Total || rep.Blobs != 6 || rep.Artifacts != 1 {
		t.Errorf("progress %v, %d blobs, %d artifacts; want every object counted", seen, rep.Blobs, rep.Artifacts)
	}
}
