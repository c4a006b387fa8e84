package api

import (
	"encoding/json"
	"time"
)

// Record is the run record of the compatibility layer: Nexo's view of one run. The
// workflow builds it deterministically and serves it through QueryRun; `starter show
// --json` prints exactly this shape.
type Record struct {
	ID        string                     `json:"id"`
	Workflow  string                     `json:"workflow"`
	Status    Status                     `json:"status"`
	Payload   json.RawMessage            `json:"payload"`
	Result    json.RawMessage            `json:"result"`
	Error     *string                    `json:"error"`
	State     map[string]json.RawMessage `json:"state"`
	Events    []Event                    `json:"events"`
	Artifacts []Artifact                 `json:"artifacts"`
	CreatedAt time.Time                  `json:"created_at"`
	UpdatedAt time.Time                  `json:"updated_at"`
	// Usage sums the run's model calls (tokens and cost, by agent and model); nil for a
	// run that made none. The runtime keeps it current; see RunUsage.
	Usage *RunUsage `json:"usage,omitempty"`
	// Warning, set by clients and never by the workflow, says the record is incomplete
	// and why: a closed run that stored no record (closed before records were stored, or
	// terminated) and that no worker could replay is rebuilt from history, which holds no
	// state, events or artifacts.
	Warning string `json:"warning,omitempty"`
	// Retrying, set by clients and never by the workflow, lists the run's activities whose
	// last attempt failed and that Temporal is retrying (a model call whose endpoint is
	// down), read with the record; empty for a closed run and for one whose activities
	// run without failures.
	Retrying []PendingActivity `json:"retrying,omitempty"`
}

// Event is one entry of a run's ordered event log. Seq starts at 1 and has no gaps.
type Event struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	At   time.Time       `json:"at"`
}

// Artifact is the metadata of one artifact. The bytes live in the artifact store; Content
// carries them inline when they are small (text as is, other bytes base64 with Encoding
// "base64").
type Artifact struct {
	Name     string    `json:"name"`
	At       time.Time `json:"at"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
	Encoding string    `json:"encoding,omitempty"`
	Content  *string   `json:"content,omitempty"`
}

// EncodingBase64 marks artifact content that is not valid UTF-8 and so is carried base64.
const EncodingBase64 = "base64"

// SuspendInfo is stored under the reserved state key StateSuspend while a run waits.
type SuspendInfo struct {
	Reason    string     `json:"reason"`
	ResumeKey string     `json:"resume_key"`
	At        time.Time  `json:"at"`
	ResumeAt  *time.Time `json:"resume_at,omitempty"`
}

// ApprovalInfo is stored under the reserved state key StateApproval while a tool call
// waits for a human decision.
type ApprovalInfo struct {
	CallID     string `json:"call_id"`
	Capability string `json:"capability"`
	Tool       string `json:"tool"`
	// Detail is what the call acts on, as the permission gate describes it (the path, the
	// command, the URL); empty for a call with none and in runs recorded before the field,
	// whose detail only their suspend reason ("approval: <tool> <detail>") holds.
	Detail string          `json:"detail,omitempty"`
	Args   json.RawMessage `json:"args"`
	// ArgsSHA256 is the hex SHA-256 of Args; a decision (UpdateDecide) carries it back.
	ArgsSHA256 string    `json:"args_sha256,omitempty"`
	At         time.Time `json:"at"`
	// ExpiresAt is when the call's approval_timeout passes; nil when it has none (or it
	// escalated and waits with no further deadline). OnTimeout says what happens then
	// (deny, approve, escalate); Escalated says the deadline passed and was escalated.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	OnTimeout string     `json:"on_timeout,omitempty"`
	Escalated bool       `json:"escalated,omitempty"`
}

// Suspend decodes the run's suspension, if any.
func (r Record) Suspend() (SuspendInfo, bool) {
	var s SuspendInfo
	raw, ok := r.State[StateSuspend]
	if !ok || json.Unmarshal(raw, &s) != nil {
		return s, false
	}
	return s, true
}

// Approval decodes the tool call waiting for a decision, if any.
func (r Record) Approval() (ApprovalInfo, bool) {
	var a ApprovalInfo
	raw, ok := r.State[StateApproval]
	if !ok || json.Unmarshal(raw, &a) != nil {
		return a, false
	}
	return a, true
}

// FindArtifact returns the artifact called name.
func (r Record) FindArtifact(name string) (Artifact, bool) {
	for _, a := range r.Artifacts {
		if a.Name == name {
			return a, true
		}
	}
	return Artifact{}, false
}

// RecordRef names the final record of a closed run in the blob store: the blob is the
// record's JSON, named by its sha256. A run holds it in its memo under MemoRecord.
type RecordRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// EventPage is the answer of QueryEvents: the events with seq after the query's after,
// oldest first, at most limit of them, and the run's status and what it waits for.
type EventPage struct {
	ID     string  `json:"id"`
	Status Status  `json:"status"`
	Events []Event `json:"events"`
	// LastSeq is the seq of the run's last event (0: none yet). More says events after
	// the page's last remain (the page was cut at its limit or byte bound).
	LastSeq int64 `json:"last_seq"`
	More    bool  `json:"more"`
	// FirstSeq is the first seq this execution holds: a session that continued as new
	// keeps its earlier events in archived stream segments (its artifacts), not here.
	FirstSeq int64 `json:"first_seq"`
	// Waiting holds the reserved state keys (StateSuspend, StateApproval) the run has now.
	Waiting map[string]json.RawMessage `json:"waiting,omitempty"`
	// Checkpoints names the other state keys, sorted, and Artifacts names the artifacts
	// with their sha256 (no content): a follower whose copy differs reads the record.
	Checkpoints []string      `json:"checkpoints"`
	Artifacts   []ArtifactSum `json:"artifacts"`
	Error       *string       `json:"error"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// ArtifactSum is an artifact's name and sha256, in an EventPage.
type ArtifactSum struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Limits of QueryEvents: limit defaults to DefaultEventPage and is capped at
// MaxEventPage, and a page stops before its events pass MaxEventPageBytes of JSON (a
// query result is a payload, bounded by Temporal at 2 MB).
const (
	DefaultEventPage  = 200
	MaxEventPage      = 1000
	MaxEventPageBytes = 1 << 20
)
