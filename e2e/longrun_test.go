package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// historyStats reads a run's whole history: its encoded size and its largest payload.
func historyStats(t *testing.T, p *platform, id string) (total, largest int, events int) {
	t.Helper()
	c := p.dial() // GetWorkflowHistory returns history as stored: references, not what they name
	it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		total += proto.Size(ev)
		largest = max(largest, largestPayload(ev))
	}
	return total, largest, events
}

// largestPayload is the size of the largest payload an event holds.
func largestPayload(ev *historypb.HistoryEvent) int {
	n := 0
	var walk func(m proto.Message)
	walk = func(m proto.Message) {
		if p, ok := m.(*commonpb.Payload); ok {
			n = max(n, proto.Size(p))
			return
		}
		r := m.ProtoReflect()
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					walk(l.Get(i).Message().Interface())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message().Interface())
					return true
				})
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				walk(v.Message().Interface())
			}
			return true
		})
	}
	walk(ev)
	return n
}

// An agent that reads large files one after another used to die of its own thread (every
// model call carried all of it, 1.8 MB at most). By reference it finishes, the model still
// reads every file whole, and no payload in history passes 256 KB.
func TestAgentReadingLargeFilesKeepsHistorySmall(t *testing.T) {
	t.Parallel()
	const files, size = 12, 200_000
	var script []fakellm.Reply
	for i := 1; i <= files; i++ {
		script = append(script, fakellm.Reply{ToolCalls: []fakellm.Call{{Name: "read_file",
			Arguments: json.RawMessage(fmt.Sprintf(`{"path":"f%d.txt"}`, i))}}})
	}
	script = append(script, fakellm.Reply{Content: "Read them all."})
	model := fakellm.New(script...)
	p := newPlatform(t)
	p.writeConfig(`llm:
  base_url: ` + model.Start(t) + `
  model: fake-model
agents:
  - name: reader
    permissions: {mode: auto}
    sandbox: {type: local, dir: ./workspace}
    max_turns: 20
`)
	ws := filepath.Join(p.dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= files; i++ {
		body := strings.Repeat(fmt.Sprintf("file %d line\n", i), size/12)
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.start()
	r := p.starter("agent", "reader", "Read every file.", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "is done") {
		t.Fatalf("agent --wait: exit %d\n%s\n%s\n%s", r.code, r.stdout, r.stderr, p.output())
	}
	id := strings.Fields(r.stderr[strings.Index(r.stderr, "run ")+4:])[0]
	rec := p.record(id)
	if rec.Status != api.StatusDone {
		t.Fatalf("status %s, error %v", rec.Status, rec.Error)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	whole := 0
	for _, m := range last.Messages {
		if c, _ := m["content"].(string); m["role"] == "tool" && len(c) >= size/12*len("file 1 line\n") {
			whole++
		}
	}
	if whole != files {
		t.Errorf("the last request held %d whole files, want %d", whole, files)
	}
	total, largest, events := historyStats(t, p, id)
	t.Logf("history: %d events, %d bytes, largest payload %d bytes (the files: %d bytes)", events, total, largest, files*size)
	if largest > 256<<10 {
		t.Errorf("largest payload in history = %d bytes, want under 256 KB", largest)
	}
	if total > 400_000 {
		t.Errorf("history = %d bytes for %d files of %d bytes, want it to hold references, not the files", total, files, size)
	}
}
