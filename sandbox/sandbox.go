// Package sandbox is where an agent's and a run's file and shell operations happen: the
// Sandbox interface, the path guard every tier relies on, and the in-memory (Virtual) and
// host-directory (Local) tiers. The Docker tier lives in sandbox/docker, the sealed process
// tier (a Local whose commands run under bubblewrap) in sandbox/bwrap.
//
// Ownership: a run owns its sandbox and closes it when the run ends; agents borrow it.
package sandbox

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors shared by every tier. Tiers wrap them with the operation and path, so
// callers test with errors.Is.
var (
	// ErrEscape: a path leads outside the sandbox's workspace (.., absolute, or symlink).
	ErrEscape = errors.New("path escapes the sandbox")
	// ErrNotFound: the file does not exist.
	ErrNotFound = errors.New("file not found")
	// ErrNoShell: this tier cannot run commands.
	ErrNoShell = errors.New("sandbox has no shell")
	// ErrNotRegular: the path names a FIFO, socket or device; file tools only read and
	// write regular files (opening a FIFO would block).
	ErrNotRegular = errors.New("not a regular file")
	// ErrHardLink: a regular file in a user's own directory has more than one name (a hard
	// link); its other names may lie outside the workspace, where the path guard cannot see
	// them, so the file tools and snapshots refuse it (see LocalOptions.RefuseHardLinks).
	ErrHardLink = errors.New("file has more than one hard link")
	// ErrClosed: the sandbox was closed.
	ErrClosed = errors.New("sandbox is closed")
	// ErrListingUnsupported: a Lister cannot list this workspace unambiguously (see the
	// Docker tier's listing); the caller reads the whole workspace archive instead.
	ErrListingUnsupported = errors.New("workspace cannot be listed file by file")
)

// ShellResult is the outcome of one command. A non-zero ExitCode is a result, not an error.
type ShellResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	// TimedOut is set when the command was killed for exceeding its timeout.
	TimedOut bool `json:"timed_out,omitempty"`
}

// ExecOptions are the options of one Exec.
type ExecOptions struct {
	// Stdin is the process's standard input (nil: none).
	Stdin []byte
	// Timeout kills the process (and all it started) after this long; <= 0 means
	// DefaultShellTimeout.
	Timeout time.Duration
	// MaxStdout caps stdout, kept from its start: a process that prints more is killed
	// and the result has StdoutOverflow set. <= 0 means the tier's output cap.
	MaxStdout int
	// ReadOnly are host files the process needs to read (its own binary): a sealed tier
	// binds each read-only at the same path; an unsealed tier sees them anyway.
	ReadOnly []string
	// ReadOnlyWorkspace makes the workspace read-only to the process on a sealed tier
	// (bubblewrap): it reads the files but changes none (a harness acts only through
	// the tool uses it asks for). An unsealed tier (local) cannot enforce it.
	ReadOnlyWorkspace bool
	// OnStdout, when set, is called with each chunk of stdout as it arrives, from one
	// goroutine (live output; the result still has all of it).
	OnStdout func([]byte)
}

// ExecResult is the outcome of one Exec. A non-zero ExitCode is a result, not an error.
type ExecResult struct {
	ShellResult
	// StdoutOverflow is set when the process printed more than ExecOptions.MaxStdout on
	// stdout and was killed for it.
	StdoutOverflow bool `json:"stdout_overflow,omitempty"`
}

// Execer is a sandbox that runs a program with an argv and a standard input, not only
// a shell command: what a pluggable loop's harness needs (the local and bubblewrap
// tiers). It keeps Shell's guarantees: cleared environment, process group killed at the
// end, output caps.
type Execer interface {
	Exec(ctx context.Context, argv []string, opts ExecOptions) (ExecResult, error)
}

// FileInfo is what Stat reports, enough for a read-before-write guard.
type FileInfo struct {
	Size    int64
	ModTime time.Time
}

// Sandbox is a workspace an agent or a run acts in. Paths are relative to the workspace
// (an absolute path must lie inside it). Implementations are safe for concurrent use.
type Sandbox interface {
	// Read returns the file's bytes.
	Read(ctx context.Context, path string) ([]byte, error)
	// Write creates or replaces the file, creating parent directories, and returns its
	// path as the sandbox sees it.
	Write(ctx context.Context, path string, data []byte) (string, error)
	// Stat reports size and modification time.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Glob returns the workspace-relative paths matching pattern ("**" crosses
	// directories), sorted, never following a symlink out of the workspace.
	Glob(ctx context.Context, pattern string) ([]string, error)
	// Shell runs cmd with sh -c in the workspace; the process is killed after timeout.
	Shell(ctx context.Context, cmd string, timeout time.Duration) (ShellResult, error)
	// Instructions tells the model what this sandbox is (appended to the system prompt).
	Instructions() string
	// Close releases the sandbox. Closing twice is not an error.
	Close(ctx context.Context) error
}
