package api

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Wire names. Nobody spells these twice: workflows, the worker, the starter and the tests
// all use the constants.
const (
	// QueryRun returns the run record (Record) of a run.
	QueryRun = "nexo.run"
	// QueryEvents returns the events of a run after a seq, a page at a time, with its
	// status and what it waits for (EventPage). Arguments: after (int64), limit (int).
	// Followers use it instead of QueryRun, so each change costs what changed.
	QueryEvents = "nexo.events"
	// MemoRecord is the memo key under which a run that closed holds the reference
	// (RecordRef) of its final record, stored in the blob store, so clients read it with
	// no worker.
	MemoRecord = "nexo.record"
	// SignalResume continues a run paused by Suspend. Payload: ResumeSignal.
	SignalResume = "nexo.resume"
	// SignalApproval decides a tool call waiting for a human. Payload: ApprovalSignal.
	SignalApproval = "nexo.approval"

	// SearchAttributeStatus is the keyword search attribute the workflow upserts on every
	// status transition, so `starter list --status` is a visibility query.
	SearchAttributeStatus = "NexoStatus"
	// SearchAttributeApprovalAgent is the keyword search attribute naming the agent whose
	// tool call waits for a human decision; the workflow sets it when a call starts
	// waiting and removes it when the call is decided, so `starter approvals` (the inbox
	// across runs and sessions) is one visibility query.
	SearchAttributeApprovalAgent = "NexoApprovalAgent"
	// SearchAttributeAgent is the keyword search attribute naming the agent a run runs
	// (an AgentRun's input.agent, a session's agent), set when the run is started, so the
	// Runs page finds an agent's runs with one visibility query.
	SearchAttributeAgent = "NexoAgent"
	// MemoPrompt is the memo key holding the start of an AgentRun's prompt (at most
	// MemoPromptRunes runes), set when the run is started, so a list of runs can show
	// what each was asked without reading each run's input.
	MemoPrompt = "nexo.prompt"

	// DefaultTaskQueue is the task queue workers poll and starters target unless configured.
	DefaultTaskQueue = "nexo"
	// DefaultNamespace is the Temporal namespace used unless configured.
	DefaultNamespace = "default"
)

// SearchAttributes are the keyword search attributes every namespace Nexo runs in needs:
// the dev server registers them, the worker checks them at start.
var SearchAttributes = []string{SearchAttributeStatus, SearchAttributeApprovalAgent, SearchAttributeAgent}

// MemoPromptRunes bounds the prompt a run's memo holds (MemoPrompt): a list shows its
// start, the run's input holds it whole.
const MemoPromptRunes = 200

// PromptHead is the start of a prompt a run's memo keeps (MemoPrompt): at most
// MemoPromptRunes runes of it, trimmed, with "…" when it was cut.
func PromptHead(p string) string {
	r := []rune(strings.TrimSpace(p))
	if len(r) > MemoPromptRunes {
		return string(r[:MemoPromptRunes]) + "…"
	}
	return string(r)
}

// Activity names. Workflows reference activities by these names only, never by importing
// their implementations.
const (
	ActivityWriteArtifact  = "WriteArtifact"
	ActivityStageFiles     = "StageFiles"
	ActivityReleaseSandbox = "ReleaseSandbox"
	ActivityParkSandbox    = "ParkSandbox"
	ActivityRestoreSandbox = "RestoreSandbox"
	// ActivityStoreRecord stores a closing run's final record in the blob store.
	ActivityStoreRecord = "StoreRecord"
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

// PreviewHead is the start of a stored content: at most PreviewBytes of it, cut on a
// UTF-8 boundary.
func PreviewHead(content string) string {
	p := content
	if len(p) > PreviewBytes {
		p = p[:PreviewBytes]
		for len(p) > 0 && !utf8.ValidString(p) {
			p = p[:len(p)-1]
		}
	}
	return p
}

// OutputPreview is what a thread and the events keep of a tool output stored by reference
// (ContentRef): its PreviewHead and a note of the whole size. The worker words every
// stored tool output so, and the workflow a delegate's typed output it stores by reference.
func OutputPreview(content string, size int) string {
	return strings.TrimRight(PreviewHead(content), "\n") + fmt.Sprintf("\n[… %d bytes in all; the model received the whole output]", size)
}
