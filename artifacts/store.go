// Package artifacts is the artifact store: where the bytes of run artifacts (and archived
// workspaces) live. The run record keeps only metadata, plus small contents inline, so
// large outputs never reach Temporal's history. The default store is a directory; the
// interface is what an object store implements.
package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

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
// concurrent use.
type Store interface {
	Put(ctx context.Context, runID, name string, data []byte) error
	Get(ctx context.Context, runID, name string) ([]byte, error)
	// Location describes where an artifact lives, for messages.
	Location(runID, name string) string
	Blobs
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

// Open returns the store at rawURL: a file:// URL or a plain directory path. A relative
// path is resolved against the working directory now, so the store does not move if the
// process later changes directory.
func Open(rawURL string) (Store, error) {
	dir := rawURL
	if strings.Contains(rawURL, "://") {
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("open artifact store %q: %w", rawURL, err)
		}
		if u.Scheme != "file" {
			return nil, fmt.Errorf("open artifact store %q: scheme %q is not supported (use file:// or a directory)", rawURL, u.Scheme)
		}
		dir = u.Host + u.Path // file://.nexo/artifacts puts ".nexo" in Host
	}
	if dir == "" {
		return nil, fmt.Errorf("open artifact store %q: no directory", rawURL)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open artifact store %q: %w", rawURL, err)
	}
	return &Dir{Root: abs}, nil
}

// Dir is a Store in a directory: <Root>/<run id>/<name>.
type Dir struct {
	Root string
}

func (d *Dir) path(runID, name string) (string, error) {
	for _, part := range []struct{ what, v string }{{"run id", runID}, {"artifact name", name}} {
		if part.v == "" || part.v == "." || part.v == ".." || strings.ContainsAny(part.v, "/\\\x00") {
			return "", fmt.Errorf("%s %q is not a plain name", part.what, part.v)
		}
	}
	return filepath.Join(d.Root, runID, name), nil
}

// Put writes the artifact atomically (temp file + rename), so a reader never sees half.
func (d *Dir) Put(_ context.Context, runID, name string, data []byte) error {
	p, err := d.path(runID, name)
	if err != nil {
		return fmt.Errorf("put artifact: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("put artifact %s/%s: %w", runID, name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+name+".*")
	if err != nil {
		return fmt.Errorf("put artifact %s/%s: %w", runID, name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("put artifact %s/%s: %w", runID, name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("put artifact %s/%s: %w", runID, name, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("put artifact %s/%s: %w", runID, name, err)
	}
	return nil
}

// Get reads the artifact; a missing one is ErrNotFound.
func (d *Dir) Get(_ context.Context, runID, name string) ([]byte, error) {
	p, err := d.path(runID, name)
	if err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("get artifact %s of run %s from %s: %w", name, runID, d.Root, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get artifact %s of run %s: %w", name, runID, err)
	}
	return b, nil
}

// PutBlob writes data under <Root>/blobs/<sha256>, once.
func (d *Dir) PutBlob(ctx context.Context, data []byte) (string, error) {
	sum := Sum(data)
	p := filepath.Join(d.Root, "blobs", sum)
	if _, err := os.Stat(p); err == nil {
		return sum, nil
	}
	if err := d.Put(ctx, "blobs", sum, data); err != nil {
		return "", fmt.Errorf("put blob %s: %w", sum, err)
	}
	return sum, nil
}

// GetBlob reads the blob named sum and checks its bytes against the name.
func (d *Dir) GetBlob(_ context.Context, sum string) ([]byte, error) {
	if !ValidSum(sum) {
		return nil, fmt.Errorf("get blob %q: not a sha256 name", sum)
	}
	b, err := os.ReadFile(filepath.Join(d.Root, "blobs", sum))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("get blob %s from %s: %w", sum, d.Root, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sum, err)
	}
	if Sum(b) != sum {
		return nil, fmt.Errorf("get blob %s: %w", sum, ErrChecksum)
	}
	return b, nil
}

// Location is the artifact's file path.
func (d *Dir) Location(runID, name string) string {
	return filepath.Join(d.Root, runID, name)
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
