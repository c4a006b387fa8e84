package artifacts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// Retention of the store (issue 24, item 6). Nothing in the store says who needs a blob:
// a blob is named by its content and referenced from Temporal history (a thread head, a
// snapshot manifest, an External Storage claim), from the memo (the stored record), and
// from other blobs (a thread segment names the one before it, a manifest names the file
// contents, a record names its thread and snapshots). So the collector marks and sweeps:
// the caller marks the roots (every reference it can see in the histories of the runs
// that must stay readable, see runs.Client.MarkStore), Collect follows references from
// blob to blob and adds the stored records found in the store, then deletes what nothing
// marked and nobody wrote for the grace period.
//
// A reference is found by its shape, not its meaning: every run of exactly 64 lowercase
// hex digits in a root or a marked blob is taken for a blob name. That keeps a blob some
// code path references in a way this file never heard of (a new field, a payload inside
// a payload), at the price of keeping a blob whose name only looks like a reference, which
// costs bytes and never a run.

const (
	// FreshenAfter: PutBlob writes an existing blob again when it was last written longer
	// ago than this, so a blob that is referenced again looks new to the collector.
	FreshenAfter = 30 * time.Minute
	// MinGrace is the shortest grace period Collect accepts: longer than FreshenAfter, with
	// room for the clocks of the writer, the store and the collector to disagree.
	MinGrace = time.Hour
	// DefaultGrace is the grace period of starter store gc.
	DefaultGrace = 24 * time.Hour
)

// maxParsedBlob bounds a blob the collector decodes whole (a manifest, a record) rather
// than only scanning it for references.
const maxParsedBlob = 64 << 20

// Marks are the roots of a collection: blob names referenced from outside the store and
// the runs whose artifacts (<run>/<name> keys) stay. Not safe for concurrent use.
type Marks struct {
	refs map[string]bool
	runs map[string]bool
}

// NewMarks returns empty marks.
func NewMarks() *Marks { return &Marks{refs: map[string]bool{}, runs: map[string]bool{}} }

// Scan marks every blob name that b contains (any run of exactly 64 lowercase hex digits).
func (m *Marks) Scan(b []byte) {
	sc := refScanner{found: func(s string) { m.refs[s] = true }}
	_, _ = sc.Write(b)
	sc.flush()
}

// Blob marks the blob named sum.
func (m *Marks) Blob(sum string) {
	if ValidSum(sum) {
		m.refs[sum] = true
	}
}

// Run keeps the artifacts of run id (workflow id).
func (m *Marks) Run(id string) { m.runs[id] = true }

// Has reports whether blob sum is marked.
func (m *Marks) Has(sum string) bool { return m.refs[sum] }

// KeepsRun reports whether the artifacts of run id are kept.
func (m *Marks) KeepsRun(id string) bool { return m.runs[id] }

// refScanner is an io.Writer that reports every run of exactly 64 lowercase hex digits in
// what is written to it, across writes.
type refScanner struct {
	n     int
	tok   [64]byte
	found func(string)
}

func (sc *refScanner) Write(p []byte) (int, error) {
	for _, c := range p {
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'f' {
			if sc.n < len(sc.tok) {
				sc.tok[sc.n] = c
			}
			sc.n++
			continue
		}
		sc.flush()
	}
	return len(p), nil
}

// flush ends the current run of hex digits.
func (sc *refScanner) flush() {
	if sc.n == len(sc.tok) {
		sc.found(string(sc.tok[:]))
	}
	sc.n = 0
}

// GCOptions tune Collect.
type GCOptions struct {
	// Grace: an unreferenced blob or artifact modified within it stays (at least
	// MinGrace). It covers what runs are writing while the collector runs: a new blob
	// whose reference is not in history yet, a blob referenced again (PutBlob freshens it).
	Grace time.Duration
	// Retention (artifacts.retention): a stored record of a run that closed (its
	// updated_at) longer ago is no root, so it and what only it references go. 0 keeps
	// every stored record.
	Retention time.Duration
	// DryRun lists what would go and deletes nothing.
	DryRun bool
	// Now is the time the collection runs at (zero: time.Now()).
	Now time.Time

	// afterMark runs between the mark and the sweep (tests: a run writing meanwhile).
	afterMark func()
}

