package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

// Problem is an RFC 9457 problem document, the body of every API error.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// RunID and RunStatus are set when the problem is about a run's state (409).
	RunID     string `json:"run_id,omitempty"`
	RunStatus string `json:"run_status,omitempty"`
	// Offered and Suggestion are set when no worker offers the workflow type a new run
	// asked for (400): what the workers offer, and the type the name most likely meant.
	Offered    []string `json:"offered,omitempty"`
	Suggestion string   `json:"suggestion,omitempty"`
}

// problem writes a problem document.
func problem(w http.ResponseWriter, r *http.Request, status int, detail string) {
	writeProblem(w, Problem{Status: status, Detail: detail, Instance: r.URL.Path})
}

func writeProblem(w http.ResponseWriter, p Problem) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = encodeJSON(w, p)
}

// statusOf maps an error of package runs (or of reading a body) onto an HTTP status.
func statusOf(err error) int {
	var (
		nf  *runs.NotFoundError
		st  *runs.StateError
		ex  *runs.ExistsError
		br  *runs.BadRequestError
		rf  *runs.RefusedError
		ut  *runs.UnknownTypeError
		nw  *runs.NoWorkerError
		mb  *http.MaxBytesError
		in  *inputError
		una *serviceerror.Unavailable
		uc  *runs.UnknownCallError
		bp  *runs.BadPathError
		cif *runs.CallChangesUnknownError
		np  *runs.NoPoolHostError
		snf *runs.ScheduleNotFoundError
		sex *runs.ScheduleExistsError
		sr  *runs.SessionRefusedError
	)
	switch {
	case errors.As(err, &nf), errors.Is(err, artifacts.ErrNotFound), errors.As(err, &uc), errors.As(err, &snf):
		return http.StatusNotFound
	case errors.As(err, &bp):
		return http.StatusBadRequest
	case errors.Is(err, runs.ErrNoSnapshots):
		return http.StatusConflict
	case errors.As(err, &st), errors.As(err, &ex), errors.As(err, &rf), errors.As(err, &cif), errors.As(err, &sex), errors.As(err, &sr):
		return http.StatusConflict
	case errors.As(err, &np):
		// The request is right; the fleet has no host of the pool up now (one may come).
		return http.StatusConflict
	case errors.As(err, &mb):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &in):
		return in.status
	case errors.As(err, &br), errors.As(err, &ut):
		// A type no worker offers is a mistake in the request like any other, not a
		// state of the server (the type is in the request, and the answer lists the
		// offered ones): 400, as the starter's exit 1 for it.
		return http.StatusBadRequest
	case errors.As(err, &nw) && runs.StoreCorrupt(nw.Err) != "":
		// A worker did answer: the run cannot be loaded (a blob it needs changed), and
		// trying again later, as a 503 says, changes nothing until the blob is restored.
		return http.StatusConflict
	case errors.As(err, &nw), errors.As(err, &una), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers an API request with the problem document for err.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	p := Problem{Status: statusOf(err), Detail: err.Error(), Instance: r.URL.Path}
	var st *runs.StateError
	if errors.As(err, &st) {
		p.RunID, p.RunStatus = st.ID, string(st.Status)
	}
	var nw *runs.NoWorkerError
	if errors.As(err, &nw) && p.Status == http.StatusConflict {
		p.RunID, p.RunStatus = nw.ID, string(api.StatusRunning) // open, and stuck on its store
	}
	var ex *runs.ExistsError
	if errors.As(err, &ex) {
		p.RunID, p.RunStatus = ex.ID, string(ex.Status)
	}
	var ut *runs.UnknownTypeError
	if errors.As(err, &ut) {
		p.Offered, p.Suggestion = ut.Offered, ut.Suggestion
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		p.Detail = fmt.Sprintf("request body is larger than %d bytes (gateway.max_body_bytes)", mb.Limit)
	}
	if p.Status >= 500 {
		s.logger.Error("gateway request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	writeProblem(w, p)
}

// inputError is a request the gateway itself rejects (before package runs sees it).
type inputError struct {
	status int
	msg    string
}

func (e *inputError) Error() string { return e.msg }

func badInput(format string, a ...any) error {
	return &inputError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// encodeJSON writes v exactly as `starter --json` prints it (two-space indent, no HTML
// escaping, a trailing newline), so GET /v1/runs/{id} is byte for byte `starter show --json`.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSON answers with v as JSON. Encoding first means an encoding error is still a
// clean 500.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	if err := encodeJSON(&buf, v); err != nil {
		s.fail(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// bodyReadTimeout bounds reading a request body (the server has no global ReadTimeout,
// which would end event streams).
const bodyReadTimeout = 30 * time.Second

// decodeJSON reads a JSON body into v: at most the body limit (413 beyond), a JSON media
// type when a type is given (415 otherwise, which also keeps HTML forms out), one value,
// no unknown fields. An empty body leaves v as it is when emptyOK.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &inputError{status: http.StatusUnsupportedMediaType,
				msg: fmt.Sprintf("content type %q is not JSON; send the body with Content-Type: application/json", ct)}
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return badInput("read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			return nil
		}
		return badInput("request body is empty; want a JSON object")
	}
	more, err := decodeStrict(body, v)
	if err != nil {
		return badInput("request body: %v", err)
	}
	if more {
		return badInput("request body holds more than one JSON value")
	}
	return nil
}
