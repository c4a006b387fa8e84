package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nexo-temporal/nexo/api"
)

// eventsClient is one open run, "r1", holding rec: it answers nexo.run with rec and
// nexo.events two events a page, like the workflow's handler cut at its limit.
type eventsClient struct {
	client.Client
	rec        api.Record
	noEvents   bool // a worker from before nexo.events
	fullReads  int
	eventReads int
}

func (c *eventsClient) QueryWorkflow(_ context.Context, id, _ string, query string, args ...any) (converter.EncodedValue, error) {
	var v any
	switch query {
	case api.QueryRun:
		c.fullReads++
		v = c.rec
	case api.QueryEvents:
		if c.noEvents {
			return nil, errors.New("unknown queryType nexo.events")
		}
		c.eventReads++
		after := args[0].(int64)
		p := api.EventPage{ID: id, Status: c.rec.Status, Error: c.rec.Error, UpdatedAt: c.rec.UpdatedAt, FirstSeq: 1,
			Checkpoints: []string{}, Artifacts: []api.ArtifactSum{}, Waiting: map[string]json.RawMessage{}}
		for _, k := range sortedStateKeys(c.rec.State) {
			if api.IsReservedStateKey(k) {
				p.Waiting[k] = c.rec.State[k]
			} else {
				p.Checkpoints = append(p.Checkpoints, k)
			}
		}
		for _, a := range c.rec.Artifacts {
			p.Artifacts = append(p.Artifacts, api.ArtifactSum{Name: a.Name, SHA256: a.SHA256})
		}
		for _, ev := range c.rec.Events {
			if ev.Seq > after && len(p.Events) < 2 {
				p.Events = append(p.Events, ev)
			}
		}
		p.LastSeq = lastEventSeq(c.rec)
		p.More = len(p.Events) > 0 && p.Events[len(p.Events)-1].Seq < p.LastSeq
		v = p
	default:
		return nil, fmt.Errorf("unexpected query %s", query)
	}
	pl, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		return nil, err
	}
	return client.NewValue(pl), nil
}

func sortedStateKeys(m map[string]json.RawMessage) []string {
	var keys []string
	for _, k := range []string{"fetch", api.StateSuspend, api.StateApproval, "publish"} {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func events(n int) []api.Event {
	out := make([]api.Event, n)
	for i := range out {
		out[i] = api.Event{Seq: int64(i + 1), Type: fmt.Sprintf("e%d", i+1), Data: json.RawMessage("null")}
	}
	return out
}

func TestAdvanceReadsOnlyNewEvents(t *testing.T) {
	approval := json.RawMessage(`{"call_id":"1.1","tool":"write_file"}`)
	seen := api.Record{ID: "r1", Status: api.StatusRunning, Events: events(3),
		State: map[string]json.RawMessage{"fetch": json.RawMessage(`1`), api.StateSuspend: json.RawMessage(`{}`)}}
	now := api.Record{ID: "r1", Status: api.StatusSuspended, Events: events(8),
		State: map[string]json.RawMessage{"fetch": json.RawMessage(`1`), api.StateApproval: approval}}

	for _, tc := range []struct {
		name      string
		change    func(*eventsClient)
		wantFull  int
		wantPages int
	}{
		{"new events only", func(*eventsClient) {}, 0, 3},
		{"a checkpoint was added", func(c *eventsClient) { c.rec.State["publish"] = json.RawMessage(`2`) }, 1, 1},
		{"a worker without nexo.events", func(c *eventsClient) { c.noEvents = true }, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &eventsClient{rec: now}
			fc.rec.State = map[string]json.RawMessage{}
			for k, v := range now.State {
				fc.rec.State[k] = v
			}
			tc.change(fc)
			c := New(fc, "default", "nexo")
			got, err := c.advance(context.Background(), "r1", seen)
			if err != nil {
				t.Fatal(err)
			}
			if fc.fullReads != tc.wantFull || fc.eventReads != tc.wantPages {
				t.Errorf("read the whole record %d times and %d event pages; want %d and %d", fc.fullReads, fc.eventReads, tc.wantFull, tc.wantPages)
			}
			if len(got.Events) != 8 {
				t.Fatalf("advanced record has %d events, want 8", len(got.Events))
			}
			for i, ev := range got.Events {
				if ev.Seq != int64(i+1) {
					t.Errorf("event %d has seq %d", i, ev.Seq)
				}
			}
			if got.Status != api.StatusSuspended || string(got.State[api.StateApproval]) != string(approval) || got.State[api.StateSuspend] != nil || string(got.State["fetch"]) != "1" {
				t.Errorf("advanced record: status %s, state %s", got.Status, got.State)
			}
			if len(seen.Events) != 3 || seen.State[api.StateSuspend] == nil {
				t.Errorf("advance changed the record it was given: %d events, state %s", len(seen.Events), seen.State)
			}
		})
	}
}