// GCEntry is one key the collector removed (or would remove, in a dry run).
type GCEntry struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// GCReport says what a collection found and did. Counts are objects, bytes their sizes.
type GCReport struct {
	DryRun bool `json:"dry_run"`
	// Blobs and BlobBytes: every blob in the store when the collection began.
	Blobs     int   `json:"blobs"`
	BlobBytes int64 `json:"blob_bytes"`
	// Kept: blobs something references.
	Kept      int   `json:"kept"`
	KeptBytes int64 `json:"kept_bytes"`
	// Young: blobs and artifacts nothing references, kept because they were written
	// within the grace period (or freshened during the collection).
	Young      int   `json:"young"`
	YoungBytes int64 `json:"young_bytes"`
	// Swept: blobs removed (in a dry run: that would be).
	Swept      int   `json:"swept"`
	SweptBytes int64 `json:"swept_bytes"`
	// ArtifactsSwept: run artifacts (<run>/<name>) of runs nothing keeps, removed.
	ArtifactsSwept     int   `json:"artifacts_swept"`
	ArtifactBytesSwept int64 `json:"artifact_bytes_swept"`
	// Records: stored run records found in the store and kept as roots; RecordsExpired:
	// those past Retention, left to the sweep.
	Records        int `json:"records"`
	RecordsExpired int `json:"records_expired"`
	// Removed lists every key swept (or to sweep), oldest first.
	Removed []GCEntry `json:"removed"`
	// Problems: referenced blobs that are missing or corrupt. They are reported, never
	// deleted; a run that needs one says so when it reads it.
	Problems []string `json:"problems"`
}

// storeObject is one listed key.
type storeObject struct {
	key  string
	size int64
	mod  time.Time
}

// listObjects lists the store's blobs (blobs/<sha256>) and run artifacts (<run>/<name>),
// for gc and verify. Anything else under blobs/ (a driver's temp file of a write in
// flight) is not a blob and not ours; keys of another shape are not the store's.
func (s *Bucket) listObjects(ctx context.Context, op string) (blobs, arts []storeObject, err error) {
	it := s.b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return blobs, arts, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: list: %w", op, s.url, err)
		}
		if obj.IsDir {
			continue
		}
		so := storeObject{key: obj.Key, size: obj.Size, mod: obj.ModTime}
		if sum, ok := strings.CutPrefix(obj.Key, blobPrefix+"/"); ok {
			if ValidSum(sum) {
				blobs = append(blobs, so)
			}
			continue
		}
		if run, name, ok := strings.Cut(obj.Key, "/"); ok && run != "" && name != "" && !strings.Contains(name, "/") {
			arts = append(arts, so)
		}
	}
}

// collection is the state of one Collect.
type collection struct {
	s       *Bucket
	blobs   map[string]storeObject
	marked  map[string]bool
	scanned map[string]bool
	queue   []string
	report  *GCReport
}

