package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nexo-temporal/nexo/api"
)

// A run's tool calls with the workspace each found and left, for the run page's "files",
// "changes" and "fork from here" (issue "durable workspaces"). Like ReadWorkspace, this
// reads only the record and the blob store: no worker, finished runs too.

// ToolCall is one tool call of a run, as its events recorded it.
type ToolCall struct {
	ID   string
	Name string
	// Args are the call's arguments as the event recorded them (possibly shortened).
	Args json.RawMessage
	// Ended is set once the call's result is recorded; OK says it was not an error.
	Ended, OK bool
	// Snapshot is the manifest of the workspace as the call left it: "" when the call took
	// no snapshot (it changed nothing, or had no workspace).
	Snapshot string
	// SnapshotError says why the snapshot after the call could not be taken (what it
	// changed is then unknown).
	SnapshotError string
}

// ToolCalls lists the tool calls of events in the order they started: an agent run's
// agent_tool_call/agent_tool_result, or a session's tool_call start and update.
func ToolCalls(events []api.Event) []ToolCall {
	var out []ToolCall
	at := map[string]int{}
	for _, ev := range events {
		var d struct {
			CallID   string          `json:"call_id"`
			ID       string          `json:"id"`
			Name     string          `json:"name"`
			Args     json.RawMessage `json:"args"`
			Status   string          `json:"status"`
			OK       *bool           `json:"ok"`
			Snapshot string          `json:"snapshot"`
			Error    string          `json:"error"`
		}
		switch ev.Type {
		case "agent_tool_call", "agent_tool_result", api.StreamToolCall, "sandbox_snapshot_failed":
		default:
			continue
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		id := d.CallID
		if ev.Type == api.StreamToolCall {
			id = d.ID
		}
		if id == "" {
			continue
		}
		started := ev.Type == "agent_tool_call" || (ev.Type == api.StreamToolCall && d.Status == "started")
		if started {
			if _, seen := at[id]; !seen {
				at[id] = len(out)
				out = append(out, ToolCall{ID: id, Name: d.Name, Args: d.Args})
			}
			continue
		}
		i, seen := at[id]
		if !seen {
			continue // a result whose start is in an archived segment
		}
		c := &out[i]
		if ev.Type == "sandbox_snapshot_failed" {
			c.SnapshotError = d.Error
			continue
		}
		c.Ended = true
		c.OK = (d.OK != nil && *d.OK) || d.Status == "completed"
		c.Snapshot = d.Snapshot
	}
	return out
}

// HasSnapshots reports whether events record any workspace snapshot: only then does a
// call have files to show.
func HasSnapshots(events []api.Event) bool {
	for _, m := range marks(events) {
		if m.snapshot != "" {
			return true
		}
	}
	return false
}

// CallChangesUnknownError: what a tool call changed cannot be told (yet): it has not
// ended, or the snapshot after it failed.
type CallChangesUnknownError struct{ RunID, CallID, Why string }

func (e *CallChangesUnknownError) Error() string {
	return fmt.Sprintf("what tool call %s of run %s changed is not known: %s", e.CallID, e.RunID, e.Why)
}

// CallWorkspaces returns rec's workspace as call found it and as it left it. A call that
// took no snapshot left the workspace as it found it; a call still in flight is refused
// (what it changed is not known yet).
func CallWorkspaces(ctx context.Context, st WorkspaceStore, rec api.Record, call string) (before, after Workspace, err error) {
	before, err = ReadWorkspace(ctx, st, rec, call)
	if err != nil {
		return Workspace{}, Workspace{}, err
	}
	events, err := AllEvents(ctx, st, rec)
	if err != nil {
		return Workspace{}, Workspace{}, fmt.Errorf("read the events of run %s: %w", rec.ID, err)
	}
	var tc *ToolCall
	for _, c := range ToolCalls(events) {
		if c.ID == call {
			tc = &c
			break
		}
	}
	switch {
	case tc == nil:
		return Workspace{}, Workspace{}, &UnknownCallError{RunID: rec.ID, CallID: call}
	case !tc.Ended:
		return Workspace{}, Workspace{}, &CallChangesUnknownError{RunID: rec.ID, CallID: call, Why: "it has not ended"}
	case tc.SnapshotError != "":
		return Workspace{}, Workspace{}, &CallChangesUnknownError{RunID: rec.ID, CallID: call,
			Why: "the snapshot after it could not be taken (" + tc.SnapshotError + "); the files as the next call found them show its effect"}
	case tc.Snapshot == "" || tc.Snapshot == before.Ref:
		return before, before, nil
	}
	after = Workspace{RunID: rec.ID, Ref: tc.Snapshot}
	body, err := st.GetBlob(ctx, tc.Snapshot)
	if err != nil {
		return Workspace{}, Workspace{}, fmt.Errorf("read workspace snapshot %s of run %s (as call %s left it): %w", tc.Snapshot, rec.ID, call, err)
	}
	if err := json.Unmarshal(body, &after.Manifest); err != nil {
		return Workspace{}, Workspace{}, fmt.Errorf("read workspace snapshot %s of run %s (as call %s left it): decode manifest: %w", tc.Snapshot, rec.ID, call, err)
	}
	return before, after, nil
}
