package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// Schedules is the part of *runs.Client the schedule routes use, to ease testing. A Runs
// that also implements it (as *runs.Client does) serves /v1/schedules and the schedules
// page; one that does not answers them 501.
type Schedules interface {
	ListSchedules(ctx context.Context) ([]api.Schedule, error)
	Schedule(ctx context.Context, name string) (api.Schedule, error)
	CreateSchedule(ctx context.Context, req runs.ScheduleRequest) (api.Schedule, error)
	PauseSchedule(ctx context.Context, name, note string) error
	UnpauseSchedule(ctx context.Context, name, note string) error
	DeleteSchedule(ctx context.Context, name string) error
}

var _ Schedules = (*runs.Client)(nil)

// ScheduleList is the answer to GET /v1/schedules.
type ScheduleList struct {
	Schedules []api.Schedule `json:"schedules"`
}

// ScheduleBody is the body of POST /v1/schedules: exactly one of every and cron.
type ScheduleBody struct {
	Name     string          `json:"name"`
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input,omitempty"`
	// Every is a Go duration ("1h", "30s"), at least 1s.
	Every string `json:"every,omitempty"`
	// Cron is a five-field cron spec in UTC ("0 2 * * *").
	Cron string `json:"cron,omitempty"`
}

// NoteBody is the optional body of POST /v1/schedules/{name}/pause and /unpause.
type NoteBody struct {
	Note string `json:"note,omitempty"`
}

// maxNoteLength bounds a pause note.
const maxNoteLength = 500

func (s *Server) schedulesOr501(w http.ResponseWriter, r *http.Request) (Schedules, bool) {
	sc, ok := s.runs.(Schedules)
	if !ok {
		problem(w, r, http.StatusNotImplemented, "this gateway's client has no schedules")
	}
	return sc, ok
}

// admitSchedule reports whether the request's token may see a schedule: an unlimited one
// sees all; a limited one those whose runs its limits admit (their workflow type, and the
// agent an AgentRun's input names), as it sees runs.
func admitSchedule(ctx context.Context, sch api.Schedule) bool {
	p := principalFrom(ctx)
	if p == nil || p.limits.Unlimited() {
		return true
	}
	return p.limits.admits(sch.Workflow, runAgent("", sch.Workflow, sch.Input))
}

// visibleSchedules lists what the token may see.
func visibleSchedules(ctx context.Context, sc Schedules) ([]api.Schedule, error) {
	list, err := sc.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Schedule, 0, len(list))
	for _, sch := range list {
		if admitSchedule(ctx, sch) {
			out = append(out, sch)
		}
	}
	return out, nil
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedulesOr501(w, r)
	if !ok {
		return
	}
	list, err := visibleSchedules(r.Context(), sc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ScheduleList{Schedules: list})
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedulesOr501(w, r)
	if !ok {
		return
	}
	var b ScheduleBody
	if err := s.decodeJSON(w, r, &b, false); err != nil {
		s.fail(w, r, err)
		return
	}
	req := runs.ScheduleRequest{Name: b.Name, Workflow: b.Workflow, Payload: b.Input, Cron: b.Cron}
	if b.Every != "" {
		d, err := time.ParseDuration(b.Every)
		if err != nil {
			s.fail(w, r, badInput("every %q: want a duration such as \"30s\" or \"1h\"", b.Every))
			return
		}
		req.Every = d
	}
	if p := principalFrom(r.Context()); p != nil && !admitSchedule(r.Context(), api.Schedule{Workflow: b.Workflow, Input: b.Input}) {
		agent := runAgent("", b.Workflow, b.Input)
		s.fail(w, r, (&limitedRuns{lim: p.limits, token: p.name}).forbidden(b.Workflow, agent))
		return
	}
	sch, err := sc.CreateSchedule(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/schedules/"+url.PathEscape(sch.Name))
	s.writeJSON(w, r, http.StatusCreated, sch)
}

// visibleSchedule is the named schedule if the token may see it; one it may not is the
// ScheduleNotFoundError an unknown name gets, so a limited token learns nothing of it.
func visibleSchedule(ctx context.Context, sc Schedules, name string) (api.Schedule, error) {
	sch, err := sc.Schedule(ctx, name)
	if err != nil {
		return api.Schedule{}, err
	}
	if !admitSchedule(ctx, sch) {
		return api.Schedule{}, &runs.ScheduleNotFoundError{Name: name}
	}
	return sch, nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedulesOr501(w, r)
	if !ok {
		return
	}
	sch, err := visibleSchedule(r.Context(), sc, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sch)
}

// changeSchedule answers pause, unpause and delete: the schedule as it is after the
// change (delete: 204, no body).
func (s *Server) changeSchedule(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc, ok := s.schedulesOr501(w, r)
		if !ok {
			return
		}
		name := r.PathValue("name")
		var b NoteBody
		if op != "delete" {
			if err := s.decodeJSON(w, r, &b, true); err != nil {
				s.fail(w, r, err)
				return
			}
			if len(b.Note) > maxNoteLength {
				s.fail(w, r, badInput("note is %d bytes; at most %d", len(b.Note), maxNoteLength))
				return
			}
		}
		if _, err := visibleSchedule(r.Context(), sc, name); err != nil {
			s.fail(w, r, err)
			return
		}
		var err error
		switch op {
		case "pause":
			err = sc.PauseSchedule(r.Context(), name, b.Note)
		case "unpause":
			err = sc.UnpauseSchedule(r.Context(), name, b.Note)
		default:
			err = sc.DeleteSchedule(r.Context(), name)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if op == "delete" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		sch, err := sc.Schedule(r.Context(), name)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%s schedule %s: done, but reading it back: %w", op, name, err))
			return
		}
		s.writeJSON(w, r, http.StatusOK, sch)
	}
}

// schedulesView is the schedules page's data.
type schedulesView struct {
	Schedules []api.Schedule
	Error     string
}

// schedulesPage lists the schedules the token may see, read-only (the API and the starter
// change them).
func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request) {
	var v schedulesView
	status := http.StatusOK
	sc, ok := s.runs.(Schedules)
	var err error
	if !ok {
		err = fmt.Errorf("this gateway's client has no schedules")
	} else {
		v.Schedules, err = visibleSchedules(r.Context(), sc)
	}
	if err != nil {
		v.Error, status = err.Error(), statusOf(err)
	}
	s.render(w, r, status, "schedules", "Schedules", v)
}
