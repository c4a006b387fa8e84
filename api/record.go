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
	CallID     string          `json:"call_id"`
	Capability string          `json:"capability"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	At         time.Time       `json:"at"`
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
