package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nexo-temporal/nexo/api"
)

// TestRecordHistories writes the replay fixtures under workflows/testdata from real runs.
// It runs only with NEXO_RECORD_HISTORIES=1: the fixtures are committed, and re-recording
// them is a deliberate act (after a change guarded by workflow.GetVersion, add a fixture
// rather than replacing the old one).
func TestRecordHistories(t *testing.T) {
	if os.Getenv("NEXO_RECORD_HISTORIES") != "1" {
		t.Skip("set NEXO_RECORD_HISTORIES=1 to re-record workflows/testdata")
	}
	p := newPlatform(t)
	p.start()
	approved := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"h1"}`))
	p.waitStatus(approved, api.StatusSuspended)
	p.ok("approve", approved, "--by", "ada")
	p.waitStatus(approved, api.StatusDone)

	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + strconv.Itoa(p.frontend)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A denied run that also received a malformed signal (recorded as signal_ignored).
	ignored := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"h2"}`))
	p.waitStatus(ignored, api.StatusSuspended)
	if err := c.SignalWorkflow(context.Background(), ignored, "", api.SignalResume, map[string]any{"aproved": true}); err != nil {
		t.Fatal(err)
	}
	p.ok("deny", ignored, "--reason", "typos")
	if rec := p.waitStatus(ignored, api.StatusDone); countEvents(rec, "signal_ignored") != 1 {
		t.Fatalf("signal_ignored events = %d, want 1", countEvents(rec, "signal_ignored"))
	}

	dash := strings.TrimSpace(p.ok("run", "BuildDashboard", "--input", `{"title":"H"}`))
	p.waitStatus(dash, api.StatusDone)
	for name, id := range map[string]string{
		"document_approval_approved.json": approved,
		"document_approval_denied.json":   ignored,
		"build_dashboard.json":            dash,
	} {
		var h historypb.History
		it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "workflows", "testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
