package api

import (
	"encoding/json"
	"time"
)

// ResumeSignal is the payload of SignalResume.
type ResumeSignal struct {
	// Input is handed to the workflow as the return value of Suspend.
	Input map[string]any `json:"input"`
	// ResumeKey must match the key the run suspended with, when it set one.
	ResumeKey string `json:"resume_key,omitempty"`
	// At, when in the future, schedules the resume with a durable timer.
	At *time.Time `json:"at,omitempty"`
}

// ApprovalSignal is the payload of SignalApproval.
type ApprovalSignal struct {
	CallID   string          `json:"call_id"`
	Approved bool            `json:"approved"`
	Reason   string          `json:"reason,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	// Always remembers an approval for the rest of the run for the same tool.
	Always bool `json:"always,omitempty"`
	// By names who decided (a user or token name, never a secret).
	By string `json:"by,omitempty"`
}

// RunOptions is the optional second argument of every Nexo workflow.
type RunOptions struct {
	// Seed pre-fills checkpoint state, so a re-run pays only for missing checkpoints.
	Seed map[string]json.RawMessage `json:"seed,omitempty"`
	// RerunOf names the run this one re-runs.
	RerunOf string `json:"rerun_of,omitempty"`
}
