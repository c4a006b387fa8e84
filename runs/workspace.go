package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
)

// A run's workspace at any point (issue "durable workspaces"): every tool call that can
// change the workspace records the snapshot it left (the "snapshot" of its
// agent_tool_result or tool_call event), so the workspace as call C found it is the last
// snapshot recorded before C started. Reading needs only the run's record and the blob
// store: no worker, and finished runs too.

// WorkspaceStore is what reading a run's workspace needs of the artifact store.
type WorkspaceStore interface {
	artifacts.Getter
	artifacts.Blobs
}

// ErrNoSnapshots: the run has no workspace snapshot (no sandbox, a user's own dir, or a
// run recorded before snapshots).
var ErrNoSnapshots = errors.New("no workspace snapshots")

// UnknownCallError: the run has no tool call of that id.
type UnknownCallError struct{ RunID, CallID string }

func (e *UnknownCallError) Error() string {
	return fmt.Sprintf("run %s has no tool call %s (the call ids are in `starter show %s` and `starter logs %s`)", e.RunID, e.CallID, e.RunID, e.RunID)
}

// Workspace is a run's workspace at one point.
type Workspace struct {
	RunID string
	// At is the call the workspace is as found by ("" for the latest).
	At string
	// Ref is the snapshot's manifest name; "" with Manifest empty means the workspace was
	// empty then (the call came before any change).
	Ref      string
	Manifest api.Manifest
}

// snapshotMark is one snapshot or call start in a run's events, in order.
type snapshotMark struct {
	seq      int64
	call     string // a call started here
	snapshot string // a snapshot was recorded here
}

// AllEvents returns every event of the record: its archived stream segments (sessions)
// and its own.
func AllEvents(ctx context.Context, st artifacts.Getter, rec api.Record) ([]api.Event, error) {
	before := int64(1 << 62)
	if len(rec.Events) > 0 {
		before = rec.Events[0].Seq
	}
	older, err := artifacts.StreamEvents(ctx, st, rec, 0, before)
	if err != nil {
		return nil, err
	}
	return append(older, rec.Events...), nil
}

func marks(events []api.Event) []snapshotMark {
	var out []snapshotMark
	for _, ev := range events {
		var d struct {
			CallID   string `json:"call_id"`
			ID       string `json:"id"`
			Status   string `json:"status"`
			Snapshot string `json:"snapshot"`
		}
		switch ev.Type {
		case "agent_tool_call", "agent_tool_result", api.StreamToolCall, "sandbox_snapshot",
			"forked_from": // a fork starts in the snapshot it was forked with
		default:
			continue
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		m := snapshotMark{seq: ev.Seq, snapshot: d.Snapshot}
		switch {
		case ev.Type == "agent_tool_call":
			m.call = d.CallID
		case ev.Type == api.StreamToolCall && d.Status == "started":
			m.call = d.ID
		}
		if m.call != "" || m.snapshot != "" {
			out = append(out, m)
		}
	}
	return out
}

// SnapshotAt finds the snapshot of rec's workspace as call at found it ("" for the
// latest): its manifest name, "" for an empty workspace.
func SnapshotAt(ctx context.Context, st artifacts.Getter, rec api.Record, at string) (string, error) {
	events, err := AllEvents(ctx, st, rec)
	if err != nil {
		return "", fmt.Errorf("read the events of run %s: %w", rec.ID, err)
	}
	ms := marks(events)
	any := false
	for _, m := range ms {
		any = any || m.snapshot != ""
	}
	if at == "" {
		if !any {
			return "", fmt.Errorf("run %s: %w (its sandbox is a user's dir, it never changed its workspace, or it was recorded before snapshots)", rec.ID, ErrNoSnapshots)
		}
		last := ""
		for _, m := range ms {
			if m.snapshot != "" {
				last = m.snapshot
			}
		}
		return last, nil
	}
	last := ""
	for _, m := range ms {
		if m.call == at {
			if !any {
				return "", fmt.Errorf("run %s: %w (its sandbox is a user's dir, it never changed its workspace, or it was recorded before snapshots)", rec.ID, ErrNoSnapshots)
			}
			return last, nil
		}
		if m.snapshot != "" {
			last = m.snapshot
		}
	}
	return "", &UnknownCallError{RunID: rec.ID, CallID: at}
}

// ReadWorkspace returns rec's workspace as call at found it ("" for the latest).
func ReadWorkspace(ctx context.Context, st WorkspaceStore, rec api.Record, at string) (Workspace, error) {
	ref, err := SnapshotAt(ctx, st, rec, at)
	if err != nil {
		return Workspace{}, err
	}
	w := Workspace{RunID: rec.ID, At: at, Ref: ref, Manifest: api.Manifest{Version: api.ManifestVersion}}
	if ref == "" {
		return w, nil
	}
	body, err := st.GetBlob(ctx, ref)
	if err != nil {
		return Workspace{}, fmt.Errorf("read workspace snapshot %s of run %s: %w", ref, rec.ID, err)
	}
	if err := json.Unmarshal(body, &w.Manifest); err != nil {
		return Workspace{}, fmt.Errorf("read workspace snapshot %s of run %s: decode manifest: %w", ref, rec.ID, err)
	}
	return w, nil
}

// Files lists the workspace's entries as `sandbox files` shows them.
func (w Workspace) Files() []api.WorkspaceFile {
	out := make([]api.WorkspaceFile, 0, len(w.Manifest.Entries))
	for _, e := range w.Manifest.Entries {
		out = append(out, api.WorkspaceFile{Path: e.Path, Type: e.Type, Size: e.Size, SHA256: e.SHA256,
			Mode: fmt.Sprintf("%04o", e.Mode), Link: e.Link})
	}
	return out
}

// BadPathError: a path that cannot name a file of a workspace.
type BadPathError struct{ Path, Why string }

func (e *BadPathError) Error() string { return fmt.Sprintf("path %q %s", e.Path, e.Why) }

// cleanWorkspacePath makes p workspace-relative ("/workspace/x" and "./x" are "x"), or
// says why it cannot be one.
func cleanWorkspacePath(p string) (string, error) {
	if p == "" {
		return "", &BadPathError{Path: p, Why: "is empty"}
	}
	if p == "/workspace" || strings.HasPrefix(p, "/workspace/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/workspace"), "/")
	}
	if path.IsAbs(p) {
		return "", &BadPathError{Path: p, Why: "is outside the workspace (absolute)"}
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", &BadPathError{Path: p, Why: "leads outside the workspace"}
	}
	if c == "." {
		return "", &BadPathError{Path: p, Why: "names the workspace itself, not a file"}
	}
	return c, nil
}

