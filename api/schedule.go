package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Schedules: Nexo's scheduled starts as Temporal Schedules. A schedule starts a normal run
// of a workflow type (one `starter list`, `show` and the run page know) at each time of its
// spec, on the platform's task queue; a start is skipped while the schedule's previous run
// is still open (overlap policy skip).
const (
	// ScheduleIDPrefix starts the Temporal schedule id of every Nexo schedule
	// (ScheduleID); the runs a schedule starts have workflow ids that start with it too
	// (Temporal appends the scheduled time), so ordinary runs may not take it.
	ScheduleIDPrefix = "nexo-schedule:"
	// MemoSchedule is the schedule's memo key holding its ScheduleMemo: the spec as the user
	// wrote it (the server keeps a cron only in its translated, calendar form).
	MemoSchedule = "nexo.schedule"
	// MaxScheduleNameLength bounds a schedule's name, so that its runs' ids (prefix, name
	// and a timestamp) stay within MaxRunIDLength.
	MaxScheduleNameLength = 100
	// MinScheduleEvery is the shortest interval a schedule takes (--every).
	MinScheduleEvery = time.Second
)

// ScheduleID is the Temporal schedule id of the schedule named name.
func ScheduleID(name string) string { return ScheduleIDPrefix + name }

// IsScheduleID reports whether id is in the schedules' space (a schedule or one of its runs).
func IsScheduleID(id string) bool { return strings.HasPrefix(id, ScheduleIDPrefix) }

// ValidateScheduleName is the rule for a schedule's name: 1 to MaxScheduleNameLength
// letters, digits, '-', '_' or '.', starting with a letter or a digit (it is a path
// segment of the API and part of its runs' ids).
func ValidateScheduleName(name string) error {
	want := fmt.Sprintf("want 1-%d letters, digits, '-', '_' or '.', starting with a letter or digit", MaxScheduleNameLength)
	if name == "" {
		return fmt.Errorf("schedule name is empty: %s", want)
	}
	if len(name) > MaxScheduleNameLength {
		return fmt.Errorf("schedule name %.40q... is %d bytes: %s", name, len(name), want)
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '-' && r != '_' && r != '.') {
			return fmt.Errorf("schedule name %q: %s", name, want)
		}
	}
	return nil
}

// ScheduleMemo is what a schedule's memo (MemoSchedule) holds.
type ScheduleMemo struct {
	// Every is the interval (a Go duration, "1h30m"), "" for a cron schedule.
	Every string `json:"every,omitempty"`
	// Cron is the cron spec as given, "" for an interval schedule.
	Cron string `json:"cron,omitempty"`
}

// Spec is the memo's spec as a person reads it: "every 1h0m0s" or "cron 0 2 * * *".
func (m ScheduleMemo) Spec() string {
	if m.Cron != "" {
		return "cron " + m.Cron
	}
	if m.Every != "" {
		return "every " + m.Every
	}
	return ""
}

// Schedule is one schedule, as `starter schedule list --json` and GET /v1/schedules show it.
type Schedule struct {
	Name     string          `json:"name"`
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input,omitempty"`
	// Spec is when it starts a run: "every 1h0m0s" or "cron 0 2 * * *".
	Spec   string `json:"spec"`
	Paused bool   `json:"paused"`
	// Note is the reason given with the last pause or unpause.
	Note string `json:"note,omitempty"`
	// NextRun is when it starts the next run; nil while paused.
	NextRun *time.Time `json:"next_run,omitempty"`
	// LastRun is the run it started last, nil before its first.
	LastRun *ScheduleRun `json:"last_run,omitempty"`
	// Runs is how many runs it has started; Skipped how many starts it skipped because
	// its previous run was still open.
	Runs      int       `json:"runs"`
	Skipped   int       `json:"skipped"`
	CreatedAt time.Time `json:"created_at"`
}

// ScheduleRun is a run a schedule started.
type ScheduleRun struct {
	ID     string    `json:"id"`
	Status Status    `json:"status"`
	At     time.Time `json:"at"`
}
