package api

// Workspace snapshots (issue "durable workspaces"): after every tool call that can change
// a run's workspace, the worker that holds it stores an incremental, content-addressed
// snapshot. A snapshot is a Manifest stored as a blob (named by the sha256 of its JSON);
// each file's bytes are a blob of their own, so a file that did not change is never
// uploaded again. History holds only a SnapshotRef (a few dozen bytes), in the tool call's
// result; the run keeps its last one and restores it wherever the run moves.

// ManifestVersion is the Version of manifests this code writes.
const ManifestVersion = 1

// Manifest lists a workspace's entries, sorted by path. Paths are workspace-relative,
// "/"-separated and clean.
type Manifest struct {
	Version int             `json:"v"`
	Entries []ManifestEntry `json:"entries"`
}

// ManifestEntry is one directory, regular file or symbolic link of a workspace.
type ManifestEntry struct {
	Path string `json:"path"`
	// Type is "file", "dir" or "link".
	Type string `json:"type"`
	// Mode holds the permission bits.
	Mode uint32 `json:"mode"`
	// Size and SHA256 name a regular file's bytes (a blob of the store).
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Link is a symbolic link's target, as read.
	Link string `json:"link,omitempty"`
	// ModUnixNano is the file's modification time.
	ModUnixNano int64 `json:"mod,omitempty"`
}

// Manifest entry types.
const (
	EntryFile = "file"
	EntryDir  = "dir"
	EntryLink = "link"
)

// SnapshotRef names a stored workspace snapshot: what a tool call's result carries, and
// what a run keeps of its workspace.
type SnapshotRef struct {
	// Manifest is the sha256 name of the manifest blob.
	Manifest string `json:"manifest"`
	// Files and Bytes count the regular files and their bytes; Uploaded the bytes of file
	// contents this snapshot stored anew (what changed since the last one).
	Files    int   `json:"files"`
	Bytes    int64 `json:"bytes"`
	Uploaded int64 `json:"uploaded,omitempty"`
	// AtUnixNano is when the worker took it (its clock): of two snapshots of concurrent
	// calls of one run, the later is the run's.
	AtUnixNano int64 `json:"at"`
}

// RestoreManifestResult says what a restore from a manifest could not bring back: paths
// whose blob is missing or does not match its sha256 (Lost), and links the tier does not
// restore (Skipped). Both empty means the workspace is exactly as the snapshot recorded.
type RestoreManifestResult struct {
	Lost    []string `json:"lost,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
}

// WorkspaceFile is one file of a workspace as `sandbox files` and the API list it.
type WorkspaceFile struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Mode   string `json:"mode"`
	Link   string `json:"link,omitempty"`
}

// WorkspaceChange is one path that differs between two snapshots.
type WorkspaceChange struct {
	Path string `json:"path"`
	// Change is "added", "removed" or "modified".
	Change string `json:"change"`
	// Diff is a unified diff of a text file's change (empty for binary or large files).
	Diff string `json:"diff,omitempty"`
	// Binary marks a change of a file that is not shown as text.
	Binary bool `json:"binary,omitempty"`
}