// Collect marks every blob that marks references, directly or through other blobs, and
// every stored record within o.Retention (with what it references, and its run's
// artifacts); then it deletes each blob and run artifact that nothing marked and that was
// last modified before the grace period, unless o.DryRun.
//
// Safe against runs writing meanwhile: the grace period spares anything new, and PutBlob
// freshens an existing blob it is asked to store (see FreshenAfter), so a blob that a new
// snapshot manifest references again after dedup is new again. Before deleting, the
// collector reads each candidate's modification time once more and spares it if it moved
// into the grace period. (What is left is the moment between that read and the delete,
// the window git's prune leaves too; the grace period is what makes hitting it need a
// blob that was unreferenced, old and re-put in the same instant.)
func (s *Bucket) Collect(ctx context.Context, marks *Marks, o GCOptions) (GCReport, error) {
	if o.Grace < MinGrace {
		return GCReport{}, fmt.Errorf("collect %s: grace %s is shorter than the minimum %s (a blob a run puts again is freshened only when older than %s)", s.url, o.Grace, MinGrace, FreshenAfter)
	}
	if o.Retention < 0 {
		return GCReport{}, fmt.Errorf("collect %s: retention %s is negative", s.url, o.Retention)
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	cutoff := now.Add(-o.Grace)
	rep := GCReport{DryRun: o.DryRun, Removed: []GCEntry{}, Problems: []string{}}
	c := &collection{s: s, blobs: map[string]storeObject{}, marked: map[string]bool{}, scanned: map[string]bool{}, report: &rep}

	blobObjs, runObjs, err := s.listObjects(ctx, "collect")
	if err != nil {
		return rep, err
	}
	for _, so := range blobObjs {
		c.blobs[strings.TrimPrefix(so.key, blobPrefix+"/")] = so
		rep.Blobs++
		rep.BlobBytes += so.size
	}

	// Roots first, then the stored records nothing reached from them: a record of a run
	// Temporal forgot is found only in the store.
	for sum := range marks.refs {
		c.mark(sum, true)
	}
	if err := c.closure(ctx); err != nil {
		return rep, err
	}
	keepRuns := map[string]bool{}
	for id := range marks.runs {
		keepRuns[id] = true
	}
	if err := c.records(ctx, o.Retention, now, keepRuns); err != nil {
		return rep, err
	}
	if err := c.closure(ctx); err != nil {
		return rep, err
	}

	if o.afterMark != nil {
		o.afterMark()
	}

	// Sweep.
	var doomed []storeObject
	for sum, so := range c.blobs {
		if c.marked[sum] {
			rep.Kept++
			rep.KeptBytes += so.size
			continue
		}
		doomed = append(doomed, so)
	}
	for _, so := range runObjs {
		run, _, _ := strings.Cut(so.key, "/")
		if !keepRuns[run] {
			doomed = append(doomed, so)
		}
	}
	sort.Slice(doomed, func(i, j int) bool {
		if !doomed[i].mod.Equal(doomed[j].mod) {
			return doomed[i].mod.Before(doomed[j].mod)
		}
		return doomed[i].key < doomed[j].key
	})
	for _, so := range doomed {
		isBlob := strings.HasPrefix(so.key, blobPrefix+"/")
		if !so.mod.Before(cutoff) {
			rep.Young++
			rep.YoungBytes += so.size
			continue
		}
		// Look again: a run may have put the blob (PutBlob freshens it) or rewritten the
		// artifact since the listing.
		attrs, err := s.b.Attributes(ctx, so.key)
		if notFound(err) {
			continue // someone else removed it
		}
		if err != nil {
			return rep, fmt.Errorf("collect %s: read the attributes of %s: %w", s.url, so.key, err)
		}
		if !attrs.ModTime.Before(cutoff) {
			rep.Young++
			rep.YoungBytes += so.size
			continue
		}
		if !o.DryRun {
			if err := s.b.Delete(ctx, so.key); err != nil && !notFound(err) {
				return rep, fmt.Errorf("collect %s: delete %s: %w", s.url, so.key, err)
			}
		}
		rep.Removed = append(rep.Removed, GCEntry{Key: so.key, Size: so.size, ModTime: attrs.ModTime.UTC()})
		if isBlob {
			rep.Swept++
			rep.SweptBytes += so.size
		} else {
			rep.ArtifactsSwept++
			rep.ArtifactBytesSwept += so.size
		}
	}
	sort.Strings(rep.Problems)
	return rep, nil
}

// mark marks blob sum if the store holds it; scan queues it to be read for references.
func (c *collection) mark(sum string, scan bool) {
	if _, ok := c.blobs[sum]; !ok {
		return // a hex string that names no blob here (an artifact's sha256, an id)
	}
	c.marked[sum] = true
	if scan && !c.scanned[sum] {
		c.scanned[sum] = true
		c.queue = append(c.queue, sum)
	}
}

// closure reads every queued blob for the references it holds, until none is left.
func (c *collection) closure(ctx context.Context) error {
	for len(c.queue) > 0 {
		sum := c.queue[len(c.queue)-1]
		c.queue = c.queue[:len(c.queue)-1]
		if err := c.follow(ctx, sum); err != nil {
			return err
		}
	}
	return nil
}

// follow marks what blob sum references. A snapshot manifest's file contents are marked
// without being read (they are the workspace's bytes, not references), and each is checked
// to be in the store at the size the manifest says; any other blob is scanned whole.
func (c *collection) follow(ctx context.Context, sum string) error {
	r, err := c.s.b.NewReader(ctx, blobKey(sum), nil)
	if notFound(err) {
		c.problem("blob %s is referenced but was removed while the collector ran", sum)
		return nil
	}
	if err != nil {
		return fmt.Errorf("collect %s: read blob %s: %w", c.s.url, sum, err)
	}
	defer r.Close()
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(`{"v":`))
	if string(head) == `{"v":` && c.blobs[sum].size <= maxParsedBlob {
		body, err := io.ReadAll(br)
		if err != nil {
			return fmt.Errorf("collect %s: read blob %s: %w", c.s.url, sum, err)
		}
		c.checkSum(sum, body)
		var m api.Manifest
		if json.Unmarshal(body, &m) == nil && m.Version > 0 {
			for _, e := range m.Entries {
				if e.Type != api.EntryFile {
					continue
				}
				so, ok := c.blobs[e.SHA256]
				switch {
				case !ok:
					c.problem("snapshot manifest %s names %s (sha256 %s), which is not in the store", sum, e.Path, e.SHA256)
				case so.size != e.Size:
					c.problem("snapshot manifest %s names %s (sha256 %s, %d bytes), but the store holds %d bytes under that name (corrupt)", sum, e.Path, e.SHA256, e.Size, so.size)
				}
				c.mark(e.SHA256, false)
			}
			return nil
		}
		c.scan(body)
		return nil
	}
	h := sha256.New()
	sc := refScanner{found: func(s string) { c.mark(s, true) }}
	if _, err := io.Copy(io.MultiWriter(h, &sc), br); err != nil {
		return fmt.Errorf("collect %s: read blob %s: %w", c.s.url, sum, err)
	}
	sc.flush()
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		c.problem("blob %s is corrupt: its bytes hash to %s (kept; what it references is kept as far as it can be read)", sum, got)
	}
	return nil
}

