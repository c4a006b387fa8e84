// Package artifacts is the store of large bytes: run artifacts, archived stream segments,
// parked workspaces, skill files and content-addressed blobs (threads, large tool outputs,
// offloaded payloads). The run record and Temporal's history keep only names, sizes and
// sha256s, so large outputs never reach history. One store, named by artifacts.url, is
// shared by every worker, the starter and the gateway: what one process writes, any other
// reads. It is a gocloud.dev/blob bucket (a directory, memory, S3, GCS or Azure Blob).
// Nothing in it expires by itself: Collect (gc.go, starter store gc) removes what no run
// and no stored record references any more.
package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/nexo-temporal/nexo/api"
)

var (
	// ErrNotFound: no such artifact in the store.
	ErrNotFound = errors.New("artifact not found")
	// ErrChecksum: the bytes do not match the sha256 the run recorded.
	ErrChecksum = errors.New("artifact does not match its recorded sha256 (store changed or corrupt)")
)

// Store keeps artifact bytes by run and name, and content-addressed blobs (threads, large
// tool outputs, offloaded payloads). Put replaces; implementations are safe for
// concurrent use. The process that opens a Store closes it.
type Store interface {
	// Put stores data as artifact name of run runID, replacing any earlier bytes; a reader
	// sees the old bytes or the new, never half.
	Put(ctx context.Context, runID, name string, data []byte) error
	// Get returns the artifact; a missing one is ErrNotFound.
	Get(ctx context.Context, runID, name string) ([]byte, error)
	// PutFrom stores what r yields as artifact name of run runID, like Put but without
	// holding it all in memory (a parked workspace can be gigabytes), and returns the
	// bytes written. If r fails, the earlier bytes, if any, stay.
	PutFrom(ctx context.Context, runID, name string, r io.Reader) (int64, error)
	// GetReader opens the artifact for reading; a missing one is ErrNotFound. The caller
	// closes it.
	GetReader(ctx context.Context, runID, name string) (io.ReadCloser, error)
	// Location describes where an artifact lives, for messages.
	Location(runID, name string) string
	Blobs
	// Close releases the store's connections; the store is unusable after.
	Close() error
}

// Blobs is a content-addressed store: a blob is named by the lowercase hex sha256 of its
// bytes, written once and never changed, so any process that knows the name can read it
// and a second write of the same bytes is a no-op.
type Blobs interface {
	// PutBlob stores data and returns its name (hex sha256).
	PutBlob(ctx context.Context, data []byte) (string, error)
	// GetBlob returns the blob named sum, checked against the name (ErrChecksum); a
	// missing one is ErrNotFound.
	GetBlob(ctx context.Context, sum string) ([]byte, error)
}

// Sum is the name of data in a Blobs store.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// ValidSum reports whether s can name a blob (64 lowercase hex digits).
func ValidSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Getter is the part of a Store that Read needs.
type Getter interface {
	Get(ctx context.Context, runID, name string) ([]byte, error)
}

// Read returns an artifact's bytes as a client sees them: the record's inline content when
// it has it (base64-decoded when Encoding says so), else the store's copy, and in both
// cases checked against the recorded sha256 (ErrChecksum). st may be nil when every
// artifact read is inline; a missing one is then ErrNotFound.
func Read(ctx context.Context, st Getter, runID string, a api.Artifact) ([]byte, error) {
	var body []byte
	switch {
	case a.Content != nil && a.Encoding == api.EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(*a.Content)
		if err != nil {
			return nil, fmt.Errorf("decode artifact %s of run %s: %w", a.Name, runID, err)
		}
		body = b
	case a.Content != nil:
		body = []byte(*a.Content)
	case st == nil:
		return nil, fmt.Errorf("read artifact %s of run %s: not inline and no store: %w", a.Name, runID, ErrNotFound)
	default:
		b, err := st.Get(ctx, runID, a.Name)
		if err != nil {
			return nil, err
		}
		body = b
	}
	sum := sha256.Sum256(body)
	if a.SHA256 != "" && hex.EncodeToString(sum[:]) != a.SHA256 {
		return nil, fmt.Errorf("artifact %s of run %s: %w", a.Name, runID, ErrChecksum)
	}
	return body, nil
}
