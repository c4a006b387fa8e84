package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/fakellm"
)

// longReply is n bytes or so of text no sanitiser would leave alone: lines with quotes,
// backslashes, markup and multi-byte letters, numbered so a lost or doubled piece shows.
func longReply(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %05d: \"quoted\" \\ <b>markup</b> ünïcødé ✓ — the whole reply, byte for byte\n", i)
	}
	return b.String() + "the end."
}

// textOf is the content of every event of type typ (api.IsReplyText) among events, in
// order, joined.
func textOf(events []api.Event, typ string) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Type != typ {
			continue
		}
		var d struct{ Content, ContentRef string }
		_ = json.Unmarshal(ev.Data, &d)
		b.WriteString(d.Content)
	}
	return b.String()
}

// TestLongReplyWholeEverywhere: a model reply of 50 KB, over the 8 KB an event keeps of a
// string, is stored by reference and reaches every reader whole, byte for byte: the
// session prompt's answer, `session show` (the turn's reply, by reference in the session's
// state), `session watch --from 0` replaying it from the stream archive
// of a run the session continued on from, the gateway's session stream; and for an agent
// run `show` (its agent_done event and result), `logs --json`, and the HTTP API's events.
// The run's history holds the reference only.
func TestLongReplyWholeEverywhere(t *testing.T) {
	t.Parallel()
	long := longReply(50 << 10)
	model := fakellm.New(
		fakellm.Reply{Content: long},        // session turn 1, and the agent run's answer
		fakellm.Reply{Content: "short two"}, // session turn 2
	)
	p := newPlatform(t)
	p.writeConfig(sessionConfig(model.Start(t)) + `  - name: writer
    instructions: You write long answers.
`)
	p.start()
	g := gateway(t, p)

	// The prompt's answer.
	if out := p.ok("session", "prompt", "assistant", "long", "one", "--continue-after-turns", "1"); strings.TrimSuffix(out, "\n") != long {
		t.Errorf("session prompt printed %d bytes, want the whole %d-byte reply", len(out), len(long))
	}
	p.ok("session", "prompt", "assistant", "long", "two")
	var view api.SessionView
	if err := json.Unmarshal([]byte(p.ok("session", "show", "assistant", "long", "--json")), &view); err != nil || view.Runs < 2 {
		t.Fatalf("session view: runs %d (%v); want the session continued as new, so turn 1 is archived", view.Runs, err)
	}
	// `session show`: turn 1's reply, carried across continue-as-new by reference, whole.
	if len(view.Turns) != 2 || view.Turns[0].Reply != long || view.Turns[0].ReplyRef != "" {
		t.Errorf("session show --json: turn 1's reply is %d bytes (ref %q), want the whole %d", len(view.Turns[0].Reply), view.Turns[0].ReplyRef, len(long))
	}
	if show := p.ok("session", "show", "assistant", "long"); !strings.Contains(show, "    assistant: "+long+"\n") {
		t.Errorf("session show printed %d bytes, without turn 1's whole %d-byte reply (%.300q…)", len(show), len(long), show)
	}

	// `session watch --from 0`: turn 1's text event comes from the archived segment.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := p.startStarter(ctx, "session", "watch", "assistant", "long", "--from", "0", "--json")
	var events []api.Event
	for deadline := time.Now().Add(30 * time.Second); ; {
		events = events[:0]
		ends := 0
		for _, line := range strings.Split(watch.Stdout(), "\n") {
			var ev api.Event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Seq > 0 {
				events = append(events, ev)
				if ev.Type == api.StreamTurnEnd {
					ends++
				}
			}
		}
		if ends >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session watch showed %d turn ends in 30s:\n%.2000s\nstderr: %s", ends, watch.Stdout(), watch.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	_ = watch.Wait()
	if got := textOf(events, api.StreamText); got != long+"short two" {
		t.Errorf("session watch --from 0: text events carry %d bytes, want the whole %d-byte reply then %q (%.200q…)",
			len(got), len(long), "short two", got)
	}
	if strings.Contains(watch.Stdout(), `"content_ref"`) {
		t.Error("session watch printed a text event by reference, not resolved")
	}

	// The gateway's session stream, from the start (the archive again).
	stream := g.openSSE("/v1/sessions/assistant/long/stream?after=0", nil)
	log := &streamLog{t: t}
	stream.until("two turns", func(sseMessage) bool { return log.ended() == 2 }, log.add)
	if got := strings.Join(log.turns[0].text, ""); got != long {
		t.Errorf("gateway session stream: turn 1's text is %d bytes, want the whole %d", len(got), len(long))
	}

	// An agent run whose final answer is the long reply (the script's first, again: the
	// fake model answers by how many replies the request carries).
	id := strings.TrimSpace(p.ok("agent", "writer", "Write a lot."))
	rec := p.waitStatus(id, api.StatusDone)
	if got := textOf(rec.Events, api.EventAgentDone); got != long {
		t.Errorf("show --json: agent_done carries %d bytes, want the whole %d", len(got), len(long))
	}
	var res api.AgentResult
	if err := json.Unmarshal(rec.Result, &res); err != nil || res.Content != long || res.ContentRef != "" {
		t.Errorf("show --json: result content %d bytes, ref %q (%v); want the whole %d-byte answer", len(res.Content), res.ContentRef, err, len(long))
	}
	var logged []api.Event
	for _, line := range strings.Split(strings.TrimSpace(p.ok("logs", id, "--json")), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("logs --json line %.200q: %v", line, err)
		}
		logged = append(logged, ev)
	}
	if got := textOf(logged, api.EventAgentDone); got != long {
		t.Errorf("logs --json: agent_done carries %d bytes, want the whole %d", len(got), len(long))
	}
	var apiEvents []api.Event
	if err := json.Unmarshal(g.must(http.StatusOK, "GET", "/v1/runs/"+id+"/events", nil), &apiEvents); err != nil {
		t.Fatal(err)
	}
	if got := textOf(apiEvents, api.EventAgentDone); got != long {
		t.Errorf("GET /v1/runs/%s/events: agent_done carries %d bytes, want the whole %d", id, len(got), len(long))
	}

	// History holds the reference, never the text.
	marker := "line 00400:"
	if !strings.Contains(long, marker) {
		t.Fatalf("the reply lacks its marker %q", marker)
	}
	tc := p.dial()
	size := 0
	it := tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := proto.Marshal(ev)
		size += len(b)
		if strings.Contains(string(b), marker) {
			t.Errorf("history event %d (%s) carries the reply's text", ev.GetEventId(), ev.GetEventType())
		}
	}
	if size >= len(long) {
		t.Errorf("the run's history is %d bytes, want less than the %d-byte reply it names", size, len(long))
	}

	// A store that lost the blob: the reader fails naming it, and shows no text as whole.
	sum := sha256.Sum256([]byte(long))
	ref := hex.EncodeToString(sum[:])
	if err := os.Remove(filepath.Join(p.artifactsDir(), "blobs", ref)); err != nil {
		t.Fatalf("remove the reply's blob: %v", err)
	}
	r := p.starter("logs", id, "--json")
	if r.code == 0 || !strings.Contains(r.stderr, ref) || !strings.Contains(r.stderr, "agent_done") || strings.Contains(r.stdout, "agent_done") {
		t.Errorf("logs over a lost reply blob: exit %d, stderr %q, stdout %.300q; want a failure naming the event and blob %s", r.code, r.stderr, r.stdout, ref)
	}
}
