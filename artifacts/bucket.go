package artifacts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	// The drivers a deployment's artifacts.url may name, registered with blob.DefaultURLMux.
	// Each reads its credentials the way its SDK does (AWS_*, GOOGLE_APPLICATION_CREDENTIALS,
	// AZURE_STORAGE_*); see the README.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)

// blobPrefix is the folder of content-addressed blobs: blobs/<sha256>. A run is never
// named that (Put refuses it), so no artifact can land on a blob's key.
const blobPrefix = "blobs"

// Schemes are the URL schemes Open accepts (besides a plain directory path).
var Schemes = []string{fileblob.Scheme, "mem", "s3", "gs", "azblob"}

// Options tune a store.
type Options struct {
	// CacheBytes bounds the in-process cache of blob reads (Open uses
	// DefaultCacheBytes); 0 or less means no cache.
	CacheBytes int64
}

// Bucket is a Store over a gocloud.dev/blob bucket. Keys are <run id>/<name> for
// artifacts and blobs/<sha256> for blobs, so a directory store keeps the layout of the
// earlier directory-only store and its files stay readable. Reads of blobs go through a
// small LRU cache: a blob never changes, so a cached copy is never stale.
type Bucket struct {
	b     *blob.Bucket
	url   string // as given, for messages
	base  string // Location prefix: a directory, or scheme://bucket/prefix
	file  bool   // base is a directory
	cache *blobCache
}

// Open returns the store at rawURL with a cache of DefaultCacheBytes. See OpenWith.
func Open(rawURL string) (Store, error) {
	b, err := OpenWith(context.Background(), rawURL, Options{CacheBytes: DefaultCacheBytes})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// OpenWith returns the store at rawURL: a plain directory path or a file:// URL (a
// relative one, such as file://.nexo/artifacts, is resolved against the working directory
// now, so the store does not move if the process later changes directory; the directory is
// created if missing), mem:// (a new empty store in this process, for tests), or s3://,
// gs:// and azblob:// URLs as gocloud.dev/blob reads them (s3://bucket?region=eu-west-1,
// gs://bucket, azblob://container; a prefix=dir/ query parameter keeps the store under a
// folder of the bucket).
func OpenWith(ctx context.Context, rawURL string, o Options) (*Bucket, error) {
	st := &Bucket{url: rawURL, cache: newBlobCache(o.CacheBytes)}
	dir, u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u == nil {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("open artifact store %q: %w", rawURL, err)
		}
		// Sidecar metadata files (.attrs) are off: nothing reads content types back, and
		// without them the directory holds exactly <run>/<name> and blobs/<sha256>, as the
		// earlier directory store did. Temp files sit next to their target, so the rename
		// that publishes a write works when the directory is on its own mount.
		b, err := fileblob.OpenBucket(abs, &fileblob.Options{
			CreateDir: true, DirFileMode: 0o755, NoTempDir: true, Metadata: fileblob.MetadataDontWrite,
		})
		if err != nil {
			return nil, fmt.Errorf("open artifact store %q: %w", rawURL, err)
		}
		st.b, st.base, st.file = b, abs, true
		return st, nil
	}
	b, err := blob.DefaultURLMux().OpenBucketURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("open artifact store %q: %w", rawURL, err)
	}
	st.b = b
	st.base = u.Scheme + "://" + u.Host + "/" + u.Query().Get("prefix")
	return st, nil
}

// parseURL returns the directory of a directory store, or the URL of any other store
// after checking that its scheme is one of Schemes.
func parseURL(rawURL string) (dir string, u *url.URL, err error) {
	if strings.TrimSpace(rawURL) == "" {
		return "", nil, fmt.Errorf("open artifact store: empty URL (want a directory or a URL with one of the schemes %s)", schemeList())
	}
	if !strings.Contains(rawURL, "://") {
		return rawURL, nil, nil
	}
	u, err = url.Parse(rawURL)
	if err != nil {
		return "", nil, fmt.Errorf("open artifact store %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case fileblob.Scheme:
		dir = u.Host + u.Path // file://.nexo/artifacts puts ".nexo" in Host
		if dir == "" {
			return "", nil, fmt.Errorf("open artifact store %q: no directory", rawURL)
		}
		return dir, nil, nil
	case "mem":
		return "", u, nil
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return "", nil, fmt.Errorf("open artifact store %q: no bucket (want %s://<bucket>)", rawURL, u.Scheme)
		}
		return "", u, nil
	}
	return "", nil, fmt.Errorf("open artifact store %q: scheme %q is not supported (want a directory or a URL with one of the schemes %s)", rawURL, u.Scheme, schemeList())
}

func schemeList() string {
	s := make([]string, len(Schemes))
	for i, sc := range Schemes {
		s[i] = sc + "://"
	}
	return strings.Join(s, ", ")
}

// key returns the bucket key of an artifact, refusing names that are not plain (they
// would leave the run's folder) and the reserved run id of blobs.
func key(runID, name string) (string, error) {
	for _, part := range []struct{ what, v string }{{"run id", runID}, {"artifact name", name}} {
		if part.v == "" || part.v == "." || part.v == ".." || strings.ContainsAny(part.v, "/\\\x00") {
			return "", fmt.Errorf("%s %q is not a plain name", part.what, part.v)
		}
	}
	return runID + "/" + name, nil
}

func blobKey(sum string) string { return blobPrefix + "/" + sum }

func notFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// Put writes the artifact; the driver publishes it whole (a directory store writes a temp
// file and renames it).
func (s *Bucket) Put(ctx context.Context, runID, name string, data []byte) error {
	k, err := key(runID, name)
	if err != nil {
		return fmt.Errorf("put artifact: %w", err)
	}
	if runID == blobPrefix {
		return fmt.Errorf("put artifact %s/%s: run id %q is reserved for the blob store", runID, name, blobPrefix)
	}
	if err := s.b.WriteAll(ctx, k, data, nil); err != nil {
		return fmt.Errorf("put artifact %s/%s to %s: %w", runID, name, s.url, err)
	}
	return nil
}

// Get reads the artifact; a missing one is ErrNotFound.
func (s *Bucket) Get(ctx context.Context, runID, name string) ([]byte, error) {
	k, err := key(runID, name)
	if err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	b, err := s.b.ReadAll(ctx, k)
	if notFound(err) {
		return nil, fmt.Errorf("get artifact %s of run %s from %s: %w", name, runID, s.url, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get artifact %s of run %s from %s: %w", name, runID, s.url, err)
	}
	return b, nil
}

// PutFrom streams r to the artifact. The write is published only when r is read to its
// end: on an error the writer is aborted (its context canceled before Close), so a
// half-copied workspace never replaces a whole one.
func (s *Bucket) PutFrom(ctx context.Context, runID, name string, r io.Reader) (int64, error) {
	k, err := key(runID, name)
	if err != nil {
		return 0, fmt.Errorf("put artifact: %w", err)
	}
	if runID == blobPrefix {
		return 0, fmt.Errorf("put artifact %s/%s: run id %q is reserved for the blob store", runID, name, blobPrefix)
	}
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w, err := s.b.NewWriter(wctx, k, nil)
	if err != nil {
		return 0, fmt.Errorf("put artifact %s/%s to %s: %w", runID, name, s.url, err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		abort()
		_ = w.Close() // reports the abort
		return n, fmt.Errorf("put artifact %s/%s to %s after %d bytes: %w", runID, name, s.url, n, err)
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("put artifact %s/%s to %s: %w", runID, name, s.url, err)
	}
	return n, nil
}

// GetReader opens the artifact; a missing one is ErrNotFound.
func (s *Bucket) GetReader(ctx context.Context, runID, name string) (io.ReadCloser, error) {
	k, err := key(runID, name)
	if err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	rc, err := s.b.NewReader(ctx, k, nil)
	if notFound(err) {
		return nil, fmt.Errorf("get artifact %s of run %s from %s: %w", name, runID, s.url, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get artifact %s of run %s from %s: %w", name, runID, s.url, err)
	}
	return rc, nil
}

// PutBlob writes data under blobs/<sha256> unless a blob of that name exists: the name is
// the content, so an existing blob already holds these bytes. Two processes writing the
// same new blob at once both write the same bytes, and each write is published whole, so
// a reader never sees a mix. (No conditional write: not every S3-compatible store supports
// If-None-Match, and it would add nothing here.)
//
// An existing blob last written more than FreshenAfter ago is written again, which moves
// its modification time to now: a caller that puts a blob is about to reference it (a
// snapshot whose file content the store already held, a skill file, a retried payload),
// and the collector (Collect) never sweeps a blob modified within its grace period, which
// is at least MinGrace > FreshenAfter. So a blob that nothing referenced when the collector
// marked, and that a run references again by putting it while the collector sweeps, is
// fresh when the collector looks at it again before deleting it. (gocloud.dev/blob has no
// "touch"; the rewrite is of the same bytes, so readers see no change.)
func (s *Bucket) PutBlob(ctx context.Context, data []byte) (string, error) {
	sum := Sum(data)
	k := blobKey(sum)
	attrs, err := s.b.Attributes(ctx, k)
	switch {
	case notFound(err):
		attrs = nil
	case err != nil:
		return "", fmt.Errorf("put blob %s to %s: %w", sum, s.url, err)
	}
	if attrs == nil || time.Since(attrs.ModTime) > FreshenAfter {
		if err := s.b.WriteAll(ctx, k, data, nil); err != nil {
			return "", fmt.Errorf("put blob %s to %s: %w", sum, s.url, err)
		}
	}
	// A process that writes a blob often reads it back soon (the next model call of the
	// same thread); the caller keeps data, so the cache gets its own copy.
	s.cache.add(sum, bytes.Clone(data))
	return sum, nil
}

// GetBlob returns the blob named sum, from the cache when it holds it, else from the
// bucket, checked against its name (ErrChecksum). A missing one is ErrNotFound. The
// caller owns the returned bytes.
func (s *Bucket) GetBlob(ctx context.Context, sum string) ([]byte, error) {
	if !ValidSum(sum) {
		return nil, fmt.Errorf("get blob %q: not a sha256 name (64 lowercase hex digits)", sum)
	}
	if b, ok := s.cache.get(sum); ok {
		return bytes.Clone(b), nil
	}
	b, err := s.b.ReadAll(ctx, blobKey(sum))
	if notFound(err) {
		return nil, fmt.Errorf("get blob %s from %s: %w", sum, s.url, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s from %s: %w", sum, s.url, err)
	}
	if got := Sum(b); got != sum {
		return nil, fmt.Errorf("get blob %s from %s: the stored bytes hash to %s: %w", sum, s.url, got, ErrChecksum)
	}
	s.cache.add(sum, bytes.Clone(b))
	return b, nil
}

// Location is the artifact's file path in a directory store, its URL otherwise.
func (s *Bucket) Location(runID, name string) string {
	if s.file {
		return filepath.Join(s.base, runID, name)
	}
	return s.base + runID + "/" + name
}

// Close closes the bucket.
func (s *Bucket) Close() error {
	if err := s.b.Close(); err != nil {
		return fmt.Errorf("close artifact store %s: %w", s.url, err)
	}
	return nil
}
