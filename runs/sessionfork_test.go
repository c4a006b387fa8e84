package runs

import (
	"encoding/json"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

func TestTurnStartFindsThePromptAndTheSnapshotTheTurnFound(t *testing.T) {
	ev := func(seq int64, typ string, data map[string]any) api.Event {
		b, _ := json.Marshal(data)
		return api.Event{Seq: seq, Type: typ, Data: b}
	}
	events := []api.Event{
		ev(1, api.StreamUserInput, map[string]any{"text": "write v1", "turn": 1}),
		ev(2, api.StreamToolCall, map[string]any{"id": "1.1.1", "status": "started"}),
		ev(3, api.StreamToolCall, map[string]any{"id": "1.1.1", "status": "completed", "snapshot": "m1"}),
		ev(4, api.StreamTurnEnd, map[string]any{"turn": 1}),
		ev(5, api.StreamUserInput, map[string]any{"text": "write v2", "turn": 2}),
		ev(6, api.StreamToolCall, map[string]any{"id": "2.1.1", "status": "completed", "snapshot": "m2"}),
		ev(7, api.StreamTurnEnd, map[string]any{"turn": 2}),
		ev(8, api.StreamUserInput, map[string]any{"text": "read", "turn": 3}),
	}
	for _, tc := range []struct {
		turn         int
		prompt, snap string
		ok           bool
	}{
		{1, "write v1", "", true}, // before any change: an empty workspace
		{2, "write v2", "m1", true},
		{3, "read", "m2", true},
		{4, "", "", false},
	} {
		prompt, snap, ok := turnStart(events, tc.turn)
		if prompt != tc.prompt || snap != tc.snap || ok != tc.ok {
			t.Errorf("turnStart(turn %d) = %q, %q, %v; want %q, %q, %v", tc.turn, prompt, snap, ok, tc.prompt, tc.snap, tc.ok)
		}
	}
}

func TestUnknownTurnErrorSaysWhichTurnsThereAre(t *testing.T) {
	for _, tc := range []struct {
		err  UnknownTurnError
		want string
	}{
		{UnknownTurnError{Session: "scribe/src", Turn: 3, Turns: 2}, "session scribe/src has no turn 3: --at takes 1-2 (the turns are in `starter session show scribe src`)"},
		{UnknownTurnError{Session: "scribe/src", Turn: 1}, "session scribe/src has no turns yet: there is nothing to fork"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
