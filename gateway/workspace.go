package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/nexo-temporal/nexo/runs"
)

// A run's workspace at any of its tool calls, from the snapshots in the blob store: no
// worker needed, finished runs too (issue "durable workspaces"). `?at=CALL` is the
// workspace as that call found it; no `at` is now (or as the run ended).

// workspaceStore is the gateway's store as snapshots are read from it.
func (s *Server) workspaceStore() (runs.WorkspaceStore, error) {
	st, ok := s.store.(runs.WorkspaceStore)
	if !ok {
		return nil, &inputError{status: http.StatusNotImplemented, msg: "this gateway has no blob store to read workspace snapshots from (artifacts.url)"}
	}
	return st, nil
}

func (s *Server) workspaceAt(r *http.Request, at string) (runs.Workspace, runs.WorkspaceStore, error) {
	st, err := s.workspaceStore()
	if err != nil {
		return runs.Workspace{}, nil, err
	}
	rec, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return runs.Workspace{}, nil, err
	}
	w, err := runs.ReadWorkspace(r.Context(), st, rec, at)
	return w, st, err
}

// FilesList is the answer of GET /v1/runs/{id}/files.
type FilesList struct {
	Run      string `json:"run"`
	At       string `json:"at,omitempty"`
	Snapshot string `json:"snapshot"`
	Files    any    `json:"files"`
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	ws, _, err := s.workspaceAt(r, r.URL.Query().Get("at"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, FilesList{Run: ws.RunID, At: ws.At, Snapshot: ws.Ref, Files: ws.Files()})
}

// getFile serves a workspace file's bytes, sandboxed like an artifact: whatever a model or
// a command wrote.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	ws, st, err := s.workspaceAt(r, r.URL.Query().Get("at"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := ws.ReadFile(r.Context(), st, r.PathValue("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", http.DetectContentType(body))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *Server) diffFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("from") == "" {
		s.fail(w, r, badInput("diff needs ?from=CALL (and optionally &to=CALL; no to is now)"))
		return
	}
	a, st, err := s.workspaceAt(r, q.Get("from"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, _, err := s.workspaceAt(r, q.Get("to"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	changes, err := runs.Diff(r.Context(), st, a, b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]any{"run": a.RunID, "from": q.Get("from"), "to": q.Get("to"), "changes": changes})
}

// ForkBody is the body of POST /v1/runs/{id}/fork.
type ForkBody struct {
	At     string          `json:"at"`
	ID     string          `json:"id,omitempty"`
	Prompt string          `json:"prompt,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
}

func (s *Server) forkRun(w http.ResponseWriter, r *http.Request) {
	var b ForkBody
	if err := s.decodeJSON(w, r, &b, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.At == "" {
		s.fail(w, r, badInput(`fork needs "at": the tool call to fork at`))
		return
	}
	st, err := s.workspaceStore()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	newID, err := s.runsFor(r.Context()).Fork(r.Context(), st, runs.ForkRequest{Run: id, At: b.At, ID: b.ID, Prompt: b.Prompt, Args: b.Args})
	if err != nil {
		var uc *runs.UnknownCallError
		if errors.As(err, &uc) {
			err = &inputError{status: http.StatusNotFound, msg: err.Error()}
		}
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", runPath(newID))
	s.writeJSON(w, r, http.StatusCreated, map[string]string{"id": newID, "forked_from": id, "at": b.At})
}