// ReadFile returns the bytes of the file p in the workspace, checked against its sha256.
// A path through or to a symbolic link is refused (the link could point anywhere).
func (w Workspace) ReadFile(ctx context.Context, st artifacts.Blobs, p string) ([]byte, error) {
	c, err := cleanWorkspacePath(p)
	if err != nil {
		return nil, err
	}
	byPath := map[string]api.ManifestEntry{}
	for _, e := range w.Manifest.Entries {
		byPath[e.Path] = e
	}
	for dir := path.Dir(c); dir != "."; dir = path.Dir(dir) {
		if e, ok := byPath[dir]; ok && e.Type == api.EntryLink {
			return nil, &BadPathError{Path: p, Why: fmt.Sprintf("goes through the symbolic link %s -> %s", dir, e.Link)}
		}
	}
	e, ok := byPath[c]
	switch {
	case !ok:
		return nil, fmt.Errorf("run %s: no file %s in the workspace%s: %w", w.RunID, c, w.when(), artifacts.ErrNotFound)
	case e.Type == api.EntryLink:
		return nil, &BadPathError{Path: p, Why: fmt.Sprintf("is a symbolic link (-> %s)", e.Link)}
	case e.Type == api.EntryDir:
		return nil, &BadPathError{Path: p, Why: "is a directory"}
	}
	b, err := st.GetBlob(ctx, e.SHA256)
	if err != nil {
		return nil, fmt.Errorf("run %s: read %s%s: %w", w.RunID, c, w.when(), err)
	}
	return b, nil
}

func (w Workspace) when() string {
	if w.At == "" {
		return ""
	}
	return " as call " + w.At + " found it"
}

// maxDiffText is the largest file a diff shows as text.
const maxDiffText = 256 << 10

// Diff lists what changed from a to b: added, removed and modified paths (directories
// only when added or removed), with a unified diff for text files.
func Diff(ctx context.Context, st artifacts.Blobs, a, b Workspace) ([]api.WorkspaceChange, error) {
	left, right := map[string]api.ManifestEntry{}, map[string]api.ManifestEntry{}
	for _, e := range a.Manifest.Entries {
		left[e.Path] = e
	}
	for _, e := range b.Manifest.Entries {
		right[e.Path] = e
	}
	paths := map[string]bool{}
	for p := range left {
		paths[p] = true
	}
	for p := range right {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []api.WorkspaceChange
	for _, p := range sorted {
		l, inL := left[p]
		r, inR := right[p]
		var ch api.WorkspaceChange
		switch {
		case !inL:
			ch = api.WorkspaceChange{Path: p, Change: "added"}
		case !inR:
			ch = api.WorkspaceChange{Path: p, Change: "removed"}
		case l.Type != r.Type || l.SHA256 != r.SHA256 || l.Link != r.Link || l.Mode != r.Mode:
			ch = api.WorkspaceChange{Path: p, Change: "modified"}
		default:
			continue
		}
		if (inL && l.Type == api.EntryFile) || (inR && r.Type == api.EntryFile) {
			text, binary, err := textDiff(ctx, st, p, l, inL, r, inR)
			if err != nil {
				return nil, err
			}
			ch.Diff, ch.Binary = text, binary
		}
		out = append(out, ch)
	}
	return out, nil
}

func textDiff(ctx context.Context, st artifacts.Blobs, p string, l api.ManifestEntry, inL bool, r api.ManifestEntry, inR bool) (string, bool, error) {
	read := func(e api.ManifestEntry, in bool) (string, bool, error) {
		if !in || e.Type != api.EntryFile {
			return "", true, nil
		}
		if e.Size > maxDiffText {
			return "", false, nil
		}
		b, err := st.GetBlob(ctx, e.SHA256)
		if err != nil {
			return "", false, fmt.Errorf("diff %s: %w", p, err)
		}
		if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
			return "", false, nil
		}
		return string(b), true, nil
	}
	ls, lok, err := read(l, inL)
	if err != nil {
		return "", false, err
	}
	rs, rok, err := read(r, inR)
	if err != nil {
		return "", false, err
	}
	if !lok || !rok {
		return "", true, nil
	}
	from, to := "a/"+p, "b/"+p
	if !inL {
		from = "/dev/null"
	}
	if !inR {
		to = "/dev/null"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(ls), B: difflib.SplitLines(rs),
		FromFile: from, ToFile: to, Context: 3})
	if err != nil {
		return "", false, fmt.Errorf("diff %s: %w", p, err)
	}
	return text, false, nil
}
