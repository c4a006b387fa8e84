package api

// Wire names. Nobody spells these twice: workflows, the worker, the starter and the tests
// all use the constants.
const (
	// QueryRun returns the run record (Record) of a run.
	QueryRun = "nexo.run"
	// SignalResume continues a run paused by Suspend. Payload: ResumeSignal.
	SignalResume = "nexo.resume"
	// SignalApproval decides a tool call waiting for a human. Payload: ApprovalSignal.
	SignalApproval = "nexo.approval"

	// SearchAttributeStatus is the keyword search attribute the workflow upserts on every
	// status transition, so `starter list --status` is a visibility query.
	SearchAttributeStatus = "NexoStatus"

	// DefaultTaskQueue is the task queue workers poll and starters target unless configured.
	DefaultTaskQueue = "nexo"
	// DefaultNamespace is the Temporal namespace used unless configured.
	DefaultNamespace = "default"
)

// Activity names. Workflows reference activities by these names only, never by importing
// their implementations.
const (
	ActivityWriteArtifact  = "WriteArtifact"
	ActivityStageFiles     = "StageFiles"
	ActivityReleaseSandbox = "ReleaseSandbox"
	ActivityParkSandbox    = "ParkSandbox"
	ActivityRestoreSandbox = "RestoreSandbox"
)

// Reserved state keys. A checkpoint may not use them; they are removed when a run is done.
const (
	StateSuspend  = "__suspend__"
	StateApproval = "__approval__"
)

// ReservedStateKeys lists every reserved key, for validation and for clearing on done.
var ReservedStateKeys = []string{StateSuspend, StateApproval}

// IsReservedStateKey reports whether name is a reserved state key.
func IsReservedStateKey(name string) bool {
	for _, k := range ReservedStateKeys {
		if k == name {
			return true
		}
	}
	return false
}
