package api

// WriteArtifactRequest asks the WriteArtifact activity to store an artifact. Exactly one
// body source is used: Path (a file in the run's sandbox, copied verbatim) or Content.
type WriteArtifactRequest struct {
	RunID   string `json:"run_id"`
	Name    string `json:"name"`
	Content []byte `json:"content,omitempty"`
	Path    string `json:"path,omitempty"`
	// Blob names a blob of the store whose bytes become the artifact (an agent's long
	// answer, AgentResult.ContentRef), so the bytes never pass through history.
	Blob    string      `json:"blob,omitempty"`
	Sandbox SandboxSpec `json:"sandbox"`
}

// StagedFile is one file for StageFilesRequest.
type StagedFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
}

// StageFilesRequest asks the StageFiles activity to write files into the run's sandbox.
type StageFilesRequest struct {
	RunID   string       `json:"run_id"`
	Sandbox SandboxSpec  `json:"sandbox"`
	Files   []StagedFile `json:"files"`
	// Snapshot asks for a workspace snapshot after the files are written; Base is the
	// run's last one (see RunToolRequest).
	Snapshot bool   `json:"snapshot,omitempty"`
	Base     string `json:"base,omitempty"`
}

// StageFilesResult lists the paths written, as the sandbox sees them.
type StageFilesResult struct {
	Paths []string `json:"paths"`
	// Snapshot is the workspace after staging, when asked.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
}

// ReleaseSandboxRequest asks the ReleaseSandbox activity to remove a run's own sandbox.
type ReleaseSandboxRequest struct {
	RunID   string      `json:"run_id"`
	Sandbox SandboxSpec `json:"sandbox"`
	// Manifest, on a restore, names the snapshot to rebuild the workspace from (the run's
	// last); empty restores the archive of runs recorded before snapshots.
	Manifest string `json:"manifest,omitempty"`
}

// Activities of the example workflows.
const (
	ActivityFetchDocument   = "FetchDocument"
	ActivityPublishDocument = "PublishDocument"
	ActivityFetchMetric     = "FetchMetric"
)

// Document is what FetchDocument returns.
type Document struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

// Metric is what FetchMetric returns.
type Metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// MaxArtifactBytes bounds one artifact (and one staged file): the worker holds it whole in
// memory, and a workflow that renders more is failed with ErrTypeTooLarge before it sends
// the bytes anywhere.
const MaxArtifactBytes = 256 << 20

// MaxFailureMessage bounds the message a run fails with. A failure message is not a
// payload (External Storage never offloads it), so an unbounded one (an error quoting a
// huge input) would make the closing command too large for Temporal and the workflow
// task would fail forever.
const MaxFailureMessage = 8 << 10