func (c *collection) scan(b []byte) {
	sc := refScanner{found: func(s string) { c.mark(s, true) }}
	_, _ = sc.Write(b)
	sc.flush()
}

func (c *collection) checkSum(sum string, body []byte) {
	if got := Sum(body); got != sum {
		c.problem("blob %s is corrupt: its bytes hash to %s (kept; what it references is kept as far as it can be read)", sum, got)
	}
}

func (c *collection) problem(format string, a ...any) {
	c.report.Problems = append(c.report.Problems, fmt.Sprintf(format, a...))
}

// recordHead is how every stored record's JSON begins (api.Record's first field).
const recordHead = `{"id":"`

// records marks the stored run records among the blobs nothing marked yet, unless they
// are past retention (0: keep all), and keeps their runs' artifacts. A record is known by
// its first bytes, then by decoding it; only a blob that starts like one is read whole.
func (c *collection) records(ctx context.Context, retention time.Duration, now time.Time, keepRuns map[string]bool) error {
	sums := make([]string, 0, len(c.blobs))
	for sum, so := range c.blobs {
		if !c.marked[sum] && so.size > int64(len(recordHead)) && so.size <= maxParsedBlob {
			sums = append(sums, sum)
		}
	}
	sort.Strings(sums)
	for _, sum := range sums {
		head := make([]byte, len(recordHead))
		r, err := c.s.b.NewRangeReader(ctx, blobKey(sum), 0, int64(len(head)), nil)
		if notFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("collect %s: read blob %s: %w", c.s.url, sum, err)
		}
		_, err = io.ReadFull(r, head)
		r.Close()
		if err != nil || !bytes.Equal(head, []byte(recordHead)) {
			continue
		}
		body, err := c.s.b.ReadAll(ctx, blobKey(sum))
		if notFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("collect %s: read blob %s: %w", c.s.url, sum, err)
		}
		var rec api.Record
		if json.Unmarshal(body, &rec) != nil || rec.ID == "" || rec.Workflow == "" || rec.Status == "" {
			continue
		}
		if retention > 0 && rec.UpdatedAt.Before(now.Add(-retention)) {
			c.report.RecordsExpired++
			continue
		}
		c.report.Records++
		keepRuns[rec.ID] = true
		c.mark(sum, true)
	}
	return nil
}
