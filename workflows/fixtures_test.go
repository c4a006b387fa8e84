package workflows

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/artifacts"
)

// fixtureType is the workflow type of the history in file f.
func fixtureType(t *testing.T, f string) string {
	t.Helper()
	r, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("parse %s: %v", f, err)
	}
	return h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
}

// fixtureBlobs is a store holding every file of testdata/blobs, each named by its sha256.
func fixtureBlobs(t *testing.T) artifacts.Blobs {
	t.Helper()
	store, err := artifacts.Open("mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	files, err := filepath.Glob(filepath.Join("testdata", "blobs", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := store.PutBlob(context.Background(), data)
		if err != nil {
			t.Fatal(err)
		}
		if sum != filepath.Base(f) {
			t.Fatalf("fixture blob %s has sha256 %s; a blob's file is named by its sum", f, sum)
		}
	}
	return store
}
