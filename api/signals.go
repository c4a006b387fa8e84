package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// UpdateDecide is the Update a human's decision on a pending tool call travels as. Unlike
// SignalApproval, a decision that does not fit (an unknown or already decided call, a run
// not waiting, arguments changed since the request) is refused by the run's validator
// before it lands: the caller gets the reason and nothing is written to history.
const UpdateDecide = "nexo.decide"

// The actions of a DecideRequest.
const (
	// DecideApprove runs the call, with Args instead of the model's arguments when set.
	DecideApprove = "approve"
	// DecideDeny refuses the call; the model gets Reason.
	DecideDeny = "deny"
	// DecideAnswer runs no tool: the model gets Result as the tool's result, marked as
	// written by a human.
	DecideAnswer = "answer"
)

// DecideRequest is the input of UpdateDecide.
type DecideRequest struct {
	// CallID names the pending tool call (state __approval__.call_id).
	CallID string `json:"call_id"`
	// Action is DecideApprove, DecideDeny or DecideAnswer.
	Action string `json:"action"`
	// ArgsSHA256 is the pending call's ApprovalInfo.ArgsSHA256: the decision is about
	// exactly the arguments the decider saw.
	ArgsSHA256 string `json:"args_sha256"`
	// Args, with DecideApprove only, are edited arguments (a JSON object) the call runs
	// with instead of the model's.
	Args json.RawMessage `json:"args,omitempty"`
	// Result, with DecideAnswer only, is the human-written result the model gets.
	Result string `json:"result,omitempty"`
	// Reason says why (the model sees it on a denial).
	Reason string `json:"reason,omitempty"`
	// Always remembers the decision for the rest of the run for the same tool; not with
	// edited arguments nor with an answer.
	Always bool `json:"always,omitempty"`
	// By names who decided (a user or token name, never a secret).
	By string `json:"by,omitempty"`
	// Budget, with DecideApprove of a budget pause (capability CapabilityBudget) only,
	// is what the reached bound is raised by; a budget pause is approved with nothing else.
	Budget *BudgetRaise `json:"budget,omitempty"`
}

// DecideResult is what UpdateDecide returns: the decision as the run recorded it.
type DecideResult struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Action string `json:"action"`
	// EditedArgs are the arguments the call runs with, when the decision edited them.
	EditedArgs json.RawMessage `json:"edited_args,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Always     bool            `json:"always,omitempty"`
	By         string          `json:"by,omitempty"`
	At         time.Time       `json:"at"`
	// Budget is the raise a budget pause was approved with.
	Budget *BudgetRaise `json:"budget,omitempty"`
}

// Problem says what is wrong with the request itself, whatever the run ("" when nothing
// is): a raise out of bounds, a reason or answer over MaxDecisionText, edited arguments
// over MaxDecisionArgs. Clients check it before sending and the run's validator again, so
// a raw update is refused the same way and nothing oversized reaches history.
func (r DecideRequest) Problem() string {
	switch {
	case len(r.Reason) > MaxDecisionText:
		return fmt.Sprintf("the reason is %d bytes, over the %d a decision may carry", len(r.Reason), MaxDecisionText)
	case len(r.Result) > MaxDecisionText:
		return fmt.Sprintf("the answer is %d bytes, over the %d a decision may carry", len(r.Result), MaxDecisionText)
	case len(r.Args) > MaxDecisionArgs:
		return fmt.Sprintf("the edited arguments are %d bytes, over the %d a decision may carry", len(r.Args), MaxDecisionArgs)
	case r.Budget != nil:
		return r.Budget.Problem()
	}
	return ""
}

// ArgsSHA256 is the hex SHA-256 of a pending call's arguments as its record shows them
// (ApprovalInfo.Args, compact JSON).
func ArgsSHA256(args json.RawMessage) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}
