package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

func TestStreamLinePlan(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	data := `{"call_id":"2.1.1","steps":[{"step":"read notes","status":"done"},{"step":"write summary","status":"in_progress"},{"step":"test","status":"pending"}]}`
	got := streamLine(api.Event{Seq: 7, Type: api.StreamPlan, At: at, Data: json.RawMessage(data)})
	want := "#7    10:00:00.000 plan: [x] read notes · [>] write summary · [ ] test"
	if got != want {
		t.Errorf("streamLine(plan) = %q, want %q", got, want)
	}
}
