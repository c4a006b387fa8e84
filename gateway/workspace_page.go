package gateway

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

// The run page's workspace views: the files a tool call found, one file's bytes, and what
// a call changed. Server-rendered from the record and the blob store (runs.ReadWorkspace,
// runs.CallWorkspaces), so they work with no worker and for finished runs. File names and
// contents are whatever a model or a command wrote: html/template escapes them, a file's
// text is shown only as a bounded preview, and its raw bytes are served by the sandboxed
// JSON route (/v1/runs/{id}/files/{path}), never inline as markup.

// maxPreview bounds the text a file page or a diff shows; the raw bytes are a link away.
const maxPreview = 64 << 10

// workspaceFilesPath is the page listing run's workspace as call at found it ("" for now).
func workspaceFilesPath(run, at string) string {
	return withAt("/runs/"+url.PathEscape(run)+"/files", at)
}

// workspaceFilePath is the page of one file; raw is its bytes on the JSON API.
func workspaceFilePath(run, p, at string, raw bool) string {
	base := "/runs/"
	if raw {
		base = "/v1/runs/"
	}
	return withAt(base+url.PathEscape(run)+"/files/"+escapeSegments(p), at)
}

func callChangesPath(run, call string) string {
	return "/runs/" + url.PathEscape(run) + "/changes?call=" + url.QueryEscape(call)
}

func withAt(p, at string) string {
	if at == "" {
		return p
	}
	return p + "?at=" + url.QueryEscape(at)
}

// escapeSegments escapes each segment of a slash-separated path, keeping the slashes, so
// a file "a/<b>?.txt" links as a/%3Cb%3E%3F.txt and the {path...} route reads it back.
func escapeSegments(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// fileRow is one entry of the files page.
type fileRow struct {
	api.WorkspaceFile
	// Page is the file's page ("" for a directory or a link, which have no bytes to show).
	Page string
}

// filesView is the body of the files page.
type filesView struct {
	RunID, At string
	Ref       string
	Files     []fileRow
	Total     int64
	RunPage   string
}

func (s *Server) workspaceFilesPage(w http.ResponseWriter, r *http.Request) {
	at := r.URL.Query().Get("at")
	ws, _, err := s.workspaceAt(r, at)
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	v := filesView{RunID: ws.RunID, At: at, Ref: ws.Ref, RunPage: runPagePath(ws.RunID)}
	for _, f := range ws.Files() {
		row := fileRow{WorkspaceFile: f}
		if f.Type == api.EntryFile {
			row.Page = workspaceFilePath(ws.RunID, f.Path, at, false)
			v.Total += f.Size
		}
		v.Files = append(v.Files, row)
	}
	s.render(w, r, http.StatusOK, "files", "Files of "+shorten(ws.RunID, 13), v)
}

// fileView is the body of a file's page.
type fileView struct {
	RunID, At, Path string
	Size            int64
	SHA256          string
	// Text is the preview: the first maxPreview bytes of a text file (cut at a character).
	Text      string
	Truncated bool
	// Binary is set for a file that is not UTF-8 text (or holds NUL bytes): not shown.
	Binary         bool
	Raw, FilesPage string
	RunPage        string
}

func (s *Server) workspaceFilePage(w http.ResponseWriter, r *http.Request) {
	at, p := r.URL.Query().Get("at"), r.PathValue("path")
	ws, st, err := s.workspaceAt(r, at)
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	body, err := ws.ReadFile(r.Context(), st, p)
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	v := fileView{RunID: ws.RunID, At: at, Path: p, Size: int64(len(body)), SHA256: artifacts.Sum(body),
		Raw: workspaceFilePath(ws.RunID, p, at, true), FilesPage: workspaceFilesPath(ws.RunID, at), RunPage: runPagePath(ws.RunID)}
	v.Text, v.Truncated, v.Binary = preview(body)
	s.render(w, r, http.StatusOK, "file", p+" · "+shorten(ws.RunID, 13), v)
}

// preview is what a page shows of b: its first maxPreview bytes when it is text (cut at a
// character boundary), or binary.
func preview(b []byte) (text string, truncated, binary bool) {
	head := b
	if len(head) > maxPreview {
		head, truncated = head[:maxPreview], true
		// Drop a character the cut split (at most 3 bytes of it).
		for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
			head = head[:len(head)-1]
		}
	}
	if !utf8.Valid(head) || bytes.IndexByte(head, 0) >= 0 {
		return "", false, true
	}
	return string(head), truncated, false
}

// changeRow is one path a call changed.
type changeRow struct {
	api.WorkspaceChange
	// Truncated: the diff is longer than the page shows.
	Truncated bool
	// Before links the file's page as the call found it ("" for a file the call added).
	Before string
}

// changesView is the body of a call's changes page.
type changesView struct {
	RunID, Call, Tool string
	Changes           []changeRow
	FilesBefore       string
	RunPage           string
}

// callChangesPage shows what the tool call ?call= changed in the workspace: the diff from
// the workspace as it found it to the one it left.
func (s *Server) callChangesPage(w http.ResponseWriter, r *http.Request) {
	call := r.URL.Query().Get("call")
	if call == "" {
		s.pageError(w, r, http.StatusBadRequest, "the changes page needs ?call=CALL: the tool call whose changes to show (the call ids are on the run's page)")
		return
	}
	st, err := s.workspaceStore()
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	rec, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	before, after, err := runs.CallWorkspaces(r.Context(), st, rec, call)
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	changes, err := runs.Diff(r.Context(), st, before, after)
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	v := changesView{RunID: rec.ID, Call: call, FilesBefore: workspaceFilesPath(rec.ID, call), RunPage: runPagePath(rec.ID)}
	for _, c := range runs.ToolCalls(rec.Events) {
		if c.ID == call {
			v.Tool = c.Name
		}
	}
	for _, c := range changes {
		row := changeRow{WorkspaceChange: c}
		if len(row.Diff) > maxPreview {
			row.Diff, _, _ = preview([]byte(row.Diff))
			row.Truncated = true
		}
		if c.Change != "added" {
			row.Before = workspaceFilePath(rec.ID, c.Path, call, false)
		}
		v.Changes = append(v.Changes, row)
	}
	s.render(w, r, http.StatusOK, "changes", "Changes of call "+call, v)
}

// runPagePath is a run's page (runPath is its JSON).
func runPagePath(id string) string { return "/runs/" + url.PathEscape(id) }
